// Issue 16: profd on ClickHouse (--storage.backend=clickhouse).
//
// Starts two real ClickHouse servers (Debian's clickhouse-server, loopback,
// own data dirs, config files written here, free ports) that form the
// cluster `pd2` of two shards, and:
//   1. conformance, one server: the same real profiles (shared testdata)
//      pushed through profefe's API to profd on the embedded TSDB and to
//      profd on ClickHouse; the same queries (native /api/v1 and Grafana's
//      Pyroscope querier API) give the same answers: series, labels, label
//      values, query_range totals, single profiles lossless, merges
//      through `go tool pprof -raw` identical;
//   2. the cluster: Distributed tables over both shards; write through one
//      profd, read through another; the same answers again, and both shards
//      hold part of the data;
//   3. a shard killed mid-ingest: pushes to it fail (never acknowledged),
//      the read names it, and after it returns every acknowledged profile
//      is there;
//   4. scraping split across two profd replicas by hashmod relabeling (real
//      Go targets, examples/demo): each target scraped by the replica the
//      hash names, every target's series in the one database.
// Skipped (exit 77, ctest SKIP_RETURN_CODE) where clickhouse-server is not
// installed: `scripts/install-deps.sh --test` installs it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import {
  Proc, TESTDATA, apiData, buildDemo, freePort, goEnv, http, killAll, qs, run, startDemo, startProfd, tempDir, waitFor,
} from './lib.mjs';
import { CH_BIN, chPorts, chQuery, startClickHouse } from './ch.mjs';

if (!CH_BIN) {
  console.log('SKIP: clickhouse-server is not installed (Debian 12: apt-get install clickhouse-server, ' +
    'or scripts/install-deps.sh --test); the ClickHouse backend tests need a real server');
  process.exit(77);
}

const dir = tempDir('pd-ch-');
after(async () => {
  await killAll();
  if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true });
});

/* ---------------------------------------------------------------- ClickHouse */

// Two servers; each one's config names both as the shards of cluster pd2,
// and has a user pd with a password.
function startCH(name, ports, shards) {
  const remote = shards.map((p) => `<shard><replica><host>127.0.0.1</host><port>${p}</port></replica></shard>`).join('');
  return startClickHouse(dir, name, ports, {
    config: `  <remote_servers><pd2>${remote}</pd2></remote_servers>`,
    users: '\n    <pd><password>s3cret</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></pd>',
  });
}

const p1 = await chPorts();
const p2 = await chPorts();
const ch1 = await startCH('ch1', p1, [p1.tcp, p2.tcp]);
const ch2 = await startCH('ch2', p2, [p1.tcp, p2.tcp]);
const version = await chQuery(ch1, 'SELECT version()');
console.log(`clickhouse-server ${version} on ${ch1.url} and ${ch2.url}`);

const pwfile = path.join(dir, 'ch-password');
fs.writeFileSync(pwfile, 's3cret\n');
const chArgs = (urls, db, extra = []) => ['--storage.backend=clickhouse', ...urls.map((u) => `--clickhouse.url=${u}`),
  `--clickhouse.database=${db}`, '--clickhouse.user=pd', `--clickhouse.password-file=${pwfile}`, ...extra];

/* ---------------------------------------------------------------- data */

const NOW = Date.now();
const T0 = NOW - 3600 * 1000; // the pushes' created_at: an hour ago, 10 s apart
const iso = (ms) => new Date(ms).toISOString();

// Every real profile of the shared testdata with its service/type/instance.
function corpus() {
  const out = [];
  const series = path.join(TESTDATA, 'pprof', 'go-demo-series');
  for (const f of fs.readdirSync(series).sort()) {
    const m = /^(cpu|heap)-(\d+)\.pb\.gz$/.exec(f);
    if (!m) continue;
    const i = Number(m[2]);
    out.push({ file: path.join(series, f), service: 'demo', type: m[1], instance: `i${i % 3}`, at: T0 + i * 10000 + (m[1] === 'cpu' ? 1 : 0) });
  }
  const once = path.join(TESTDATA, 'pprof', 'go-demo-once');
  const types = { 'allocs.pb.gz': 'heap', 'heap.pb.gz': 'heap', 'block.pb.gz': 'block', 'mutex.pb.gz': 'mutex',
    'goroutine.pb.gz': 'goroutine', 'threadcreate.pb.gz': 'threadcreate', 'profile.pb.gz': 'cpu' };
  let k = 0;
  for (const f of fs.readdirSync(once).sort()) {
    if (!types[f]) continue;
    out.push({ file: path.join(once, f), service: 'once', type: types[f], instance: f.replace('.pb.gz', ''), at: T0 + 500 + k++ * 1000 });
  }
  const node = path.join(TESTDATA, 'pprof', 'node');
  for (const f of fs.readdirSync(node).sort()) {
    out.push({ file: path.join(node, f), service: 'node', type: /heap/.test(f) ? 'heap' : 'cpu', instance: f, at: T0 + 700 + k++ * 1000 });
  }
  return out;
}
const CORPUS = corpus();

async function push(profd, c, extraLabels = '') {
  const params = { service: c.service, type: c.type, instance_id: c.instance, created_at: iso(c.at) };
  if (extraLabels) params.labels = extraLabels;
  return http(`${profd.base}/api/0/profiles?${qs(params)}`, { method: 'POST', body: fs.readFileSync(c.file), timeoutMs: 60000 });
}

// Pushes every item; sets item.id to the id answered (profefe's).
async function pushAll(profd, items, extraLabels = '') {
  for (const c of items) {
    const r = await push(profd, c, extraLabels);
    assert.equal(r.status, 200, `push ${c.file} to ${profd.name}: HTTP ${r.status} ${r.text}`);
    c.id = r.json.body.id;
  }
}

/* ---------------------------------------------------------------- queries */

const FROM = (T0 - 60000) / 1000;
const TO = (NOW + 1000) / 1000;

// `go tool pprof -raw` of url, with location and mapping ids resolved and
// the samples sorted: ids and sample order are the store's own (DESIGN.md
// §1 "Ids and string-table order may differ"); everything pprof prints is
// kept — header, each sample's values, labels and frames (address, mapping,
// function, file:line of every inlined line).
async function goRaw(url) {
  const r = await run('go', ['tool', 'pprof', '-raw', url], { env: goEnv(path.join(dir, 'go')) }, 120000);
  assert.equal(r.code, 0, `go tool pprof -raw ${url}: ${r.stderr}`);
  return canonRaw(r.stdout);
}

export function canonRaw(text) {
  const lines = text.split('\n');
  const iS = lines.indexOf('Samples:');
  const iL = lines.indexOf('Locations');
  const iM = lines.indexOf('Mappings');
  assert.ok(iS >= 0 && iL > iS && iM > iL, `pprof -raw output has Samples, Locations, Mappings:\n${text.slice(0, 500)}`);
  const maps = new Map();
  for (const l of lines.slice(iM + 1)) {
    const m = /^(\d+): (.*)$/.exec(l);
    if (m) maps.set(m[1], m[2]);
  }
  const locs = new Map();
  let cur = null;
  for (const l of lines.slice(iL + 1, iM)) {
    const m = /^\s*(\d+): (\S+)(?: M=(\d+))? ?(.*)$/.exec(l);
    if (m) {
      cur = `${m[2]} [${m[3] ? maps.get(m[3]) : '-'}] ${m[4]}`;
      locs.set(m[1], cur);
    } else if (l.trim() && cur !== null) {
      const id = [...locs.keys()].pop();
      locs.set(id, `${locs.get(id)} | ${l.trim()}`);
    }
  }
  const samples = [];
  for (const l of lines.slice(iS + 2, iL)) {
    const m = /^([\s\d-]+):((?: \d+)*) ?$/.exec(l);
    if (m) {
      const frames = m[2].trim() ? m[2].trim().split(' ').map((id) => locs.get(id) || `?${id}`) : [];
      samples.push([m[1].trim().split(/\s+/).join(' '), ...frames.map((f) => `  ${f}`)]);
    } else if (l.trim() && samples.length) {
      samples[samples.length - 1].push(`  label ${l.trim()}`);
    }
  }
  const body = samples.map((x) => x.join('\n')).sort();
  return [...lines.slice(0, iS + 2), ...body].join('\n');
}

async function connectJson(profd, method, req) {
  const r = await http(`${profd.base}/querier.v1.QuerierService/${method}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req), timeoutMs: 60000,
  });
  // a refusal (400 naming the mixed series) is an answer to compare too
  assert.ok(r.status === 200 || r.status === 400, `${method} on ${profd.name}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  // (the code only: the TSDB's message names the group's first series where
  // ClickHouse names the series of the refused profile)
  return r.status === 200 ? r.json : { status: r.status, code: r.json && r.json.code };
}

// Every query of the conformance suite on one profd; an object to compare.
async function answers(profd) {
  const a = {};
  const s = { start: FROM, end: TO };
  a.series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': '{service=~"demo|once|node"}', ...s }));
  a.seriesRe = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': 'heap{instance_id!~"i[01]", service!="once"}', ...s }));
  a.labels = await apiData(profd.base, '/api/v1/labels?' + qs(s));
  a.values = await apiData(profd.base, '/api/v1/label/instance_id/values?' + qs({ 'match[]': 'heap', ...s }));
  for (const sel of ['heap{service="demo"}', 'cpu', '{service="once"}', 'heap{service="node"}']) {
    a[`range ${sel}`] = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: sel, from: FROM, to: TO }));
  }
  for (const sel of ['heap{service="demo"}', 'cpu{service="demo"}', 'heap{service="demo", instance_id="i1"}', 'goroutine', 'heap{service="node"}']) {
    a[`merge top ${sel}`] = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: sel, from: FROM, to: TO, report: 'top', limit: 0 }));
    a[`merge raw ${sel}`] = await goRaw(`${profd.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from: FROM, to: TO, report: 'proto' }));
  }
  a['merge by instance'] = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="demo"}', from: FROM, to: TO, report: 'top', limit: 20, by: 'instance_id' }));
  a.diff = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'diff', query_a: 'heap{instance_id="i0"}', query_b: 'heap{instance_id="i1"}',
    mode_a: 'merge', mode_b: 'merge', from_a: FROM, to_a: TO, from_b: FROM, to_b: TO, report: 'top', limit: 10 }));
  // diffs (one pass on ClickHouse: pd_storage_aggregate_diff): one series
  // set over two overlapping ranges, as a flame graph and as the profile
  // itself under pprof -raw
  const MID_A = (T0 + 120000) / 1000, MID_B = (T0 + 60000) / 1000;
  const dr = { mode: 'diff', query_a: 'heap{service="demo"}', query_b: 'heap{service="demo"}', mode_a: 'merge', mode_b: 'merge',
    from_a: FROM, to_a: MID_A, from_b: MID_B, to_b: TO };
  a['diff ranges top'] = await apiData(profd.base, '/api/v1/query?' + qs({ ...dr, report: 'top', limit: 0 }));
  a['diff ranges flamegraph'] = await apiData(profd.base, '/api/v1/query?' + qs({ ...dr, report: 'flamegraph', nodes: 50 }));
  a['diff ranges raw'] = await goRaw(`${profd.base}/api/v1/query?` + qs({ ...dr, report: 'proto' }));
  // profefe's API (ids are each store's own: left out)
  const noIds = (v) => JSON.parse(JSON.stringify(v, (k, x) => (k === 'id' ? undefined : x)));
  const pf = { service: 'demo', type: 'heap', from: iso(FROM * 1000), to: iso(TO * 1000) };
  const list = await http(`${profd.base}/api/0/profiles?` + qs({ ...pf, limit: 1000 }));
  assert.equal(list.status, 200, `profefe list on ${profd.name}: ${list.text.slice(0, 300)}`);
  a['profefe list'] = noIds(list.json);
  a['profefe merge raw'] = await goRaw(`${profd.base}/api/0/profiles/merge?` + qs(pf));
  a['profefe services'] = (await http(`${profd.base}/api/0/services`)).json;
  // Grafana's Pyroscope API
  const ms = { start: Math.floor(FROM * 1000), end: Math.floor(TO * 1000) };
  const pt = await connectJson(profd, 'ProfileTypes', ms);
  a.profileTypes = pt;
  a.labelNames = await connectJson(profd, 'LabelNames', { matchers: ['{}'], ...ms });
  a.labelValues = await connectJson(profd, 'LabelValues', { name: 'service_name', matchers: ['{}'], ...ms });
  const ids = (pt.profileTypes || []).map((t) => t.ID).sort();
  for (const id of ids) {
    a[`SelectMergeStacktraces ${id}`] = await connectJson(profd, 'SelectMergeStacktraces', { profileTypeID: id, labelSelector: '{}', ...ms });
    a[`SelectSeries ${id}`] = await connectJson(profd, 'SelectSeries', { profileTypeID: id, labelSelector: '{}', ...ms, step: 60, groupBy: ['service_name'] });
  }
  // Grafana's Diff (pd_query_merge_refs: one pass on ClickHouse), two overlapping ranges
  const heapId = ids.find((id) => /:inuse_space:/.test(id));
  a['Diff heap'] = await connectJson(profd, 'Diff', {
    left: { profileTypeID: heapId, labelSelector: '{service="demo"}', start: ms.start, end: T0 + 100000 },
    right: { profileTypeID: heapId, labelSelector: '{service="demo"}', start: T0 + 50000, end: ms.end },
  });
  a.render = (await http(`${profd.base}/pyroscope/render?` + qs({ query: 'memory:inuse_space:bytes:space:bytes{service_name="demo"}', from: String(ms.start), until: String(ms.end), format: 'json' }))).json;
  return a;
}

// Single profiles: through profefe's API (GET /api/0/profiles/ID, ID as the
// push answered) each pushed profile comes back lossless (DESIGN.md §1):
// ClickHouse keeps no body since schema v2 and rebuilds it from samples and
// stacks, so what `go tool pprof -raw` prints of the answer equals what it
// prints of the pushed file (every sample, repeats included, with its
// values, labels and frames; ids and order resolved); through the native
// API every 4th one equals the reference profd's the same way.
const rawOfFile = new Map();
async function singleProfiles(profd, items, ref) {
  const tmp = path.join(dir, `single-${profd.name}.pb.gz`);
  for (const c of items) {
    assert.ok(c.id, `push of ${c.file} answered an id`);
    const r = await http(`${profd.base}/api/0/profiles/${c.id}`);
    assert.equal(r.status, 200, `${profd.name}: profile ${c.id}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    if (!rawOfFile.has(c.file)) rawOfFile.set(c.file, await goRaw(c.file));
    fs.writeFileSync(tmp, r.buf);
    assert.equal(await goRaw(tmp), rawOfFile.get(c.file), `${profd.name}: profile ${c.id} (${c.file}) is the pushed profile under go tool pprof -raw`);
  }
  for (const c of items.filter((_, i) => i % 4 === 0)) {
    const q = `/api/v1/query?` + qs({ query: `${c.type}{service="${c.service}", instance_id="${c.instance}"}`, time: c.at / 1000, report: 'proto' });
    assert.equal(await goRaw(profd.base + q), await goRaw(ref.base + q), `${profd.name}: ${q} equals ${ref.name}'s`);
  }
}

function assertSame(want, got, what) {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: the same queries`);
  for (const k of Object.keys(want)) {
    assert.deepEqual(got[k], want[k], `${what}: ${k}`);
  }
}

/* ---------------------------------------------------------------- tests */

let tsdb;
let tsdbAnswers;

test('conformance on one ClickHouse server: the embedded TSDB and ClickHouse answer alike', { timeout: 600000 }, async () => {
  tsdb = await startProfd({ storage: path.join(dir, 'tsdb'), name: 'profd-tsdb' });
  // aggs_v1 written beside every batch (the reconciliation rows are counted below)
  const chp = await startProfd({ storage: path.join(dir, 'unused1'), name: 'profd-ch',
    extraArgs: chArgs([ch1.url], 'single', ['--clickhouse.agg-flush-idle=0']) });
  // the schema is profd's, versioned
  assert.equal(await chQuery(ch1, 'SELECT max(version) FROM single.schema_version'), '8');
  await pushAll(tsdb, CORPUS);
  await pushAll(chp, CORPUS);
  // the data is in ClickHouse's tables, decomposed
  assert.equal(Number(await chQuery(ch1, 'SELECT count() FROM single.profiles_v4')), CORPUS.length);
  // schema v2 keeps no body: single profiles are rebuilt (singleProfiles below)
  assert.equal(Number(await chQuery(ch1, 'SELECT sum(length(body)) FROM single.profiles_v4')), 0);
  assert.ok(Number(await chQuery(ch1, 'SELECT uniqExact(stack_hash) FROM single.stacks_v3')) > 100, 'stacks stored');
  // schema 6: the samples rows in stack_samples_v1 (samples_v3 left empty)
  assert.ok(Number(await chQuery(ch1, 'SELECT count() FROM single.stack_samples_v1')) > 100, 'samples stored');
  assert.equal(Number(await chQuery(ch1, 'SELECT count() FROM single.samples_v3')), 0);
  // schema 7: the location rows in locations_v1 (stacks_v3 holds the stacks alone)
  assert.ok(Number(await chQuery(ch1, 'SELECT uniqExact(loc_key) FROM single.locations_v1')) > 100, 'locations stored');
  assert.equal(Number(await chQuery(ch1, "SELECT countIf(substring(stack, 1, 3) != unhex('800001')) FROM single.stacks_v3")), 0);
  // schema v5: every stored profile counted once in aggs_v1's reconciliation rows
  assert.equal(Number(await chQuery(ch1, 'SELECT sum(n) FROM single.aggs_v1 WHERE types_hash = 0 AND stack_hash = 0')), CORPUS.length);
  // a second push at the same series and time: profefe's API stores it at the next ms on both
  const dup = CORPUS[0];
  for (const p of [tsdb, chp]) {
    const r = await push(p, dup);
    assert.equal(r.status, 200, `${p.name}: repeated push: ${r.text}`);
  }
  tsdbAnswers = await answers(tsdb);
  const chAnswers = await answers(chp);
  assert.ok(tsdbAnswers.series.length >= 12, `series found: ${tsdbAnswers.series.length}`);
  assert.ok(/alloc_space/.test(tsdbAnswers['merge raw heap{service="demo"}']), 'the raw merge has heap samples');
  assert.ok(tsdbAnswers['Diff heap'].flamegraph && tsdbAnswers['Diff heap'].flamegraph.names.length > 10, `Grafana's Diff answered a flame graph: ${JSON.stringify(tsdbAnswers['Diff heap']).slice(0, 200)}`);
  assert.ok(tsdbAnswers['diff ranges top'].rows.length > 10, 'the diff over two ranges has rows');
  assert.ok(tsdbAnswers['profefe list'].body.length >= 30, `profefe's list has the demo heap profiles: ${JSON.stringify(tsdbAnswers['profefe list']).slice(0, 200)}`);
  assertSame(tsdbAnswers, chAnswers, 'TSDB vs ClickHouse');
  await singleProfiles(chp, CORPUS, tsdb);
  // the status API: the flags in effect and the store's counts from ClickHouse
  const flags = await apiData(chp.base, '/api/v1/status/flags');
  assert.equal(flags['storage.backend'], 'clickhouse');
  assert.equal(flags['clickhouse.url'], ch1.url);
  assert.equal(flags['clickhouse.database'], 'single');
  const st = (await apiData(chp.base, '/api/v1/status/tsdb')).storage;
  const stT = (await apiData(tsdb.base, '/api/v1/status/tsdb')).storage;
  assert.equal(st.series, stT.series, 'status: series');
  assert.equal(st.profiles, stT.profiles, 'status: profiles');
  // a restarted profd on the same database answers the same (stateless)
  await chp.stop();
  const again = await startProfd({ storage: path.join(dir, 'unused1'), name: 'profd-ch2', extraArgs: chArgs([ch1.url], 'single') });
  assertSame(tsdbAnswers, await answers(again), 'TSDB vs ClickHouse after a profd restart');
  // bad input stays a 4xx and stores nothing
  const bad = await http(`${again.base}/api/0/profiles?service=demo&type=heap`, { method: 'POST', body: Buffer.from('not a profile') });
  assert.equal(bad.status, 400);
  assert.equal(Number(await chQuery(ch1, 'SELECT count() FROM single.profiles_v4')), CORPUS.length + 1);
  await again.stop();
});

test('bad ClickHouse flags: exit 2 with the flag named; a wrong password: exit 1 naming the URL', { timeout: 180000 }, async () => {
  const r = await run(process.env.PROFD_BIN, ['--storage.backend=clickhouse']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--clickhouse\.url/);
  const r2 = await run(process.env.PROFD_BIN, ['--storage.backend=clickhouse', '--clickhouse.url=ftp://x']);
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /ftp:\/\/x/);
  const r3 = await run(process.env.PROFD_BIN, ['--storage.backend=mysql']);
  assert.equal(r3.code, 2);
  assert.match(r3.stderr, /mysql/);
  const port = await freePort();
  const r4 = await run(process.env.PROFD_BIN, ['--storage.backend=clickhouse', `--clickhouse.url=${ch1.url}`, '--clickhouse.user=pd',
    `--web.listen-address=127.0.0.1:${port}`, `--storage.path=${path.join(dir, 'unused2')}`], {}, 60000);
  assert.equal(r4.code, 1, r4.stderr);
  assert.ok(r4.stderr.includes(ch1.url), `the error names the URL: ${r4.stderr}`);
});

let writer;
let reader;

test('cluster: Distributed tables over two shards, write through one profd, read through another', { timeout: 600000 }, async () => {
  assert.ok(tsdbAnswers, 'the conformance test ran first');
  writer = await startProfd({ storage: path.join(dir, 'unused3'), name: 'profd-writer',
    extraArgs: chArgs([ch1.url, ch2.url], 'clu', ['--clickhouse.cluster=pd2']) });
  reader = await startProfd({ storage: path.join(dir, 'unused4'), name: 'profd-reader',
    extraArgs: chArgs([ch2.url, ch1.url], 'clu', ['--clickhouse.cluster=pd2']) });
  await pushAll(writer, CORPUS);
  await push(writer, CORPUS[0]); // the repeated push, as above
  const n1 = Number(await chQuery(ch1, 'SELECT count() FROM clu.profiles_v4_local'));
  const n2 = Number(await chQuery(ch2, 'SELECT count() FROM clu.profiles_v4_local'));
  assert.equal(n1 + n2, CORPUS.length + 1, 'every profile on exactly one shard');
  assert.ok(n1 > 0 && n2 > 0, `both shards hold profiles (${n1}, ${n2})`);
  assertSame(tsdbAnswers, await answers(reader), 'TSDB vs ClickHouse cluster (read through the other profd)');
  await singleProfiles(reader, CORPUS, tsdb);
});

test('a shard killed mid-ingest: pushes fail (5xx), reads name it, it recovers, nothing acknowledged is lost', { timeout: 600000 }, async () => {
  assert.ok(writer && reader, 'the cluster test ran first');
  const acked = [];
  const base = CORPUS.filter((c) => c.service === 'demo').slice(0, 12);
  const item = (c, phase) => ({ ...c, instance: `kill-${phase}-${c.instance}`, at: c.at + 7 });
  // 6 concurrent pushers over 3 rounds of the 12 profiles; the shard is
  // killed while they push (after the first round is acknowledged)
  const failed = [];
  const work = [];
  for (let round = 0; round < 3; round++) {
    for (const c of base) work.push(item(c, `r${round}`));
  }
  let next = 0;
  let firstRoundDone;
  const roundDone = new Promise((resolve) => { firstRoundDone = resolve; });
  let acks = 0;
  const pushers = Array.from({ length: 6 }, async () => {
    while (next < work.length) {
      const it = work[next++];
      const r = await push(writer, it);
      if (r.status === 200) {
        it.id = r.json.body.id;
        acked.push(it);
        if (++acks === base.length) firstRoundDone();
      } else {
        failed.push(r);
      }
    }
  });
  await Promise.race([roundDone, Promise.all(pushers)]);
  ch2.kill('SIGKILL');
  await ch2.wait(10000);
  await Promise.all(pushers);
  assert.ok(acked.length >= base.length, `the first round was acknowledged (${acked.length})`);
  for (const c of base.slice(0, 3)) { // and with the shard surely down
    const it = item(c, 'down');
    const r = await push(writer, it);
    if (r.status === 200) {
      it.id = r.json.body.id;
      acked.push(it);
    } else failed.push(r);
  }
  assert.ok(failed.length > 0, 'pushes fail while a shard is down');
  // profd reports it: /metrics counts the failed profiles and the failed requests
  const metrics = (await http(`${writer.base}/metrics`)).text;
  const val = (name) => Number((new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics) || [])[1] || 0);
  assert.ok(val('profd_clickhouse_failed_profiles_total') >= failed.length, `profd_clickhouse_failed_profiles_total counts the refused pushes:\n${metrics.split('\n').filter((l) => l.includes('clickhouse')).join('\n')}`);
  assert.ok(val('profd_clickhouse_errors_total') > 0, 'profd_clickhouse_errors_total counts failed requests');
  for (const f of failed) assert.ok(f.status >= 500, `a failed push is a 5xx: ${f.status} ${f.text}`);
  // down: a read over the Distributed tables fails naming the shard
  const rd = await http(`${reader.base}/api/v1/query_range?` + qs({ query: 'heap', from: FROM, to: TO }), { timeoutMs: 120000 });
  assert.ok(rd.status >= 500, `a read with a shard down fails: HTTP ${rd.status} ${rd.text.slice(0, 300)}`);
  assert.ok(rd.text.includes(`127.0.0.1:${p2.tcp}`), `the error names the shard 127.0.0.1:${p2.tcp}: ${rd.text.slice(0, 600)}`);
  // back: the same server, data dir and ports
  await startCH('ch2', p2, [p1.tcp, p2.tcp]);
  for (const c of base) {
    const it = item(c, 'after');
    const r = await push(writer, it);
    assert.equal(r.status, 200, `push after the shard returned: ${r.text}`);
    it.id = r.json.body.id;
    acked.push(it);
  }
  // the TSDB given the acknowledged pushes is the reference
  const sel = 'heap{instance_id=~"kill-.*"}';
  const tsdbK = await startProfd({ storage: path.join(dir, 'tsdb-kill'), name: 'profd-tsdb-kill' });
  await pushAll(tsdbK, acked.map((c) => ({ ...c })));
  // every acknowledged profile is there (lossless), read through the other profd
  await singleProfiles(reader, acked, tsdbK);
  // and the merge of the acknowledged ones equals the TSDB's of the same pushes
  const want = await goRaw(`${tsdbK.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from: FROM, to: TO, report: 'proto' }));
  const got = await goRaw(`${reader.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from: FROM, to: TO, report: 'proto' }));
  assert.equal(got, want, 'merge -raw of the acknowledged profiles: ClickHouse cluster = TSDB');
});

// Prometheus' hashmod: the last 8 bytes of md5(value), big endian, mod N.
const hashmod = (v, n) => Number(crypto.createHash('md5').update(v).digest().readBigUInt64BE(8) % BigInt(n));

test('scraping split across two profd replicas by hashmod relabeling, one database', { timeout: 300000 }, async () => {
  const bin = await buildDemo(path.join(dir, 'go'));
  const demos = [];
  for (let i = 0; i < 4; i++) demos.push(await startDemo(bin));
  const addrs = demos.map((d) => d.addr);
  const replicas = [];
  for (let r = 0; r < 2; r++) {
    const cfg = path.join(dir, `scrape-${r}.yml`);
    fs.writeFileSync(cfg, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: demo
    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
    static_configs:
      - targets: [${addrs.map((a) => `"${a}"`).join(', ')}]
    relabel_configs:
      - source_labels: [__address__]
        modulus: 2
        target_label: __tmp_hash
        action: hashmod
      - source_labels: [__tmp_hash]
        regex: "${r}"
        action: keep
`);
    replicas.push(await startProfd({ storage: path.join(dir, `unused-s${r}`), config: cfg, name: `profd-replica-${r}`,
      extraArgs: chArgs([ch1.url], 'scrape') }));
  }
  // each replica scrapes exactly the targets the hash gives it
  for (let r = 0; r < 2; r++) {
    const t = await apiData(replicas[r].base, '/api/v1/targets');
    const got = [...new Set(t.activeTargets.map((x) => x.labels.instance))].sort();
    const want = addrs.filter((a) => hashmod(a, 2) === r).sort();
    assert.deepEqual(got, want, `replica ${r} scrapes the targets with hashmod = ${r}`);
  }
  // every target's heap series lands in the one database, readable through either replica
  const sel = 'heap{job="demo"}';
  for (const p of replicas) {
    const got = await waitFor(`${p.name} to see heap series of all 4 targets`, async () => {
      const d = await apiData(p.base, '/api/v1/series?' + qs({ 'match[]': sel, start: (Date.now() - 600000) / 1000, end: Date.now() / 1000 + 60 }));
      return d.length === 4 ? d : null;
    }, 60000, 500);
    assert.deepEqual(got.map((s) => s.instance).sort(), [...addrs].sort());
  }
  for (const d of demos) d.kill();
});
