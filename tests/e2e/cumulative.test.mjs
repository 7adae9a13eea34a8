// Issue 12 item 2, end to end: cumulative profiles become deltas.
//
// The real Go demo (examples/demo: net/http/pprof, allocating and
// contending) is scraped by the real profd every second for its allocs,
// block and mutex profiles — served cumulative, since process start, so
// profd marks them __delta__="false". Midway the demo is killed and
// restarted on the same address (the same series: a process restart).
// Then, for each of the three types:
//  - the raw timeline (delta=false) equals the totals this test computes
//    from the stored raw profiles themselves (fetched one by one, decoded
//    here);
//  - the default timeline shows deltas, and equals the difference of
//    consecutive raw totals, except the first profile after the restart,
//    which counts from 0 (the test knows when it restarted the target), and
//    the series' first profile, which has none (0);
//  - a merge over a range inside one process lifetime (default: deltas;
//    each profile against the one before, also before the range) equals
//    `go tool pprof -proto -base BEFORE LAST`, stack by stack; a merge
//    across the restart equals `go tool pprof -proto -base FIRST LAST1 LAST2`;
//    delta=false gives the plain sum of the raw profiles.
//
//   PROFD_BIN=build/profd node --test tests/e2e/cumulative.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import {
  apiData, buildDemo, goEnv, http, killAll, Proc, qs, run, sleep, startProfd, tempDir, waitFor,
} from './lib.mjs';

let dir, demoBin, demo, demoPort, profd, restartMs, startMs;
const TYPES = ['allocs', 'block', 'mutex'];

/* ---- a small pprof decoder: sample types, samples with their stacks as
   function names (enough to total and to compare stack by stack) ---- */
function varint(b, o) {
  let v = 0n, s = 0n;
  for (;;) {
    const c = b[o.i++];
    v |= BigInt(c & 0x7f) << s;
    if (!(c & 0x80)) return v;
    s += 7n;
  }
}
function fields(b, cb) {
  const o = { i: 0 };
  while (o.i < b.length) {
    const key = Number(varint(b, o));
    const f = key >> 3, wt = key & 7;
    if (wt === 0) cb(f, varint(b, o), null);
    else if (wt === 2) {
      const n = Number(varint(b, o));
      cb(f, null, b.subarray(o.i, o.i + n));
      o.i += n;
    } else if (wt === 1) o.i += 8;
    else if (wt === 5) o.i += 4;
    else throw new Error(`wire type ${wt}`);
  }
}
function ints(v, bytes) { // a repeated int64: packed or not
  if (v !== null) return [BigInt.asIntN(64, v)];
  const out = [], o = { i: 0 };
  while (o.i < bytes.length) out.push(BigInt.asIntN(64, varint(bytes, o)));
  return out;
}
export function decodeProfile(buf) {
  const b = buf[0] === 0x1f && buf[1] === 0x8b ? zlib.gunzipSync(buf) : buf;
  const strings = [], types = [], samples = [], locs = new Map(), funcs = new Map();
  fields(b, (f, v, bytes) => {
    if (f === 6) strings.push(Buffer.from(bytes).toString('utf8'));
    else if (f === 1) {
      const t = {};
      fields(bytes, (g, w) => { if (g === 1) t.type = Number(w); if (g === 2) t.unit = Number(w); });
      types.push(t);
    } else if (f === 2) {
      const s = { locs: [], values: [] };
      fields(bytes, (g, w, by) => {
        if (g === 1) s.locs.push(...ints(w, by));
        if (g === 2) s.values.push(...ints(w, by));
      });
      samples.push(s);
    } else if (f === 4) {
      let id = 0n; const fns = [];
      fields(bytes, (g, w, by) => {
        if (g === 1) id = w;
        if (g === 4) fields(by, (h, x) => { if (h === 1) fns.push(x); });
      });
      locs.set(id, fns);
    } else if (f === 5) {
      let id = 0n, name = 0;
      fields(bytes, (g, w) => { if (g === 1) id = w; if (g === 2) name = Number(w); });
      funcs.set(id, name);
    }
  });
  const typeNames = types.map((t) => strings[t.type]);
  const stacks = new Map(); // "leaf;...;root" -> values (BigInt), summed
  const totals = typeNames.map(() => 0n);
  for (const s of samples) {
    const names = [];
    for (const l of s.locs) for (const fid of locs.get(l) || []) names.push(strings[funcs.get(fid)]);
    const key = names.join(';');
    const cur = stacks.get(key) || typeNames.map(() => 0n);
    s.values.forEach((v, i) => { cur[i] += v; totals[i] += v; });
    stacks.set(key, cur);
  }
  return { typeNames, stacks, totals };
}

async function fetchBuf(url) {
  const r = await http(url, { timeoutMs: 30000 });
  assert.equal(r.status, 200, `GET ${url}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

// The stored profile of `type` at exactly ts (ms): single mode, nearest at or before.
async function rawProfile(type, ts) {
  const r = await fetchBuf(`${profd.base}/api/v1/query?` +
    qs({ query: `${type}{job="demo"}`, time: (ts / 1000).toFixed(3), report: 'proto' }));
  assert.equal(r.headers.get('x-profd-timestamp'), String(ts));
  return r.buf;
}

function stackMap(p) { // non-zero stacks only, values as strings
  const m = {};
  for (const [k, v] of p.stacks) if (v.some((x) => x !== 0n)) m[k] = v.map(String).join(',');
  return m;
}

before(async () => {
  dir = tempDir('pd-cumulative-');
  demoBin = await buildDemo(dir);
  demo = await startDemoOn(0);
  demoPort = demo.port;
  const config = path.join(dir, 'profd.yml');
  fs.writeFileSync(config, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: demo
    profiling_config:
      pprof_config:
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate', 'cpu']
    .map((t) => `        ${t}: {enabled: ${TYPES.includes(t)}}`).join('\n')}
    static_configs:
      - targets: ["127.0.0.1:${demoPort}"]
`);
  startMs = Date.now();
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
});

after(async () => {
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function startDemoOn(port) {
  const { freePort } = await import('./lib.mjs');
  port = port || (await freePort());
  // Go's allocs profile is as of the last completed GC: with the default
  // GOGC the demo's growing heap makes GCs seconds apart, its counters lag,
  // and a fresh process may show more than the old one did — a restart
  // that no total shows (the reset rule's blind spot, as Prometheus'; see
  // docs/api.md "Cumulative profiles"). GOGC=5 keeps the counters current.
  const p = new Proc('demo', demoBin, [`-listen=127.0.0.1:${port}`],
    { env: { ...process.env, GOGC: '5' } });
  p.port = port;
  await waitFor('the Go demo to serve /debug/pprof/', async () => {
    if (p.exited) throw new Error(`demo exited early\n${p.tail()}`);
    const r = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 20000, 100);
  return p;
}

async function rawTimeline(type) {
  const d = await apiData(profd.base, '/api/v1/query_range?' +
    qs({ query: `${type}{job="demo"}`, from: String(startMs / 1000), to: String(Date.now() / 1000), delta: 'false' }));
  assert.equal(d.length, 1, `one ${type} series: ${JSON.stringify(d).slice(0, 300)}`);
  return d[0];
}

test('allocs, block and mutex of a Go target scraped across a restart: delta timelines and merges', { timeout: 200000 }, async () => {
  // before the restart: long enough that the counters are well above what a
  // fresh process shows in its first seconds
  await waitFor('7 profiles of each type', async () => {
    for (const t of TYPES) if ((await rawTimeline(t)).timestamps.length < 7) return false;
    return true;
  }, 60000, 500);
  demo.kill('SIGKILL');
  await demo.wait(5000).catch(() => {});
  await sleep(1500);
  restartMs = Date.now();
  demo = await startDemoOn(demoPort);
  const nBefore = {};
  for (const t of TYPES) nBefore[t] = (await rawTimeline(t)).timestamps.length;
  await waitFor('5 profiles of each type after the restart', async () => {
    for (const t of TYPES) {
      const tl = await rawTimeline(t);
      if (tl.timestamps.filter((ts) => ts > restartMs).length < 5) return false;
    }
    return true;
  }, 60000, 500);
  demo.kill('SIGKILL'); // nothing more comes in: the answers below are stable
  // (once every target of the demo is down, each has had a scrape fail after
  // the kill, so every scrape before it is stored: waited for, not slept)
  await waitFor('the demo\'s targets to be down', async () => {
    const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets.filter((t) => t.scrapePool === 'demo');
    return ts.length > 0 && ts.every((t) => t.health === 'down');
  }, 120000, 250);
  const to = Date.now();

  for (const type of TYPES) {
    const raw = await rawTimeline(type);
    assert.equal(raw.labels.__delta__, 'false', `${type} is marked served cumulative`);
    assert.equal(raw.delta, undefined);
    const ts = raw.timestamps;
    const kinds = raw.sample_types.map((s) => s.kind);
    const cum = raw.sample_types.map((s) => ['alloc_objects', 'alloc_space', 'contentions', 'delay'].includes(s.type));
    assert.deepEqual(kinds, cum.map((c, i) => (c ? 'cumulative' : 'gauge')), `${type} kinds`);

    // raw totals = totals of the raw profiles, decoded here
    const profs = [];
    for (let k = 0; k < ts.length; k++) {
      const p = decodeProfile(await rawProfile(type, ts[k]));
      profs.push(p);
      assert.deepEqual(raw.totals[k].map(String), p.totals.map(String), `${type} raw totals at ${ts[k]}`);
    }
    const first2 = ts.findIndex((t) => t > restartMs);
    assert.ok(first2 >= 7 && ts.length - first2 >= 5, `${type}: ${first2} profiles before the restart, ${ts.length - first2} after`);
    // the premise: some cumulative total goes down at the restart (the
    // rule's condition; a fresh Go process may well show more alloc_objects
    // than the old one did, its startup allocating more than a quiet
    // process does in seconds — but not more alloc_space than the leak)
    assert.ok(cum.some((c, v) => c && profs[first2].totals[v] < profs[first2 - 1].totals[v]),
      `${type}: the restart shows as a cumulative total going down: ` +
      raw.sample_types.map((st, v) => `${st.type} ${profs.map((p) => p.totals[v]).join(' ')}`).join('; ') +
      ` (restart before ${first2})`);

    // the default timeline: deltas, the first profile after the restart from 0
    const dl = (await apiData(profd.base, '/api/v1/query_range?' +
      qs({ query: `${type}{job="demo"}`, from: String(startMs / 1000), to: String(to / 1000) })))[0];
    assert.equal(dl.delta, true);
    assert.deepEqual(dl.timestamps, ts, `${type}: every profile`);
    for (let k = 0; k < ts.length; k++) {
      const want = profs[k].totals.map((x, v) => {
        if (!cum[v]) return x; // a gauge keeps its level
        if (k === 0) return 0n; // the series' first profile: no delta
        return k === first2 ? x : x - profs[k - 1].totals[v];
      });
      assert.deepEqual(dl.totals[k].map(String), want.map(String), `${type} delta at ${ts[k]} (k=${k}, restart at ${first2})`);
    }
    // a window starting mid-series: its first point against the profile before it
    const mid = (await apiData(profd.base, '/api/v1/query_range?' +
      qs({ query: `${type}{job="demo"}`, from: (ts[2] / 1000).toFixed(3), to: (to / 1000).toFixed(3) })))[0];
    assert.deepEqual(mid.totals[0].map(String), dl.totals[2].map(String), `${type}: lookback before the window`);

    // merges checked against go tool pprof -base on the raw profiles
    const file = (name, buf) => { const f = path.join(dir, name); fs.writeFileSync(f, buf); return f; };
    const pprofBase = async (out, base, ...srcs) => {
      const r = await run('go', ['tool', 'pprof', '-proto', '-output', out, '-base', base, ...srcs],
        { env: goEnv(dir) }, 120000);
      assert.equal(r.code, 0, `go tool pprof -base: ${r.stderr}`);
      return decodeProfile(fs.readFileSync(out));
    };
    const merge = async (from, to2, extra = {}) => {
      const r = await fetchBuf(`${profd.base}/api/v1/query?` + qs({
        query: `${type}{job="demo"}`, mode: 'merge', from: (from / 1000).toFixed(3), to: (to2 / 1000).toFixed(3), report: 'proto', ...extra }));
      return { p: decodeProfile(r.buf), delta: r.headers.get('x-profd-delta'), n: r.headers.get('x-profd-profiles') };
    };
    const raws = [];
    for (const k of [0, first2 - 1, first2, ts.length - 1]) raws[k] = file(`${type}-${k}.pb.gz`, await rawProfile(type, ts[k]));
    // one lifetime (after the restart): last - the profile before the range
    let got = await merge(ts[first2 + 1], ts[ts.length - 1]);
    assert.equal(got.delta, 'true', `${type}: a merge of a cumulative type defaults to deltas`);
    assert.equal(Number(got.n), ts.length - 1 - first2, `${type}: deltas counted`);
    let want = await pprofBase(path.join(dir, `${type}-want1.pb.gz`), raws[first2], raws[ts.length - 1]);
    assert.deepEqual(stackMap(got.p), stackMap(want), `${type}: merge of deltas in one lifetime = pprof -base before last`);
    assert.deepEqual(got.p.totals.map(String), want.totals.map(String));
    // across the restart, from the series' first profile: (last1 - first) + last2
    got = await merge(ts[0], ts[ts.length - 1]);
    assert.equal(got.delta, 'true');
    assert.equal(Number(got.n), ts.length - 1, `${type}: every profile but the first is a delta`);
    want = await pprofBase(path.join(dir, `${type}-want2.pb.gz`), raws[0], raws[first2 - 1], raws[ts.length - 1]);
    assert.deepEqual(stackMap(got.p), stackMap(want), `${type}: merge of deltas across the restart`);
    // raw stays available: the plain sum of the stored profiles
    got = await merge(ts[first2 + 1], ts[ts.length - 1], { delta: 'false' });
    assert.equal(got.delta, 'false');
    const sum = profs.slice(first2 + 1).reduce((acc, p) => acc.map((x, v) => x + p.totals[v]), profs[0].totals.map(() => 0n));
    assert.deepEqual(got.p.totals.map(String), sum.map(String), `${type}: delta=false sums the counters`);
  }
  // Grafana's path (Pyroscope's Connect querier): SelectSeries of
  // memory:alloc_space shows the same per-profile deltas as query_range
  const dl = (await apiData(profd.base, '/api/v1/query_range?' +
    qs({ query: 'allocs{job="demo"}', from: String(startMs / 1000), to: String(to / 1000) })))[0];
  const ai = dl.sample_types.findIndex((st) => st.type === 'alloc_space');
  const ss = await http(`${profd.base}/querier.v1.QuerierService/SelectSeries`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ profileTypeID: 'memory:alloc_space:bytes:space:bytes', labelSelector: '{job="demo"}',
      start: String(startMs), end: String(to), step: 0.1 }),
  });
  assert.equal(ss.status, 200, ss.text.slice(0, 300));
  assert.equal(ss.json.series.length, 1, ss.text.slice(0, 300));
  const pts = ss.json.series[0].points.map((p) => [Number(p.timestamp || 0), Number(p.value || 0)]).sort((x, y) => x[0] - y[0]);
  assert.deepEqual(pts.map((p) => p[1]), dl.totals.map((row) => Number(row[ai])), 'SelectSeries = the delta timeline');

  // allocs shown as inuse_space (a gauge): no deltas unless asked
  const r = await http(`${profd.base}/api/v1/query?` + qs({ query: 'allocs{job="demo"}', mode: 'merge',
    from: String(startMs / 1000), to: String(to / 1000), report: 'top', sample_index: 'inuse_space' }));
  assert.equal(r.status, 200, r.text.slice(0, 300));
  assert.equal(r.headers.get('x-profd-delta'), 'false');
  // a bad delta= is a 400 naming it
  const bad = await http(`${profd.base}/api/v1/query_range?` + qs({ query: 'allocs', delta: 'maybe' }));
  assert.equal(bad.status, 400);
  assert.match(bad.text, /invalid parameter \\"delta\\"/);
});
