// Grafana reads profd (issue 13) and Connect push (issue 11 item 3): profd
// scrapes the real Go demo (examples/demo, net/http/pprof); then this test
// speaks Connect to it as Grafana's Pyroscope data source does, with the
// real protobuf definitions (third_party/grafana-pyroscope, loaded at run
// time by protobufjs from npm), in both codecs (application/proto and
// application/json), and checks the answers against profd's native API and
// `go tool pprof`.
//
//   PROFD_BIN=build/profd node --test tests/e2e/grafana/
//
// /pyroscope/render is drawn by Pyroscope's own @pyroscope/flamegraph React
// component (npm; bundled here at run time with esbuild) in Debian's
// chromium (headless, playwright-core; $PD_CHROMIUM overrides the path).
//
// Once enough profiles are stored the demo is stopped, so every call below
// sees the same data (the binary and JSON answers must be equal).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import protobuf from 'protobufjs';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';
import {
  SRC, TESTDATA, apiData, buildDemo, goEnv, http, killAll, qs, run, startDemo, startProfd,
  tempDir, waitFor,
} from '../lib.mjs';

const PROTO_ROOT = path.join(SRC, 'third_party', 'grafana-pyroscope');
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const BURNER = 'main.burnCPU';

let dir, demo, profd, root, from, to;

function loadProtos() {
  const r = new protobuf.Root();
  r.resolvePath = (origin, target) => path.join(PROTO_ROOT, target);
  r.loadSync(['querier/v1/querier.proto', 'push/v1/push.proto', 'types/v1/types.proto', 'google/v1/profile.proto'], { keepCase: false });
  r.resolveAll();
  return r;
}

const OBJ = { longs: String, enums: String, bytes: String, defaults: false, arrays: true };

// One Connect unary call. codec: 'proto' | 'json'. Returns
// {status, obj (decoded reply as a plain object), error (Connect error JSON)}.
async function connect(service, method, req, codec, { gzip = false } = {}) {
  const svc = root.lookupService(service);
  const m = svc.methods[method];
  assert.ok(m, `${service}/${method} is in the proto`);
  m.resolve();
  const Req = m.resolvedRequestType, Resp = m.resolvedResponseType;
  let body;
  if (codec === 'proto') body = Buffer.from(Req.encode(Req.fromObject(req)).finish());
  else body = Buffer.from(JSON.stringify(Req.toObject(Req.fromObject(req), OBJ)));
  const headers = {
    'Content-Type': codec === 'proto' ? 'application/proto' : 'application/json',
    'Connect-Protocol-Version': '1',
    'Accept-Encoding': 'gzip',
  };
  if (gzip) {
    body = zlib.gzipSync(body);
    headers['Content-Encoding'] = 'gzip';
  }
  const r = await http(`${profd.base}/${service}/${method}`, { method: 'POST', headers, body, timeoutMs: 60000 });
  if (r.status !== 200) {
    assert.ok(r.json && typeof r.json.code === 'string' && typeof r.json.message === 'string',
      `${method} (${codec}) HTTP ${r.status}: not Connect error JSON: ${r.text.slice(0, 300)}`);
    return { status: r.status, error: r.json };
  }
  const want = codec === 'proto' ? 'application/proto' : 'application/json';
  assert.equal(r.headers.get('content-type'), want, `${method} (${codec}) reply Content-Type`);
  const msg = codec === 'proto' ? Resp.decode(r.buf) : Resp.fromObject(JSON.parse(r.text));
  return { status: 200, obj: Resp.toObject(msg, OBJ), raw: r.buf };
}

// Calls a querier method in both codecs; asserts 200 and equal answers;
// returns the answer.
async function both(method, req) {
  const p = await connect('querier.v1.QuerierService', method, req, 'proto');
  assert.equal(p.status, 200, `${method} (proto): ${JSON.stringify(p.error)}`);
  const j = await connect('querier.v1.QuerierService', method, req, 'json', { gzip: true });
  assert.equal(j.status, 200, `${method} (json): ${JSON.stringify(j.error)}`);
  assert.deepEqual(j.obj, p.obj, `${method}: the JSON answer equals the binary one`);
  return p.obj;
}

const num = (v) => Number(v || 0);

// Native series of the cpu type in [from, to].
async function nativeCpu() {
  return apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'cpu{job="demo"}', from: from / 1000, to: to / 1000 }));
}

function writeConfig(file) {
  fs.writeFileSync(file, `scrape_configs:
  - job_name: demo
    scrape_interval: 2s
    scrape_timeout: 2s
    static_configs:
      - targets: ["${demo.addr}"]
    profiling_config:
      pprof_config:
        cpu: {path: /debug/pprof/profile, seconds: 1}
        threadcreate: {enabled: false}
`);
}

async function metric(name, reason) {
  const r = await http(profd.base + '/metrics');
  let sum = 0;
  for (const line of r.text.split('\n')) {
    if (line.startsWith(name + '{') && line.includes(`reason="${reason}"`)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

before(async () => {
  root = loadProtos();
  dir = tempDir('profd-grafana-');
  demo = await startDemo(await buildDemo(dir));
  const cfg = path.join(dir, 'profd.yaml');
  writeConfig(cfg);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg });
  from = Date.now() - 60000;
  await waitFor('4 cpu and 2 heap profiles of the demo', async () => {
    const cpu = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'cpu{job="demo"}', from: from / 1000 }));
    const heap = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'heap{job="demo"}', from: from / 1000 }));
    return cpu.length && cpu[0].timestamps.length >= 4 && heap.length && heap[0].timestamps.length >= 2;
  }, 90000, 500);
  demo.kill(); // no more profiles: every answer below sees the same data
  // once every target of the demo is down, each has had a scrape fail after
  // the kill: the scrapes before it are stored (waited for, not slept)
  await waitFor('the demo\'s targets to be down', async () => {
    const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets.filter((t) => t.scrapePool === 'demo');
    return ts.length > 0 && ts.every((t) => t.health === 'down');
  }, 120000, 250);
  to = Date.now() + 1000;
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('ProfileTypes, LabelNames, LabelValues, Series, GetProfileStats in both codecs', { timeout: 180000 }, async () => {
  const pt = await both('ProfileTypes', { start: from, end: to });
  const ids = pt.profileTypes.map((t) => t.ID);
  for (const want of [CPU, 'process_cpu:samples:count:cpu:nanoseconds', 'memory:inuse_space:bytes:space:bytes',
    'memory:alloc_space:bytes:space:bytes', 'goroutines:goroutine:count:goroutine:count']) {
    assert.ok(ids.includes(want), `ProfileTypes has ${want}: ${ids.join(' ')}`);
  }
  const cpuType = pt.profileTypes.find((t) => t.ID === CPU);
  assert.deepEqual([cpuType.name, cpuType.sampleType, cpuType.sampleUnit, cpuType.periodType, cpuType.periodUnit],
    CPU.split(':'));
  const ln = await both('LabelNames', { matchers: ['{}'], start: from, end: to });
  for (const want of ['service_name', '__profile_type__', '__name__', 'job', 'instance']) {
    assert.ok(ln.names.includes(want), `LabelNames has ${want}: ${ln.names}`);
  }
  const lv = await both('LabelValues', { name: 'service_name', matchers: [`{__profile_type__="${CPU}"}`], start: from, end: to });
  assert.deepEqual(lv.names, ['demo'], 'a scraped target gets service_name from its job');
  const se = await both('Series', { matchers: [`{service_name="demo", __profile_type__="${CPU}"}`],
    labelNames: ['service_name', '__profile_type__', 'instance'], start: from, end: to });
  assert.equal(se.labelsSet.length, 1, JSON.stringify(se));
  const labels = Object.fromEntries(se.labelsSet[0].labels.map((l) => [l.name, l.value]));
  assert.deepEqual(labels, { service_name: 'demo', __profile_type__: CPU, instance: demo.addr });
  const st = await both('GetProfileStats', {});
  assert.equal(st.dataIngested, true);
  assert.ok(num(st.oldestProfileTime) >= from && num(st.newestProfileTime) <= to, JSON.stringify(st));
});

test('SelectMergeStacktraces: total = sum of native totals, same top nodes as the native flame graph', { timeout: 180000 }, async () => {
  const native = await nativeCpu();
  assert.equal(native.length, 1);
  const ti = native[0].sample_types.findIndex((t) => t.type === 'cpu');
  const sum = native[0].totals.reduce((a, row) => a + row[ti], 0);
  assert.ok(sum > 0, 'the demo burned CPU');
  const r = await both('SelectMergeStacktraces', { profileTypeID: CPU, labelSelector: '{service_name="demo"}', start: from, end: to });
  const fg = r.flamegraph;
  assert.equal(num(fg.total), sum, 'flame graph total = sum of query_range totals');
  assert.equal(fg.names[0], 'total');
  assert.equal(num(fg.levels[0].values[1]), sum);
  // level 1: groups of 4 (x offset, total, self, name)
  const l1 = fg.levels[1].values.map(Number);
  assert.equal(l1.length % 4, 0);
  const top = new Set();
  let x = 0, covered = 0;
  for (let i = 0; i < l1.length; i += 4) {
    x += l1[i];
    top.add(fg.names[l1[i + 3]]);
    covered += l1[i + 1];
    x += l1[i + 1];
  }
  assert.ok(x <= sum && covered <= sum);
  const nfg = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: 'cpu{job="demo"}',
    from: from / 1000, to: to / 1000, report: 'flamegraph', sample_index: 'cpu' }));
  assert.deepEqual([...top].sort(), nfg.children.map((c) => c.name).sort(), 'top node set = native flame graph\'s');
  assert.ok(fg.names.includes(BURNER), `${BURNER} is in the flame graph`);
  // max_nodes caps the nodes; the total stays
  const small = await both('SelectMergeStacktraces', { profileTypeID: CPU, labelSelector: '{}', start: from, end: to, maxNodes: 5 });
  const nodes = small.flamegraph.levels.slice(1).reduce((a, l) => a + l.values.length / 4, 0);
  assert.ok(nodes <= 5 + small.flamegraph.levels.length, `max_nodes=5 gave ${nodes} nodes`);
  assert.equal(num(small.flamegraph.total), sum);
  // the /pyroscope/render flamebearer has the same total
  const rr = await http(profd.base + '/pyroscope/render?' + qs({ query: `${CPU}{service_name="demo"}`, from: String(from), until: String(to) }));
  assert.equal(rr.status, 200, rr.text.slice(0, 300));
  assert.equal(rr.json.flamebearer.numTicks, sum);
  assert.ok(rr.json.flamebearer.names.includes(BURNER));
  const rd = await http(profd.base + '/pyroscope/render-diff?' + qs({ leftQuery: `${CPU}{}`, leftFrom: String(from), leftUntil: String(to),
    rightQuery: `${CPU}{}`, rightFrom: String(from), rightUntil: String(to) }));
  assert.equal(rd.status, 200, rd.text.slice(0, 300));
  assert.equal(rd.json.leftTicks, sum);
  assert.equal(rd.json.rightTicks, sum);
});

test('SelectMergeStacktraces PPROF and SelectMergeProfile are read by go tool pprof', { timeout: 180000 }, async () => {
  const req = { profileTypeID: CPU, labelSelector: '{service_name="demo"}', start: from, end: to };
  const r = await connect('querier.v1.QuerierService', 'SelectMergeProfile', req, 'proto');
  assert.equal(r.status, 200, JSON.stringify(r.error));
  const file = path.join(dir, 'merged.pb');
  fs.writeFileSync(file, r.raw);
  const top = await run('go', ['tool', 'pprof', '-top', '-nodecount=200', file], { env: goEnv(dir) }, 60000);
  assert.equal(top.code, 0, top.stderr);
  assert.ok(top.stdout.includes(BURNER), `pprof -top shows ${BURNER}:\n${top.stdout.slice(0, 2000)}`);
  assert.match(top.stdout, /Type: cpu/);
  await both('SelectMergeProfile', req);
  const pp = await both('SelectMergeStacktraces', { ...req, format: 'PROFILE_FORMAT_PPROF' });
  assert.ok(pp.pprof && pp.pprof.profile && pp.pprof.profile.sample.length > 0, 'PPROF format carries the profile');
});

test('SelectSeries points equal the native totals per step', { timeout: 180000 }, async () => {
  const native = await nativeCpu();
  const ti = native[0].sample_types.findIndex((t) => t.type === 'cpu');
  const step = 3; // seconds
  const want = new Map();
  native[0].timestamps.forEach((ts, i) => {
    const k = Math.floor((ts - from) / (step * 1000));
    const at = from + k * step * 1000;
    want.set(at, (want.get(at) || 0) + native[0].totals[i][ti]);
  });
  const r = await both('SelectSeries', { profileTypeID: CPU, labelSelector: '{}', start: from, end: to, step, groupBy: ['service_name'] });
  assert.equal(r.series.length, 1, JSON.stringify(r).slice(0, 500));
  assert.deepEqual(r.series[0].labels, [{ name: 'service_name', value: 'demo' }]);
  const got = new Map(r.series[0].points.map((p) => [num(p.timestamp), p.value]));
  assert.deepEqual(got, want);
  const avg = await both('SelectSeries', { profileTypeID: CPU, labelSelector: '{}', start: from, end: to, step: 3600,
    aggregation: 'TIME_SERIES_AGGREGATION_TYPE_AVERAGE' });
  const total = native[0].totals.reduce((a, row) => a + row[ti], 0);
  assert.equal(avg.series[0].points.length, 1);
  assert.ok(Math.abs(avg.series[0].points[0].value - total / native[0].timestamps.length) < 1e-6 * total);
});

test('Diff and SelectMergeSpanProfile', { timeout: 180000 }, async () => {
  const side = { profileTypeID: CPU, labelSelector: '{}', start: from, end: to };
  const d = await both('Diff', { left: side, right: side });
  const fg = d.flamegraph;
  assert.ok(num(fg.leftTicks) > 0);
  assert.equal(num(fg.leftTicks), num(fg.rightTicks), 'same selection on both sides');
  assert.equal(fg.levels[1].values.length % 7, 0, 'diff levels are groups of 7');
  const sp = await both('SelectMergeSpanProfile', { profileTypeID: CPU, labelSelector: '{}', start: from, end: to });
  assert.deepEqual(sp.flamegraph.names, ['total']);
});

test('a bad selector gives invalid_argument (both codecs), counted in /metrics', { timeout: 180000 }, async () => {
  const before0 = await metric('profd_rejected_input_total', 'querier_invalid_argument');
  for (const codec of ['proto', 'json']) {
    const r = await connect('querier.v1.QuerierService', 'SelectMergeStacktraces',
      { profileTypeID: CPU, labelSelector: '{service_name="demo"', start: from, end: to }, codec);
    assert.equal(r.status, 400);
    assert.equal(r.error.code, 'invalid_argument');
    assert.match(r.error.message, /service_name="demo"/, 'the message names the selector');
  }
  assert.equal(await metric('profd_rejected_input_total', 'querier_invalid_argument'), before0 + 2);
  const bad = await http(`${profd.base}/querier.v1.QuerierService/ProfileTypes`, { method: 'POST',
    headers: { 'Content-Type': 'application/proto' }, body: Buffer.from([0x0a, 0xff, 0x01]) });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.code, 'invalid_argument');
});

test('Connect Push of a real pprof comes back equal (go tool pprof -raw)', { timeout: 180000 }, async () => {
  // the shared CPU profile with time_nanos set to now (the store refuses
  // times outside its retention window), re-encoded by protobufjs with
  // google.v1.Profile; that file is the original compared against below
  const Profile = root.lookupType('google.v1.Profile');
  const prof = Profile.decode(zlib.gunzipSync(fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'profile.pb.gz'))));
  prof.timeNanos = protobuf.util.Long.fromNumber(Date.now() - 5000).multiply(1000000);
  const raw = zlib.gzipSync(Buffer.from(Profile.encode(prof).finish()));
  const src = path.join(dir, 'original.pb.gz');
  fs.writeFileSync(src, raw);
  const Push = root.lookupType('push.v1.PushRequest');
  const msg = { series: [{ labels: [{ name: '__name__', value: 'process_cpu' }, { name: 'service_name', value: 'pushed-app' }],
    samples: [{ rawProfile: raw, ID: '7c9e6679-7425-40de-944b-e07fc1f90ae7' }] }] };
  const r = await connect('push.v1.PusherService', 'Push', msg, 'proto', { gzip: true });
  assert.equal(r.status, 200, JSON.stringify(r.error));
  // the stored profile, as the native API returns it, against the original
  const back = await http(profd.base + '/api/v1/query?' + qs({ query: '{service_name="pushed-app"}', time: String(Date.now() / 1000) }));
  assert.equal(back.status, 200, back.text.slice(0, 300));
  const file = path.join(dir, 'pushed.pb.gz');
  fs.writeFileSync(file, back.buf);
  const a = await run('go', ['tool', 'pprof', '-raw', src], { env: goEnv(dir) }, 60000);
  const b = await run('go', ['tool', 'pprof', '-raw', file], { env: goEnv(dir) }, 60000);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  assert.equal(b.stdout, a.stdout, 'go tool pprof -raw of the pushed profile read back equals the original');
  // and through the querier: the merged single type equals the original's cpu type
  const pushedFrom = Date.now() - 3600000;
  const m = await connect('querier.v1.QuerierService', 'SelectMergeProfile',
    { profileTypeID: CPU, labelSelector: '{service_name="pushed-app"}', start: pushedFrom, end: Date.now() + 60000 }, 'proto');
  assert.equal(m.status, 200, JSON.stringify(m.error));
  const mf = path.join(dir, 'pushed-merged.pb');
  fs.writeFileSync(mf, m.raw);
  const table = (out) => out.split('\n').filter((l) => /^\s+[-\d.]+\w*\s+[-\d.]+%/.test(l)).join('\n');
  const ta = await run('go', ['tool', 'pprof', '-top', '-nodecount=1000', '-sample_index=cpu', src], { env: goEnv(dir) }, 60000);
  const tb = await run('go', ['tool', 'pprof', '-top', '-nodecount=1000', mf], { env: goEnv(dir) }, 60000);
  assert.equal(tb.code, 0, tb.stderr);
  assert.ok(table(ta.stdout).length > 0);
  assert.equal(table(tb.stdout), table(ta.stdout), 'pprof -top of SelectMergeProfile equals the original');
});

test('a bad Connect Push is refused with Connect error JSON, counted, nothing stored', { timeout: 180000 }, async () => {
  const Push = root.lookupType('push.v1.PushRequest');
  const raw = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
  const good = { labels: [{ name: '__name__', value: 'memory' }, { name: 'service_name', value: 'bad-push' }], samples: [{ rawProfile: raw }] };
  const truncated = { labels: good.labels, samples: [{ rawProfile: zlib.gunzipSync(raw).subarray(0, 100) }] };
  const before0 = await metric('profd_rejected_input_total', 'connect_push_pprof');
  for (const codec of ['proto', 'json']) {
    const r = await connect('push.v1.PusherService', 'Push', { series: [good, truncated] }, codec);
    assert.equal(r.status, 400, JSON.stringify(r));
    assert.equal(r.error.code, 'invalid_argument');
    assert.match(r.error.message, /series 1 sample 0/);
  }
  assert.equal(await metric('profd_rejected_input_total', 'connect_push_pprof'), before0 + 2);
  const s = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': '{service_name="bad-push"}' }));
  assert.deepEqual(s, [], 'the good series of a refused push is not stored either');
  // a truncated PushRequest itself, and a gzip bomb
  const body = Buffer.from(Push.encode(Push.fromObject({ series: [good] })).finish()).subarray(0, 50);
  const t = await http(`${profd.base}/push.v1.PusherService/Push`, { method: 'POST', headers: { 'Content-Type': 'application/proto' }, body });
  assert.equal(t.status, 400);
  assert.equal(t.json.code, 'invalid_argument');
  const bomb = zlib.gzipSync(Buffer.alloc(80 << 20));
  const g = await http(`${profd.base}/push.v1.PusherService/Push`, { method: 'POST',
    headers: { 'Content-Type': 'application/proto', 'Content-Encoding': 'gzip' }, body: bomb });
  assert.equal(g.status, 429);
  assert.equal(g.json.code, 'resource_exhausted');
  assert.ok((await http(profd.base + '/-/healthy')).status === 200);
});

test('/pyroscope/render is drawn by @pyroscope/flamegraph in headless chromium, busy function shown', { timeout: 180000 }, async () => {
  const rr = await http(profd.base + '/pyroscope/render?' + qs({ query: `${CPU}{service_name="demo"}`, from: String(from), until: String(to) }));
  assert.equal(rr.status, 200, rr.text.slice(0, 300));
  const entry = path.join(dir, 'fg-entry.jsx');
  fs.writeFileSync(entry, `import React from 'react';
import { createRoot } from 'react-dom/client';
import { FlamegraphRenderer } from '@pyroscope/flamegraph';
import '@pyroscope/flamegraph/dist/index.css';
window.renderFlamegraph = (profile) => createRoot(document.getElementById('root')).render(
  React.createElement(FlamegraphRenderer, { profile, onlyDisplay: 'both', showToolbar: true }));
`);
  const here = path.dirname(new URL(import.meta.url).pathname);
  const out = await esbuild.build({ entryPoints: [entry], bundle: true, write: false, outdir: path.join(dir, 'fg'),
    nodePaths: [path.join(here, 'node_modules')], define: { 'process.env.NODE_ENV': '"production"' },
    loader: { '.css': 'css' }, logLevel: 'silent' });
  const js = out.outputFiles.find((f) => f.path.endsWith('.js')).text;
  const css = out.outputFiles.find((f) => f.path.endsWith('.css')).text;
  const browser = await chromium.launch({ executablePath: process.env.PD_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.setContent(`<!doctype html><html><head><style>${css}</style></head><body><div id="root"></div></body></html>`);
    await page.addScriptTag({ content: js });
    await page.evaluate((p) => window.renderFlamegraph(p), rr.json);
    await page.waitForSelector('canvas', { timeout: 120000 });
    // the table beside the flame graph lists functions with their values
    await page.waitForFunction((f) => document.body.innerText.includes(f), BURNER, { timeout: 120000 });
    const shot = path.join(dir, 'flamegraph.png');
    await page.screenshot({ path: shot });
    assert.deepEqual(errors, [], 'no page errors while drawing');
    // the canvas is drawn (not blank): some pixel differs from the first
    const drawn = await page.evaluate(() => {
      const c = document.querySelector('canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, Math.min(c.height, 200)).data;
      for (let i = 4; i < d.length; i += 4) if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) return true;
      return false;
    });
    assert.ok(drawn, 'the flame graph canvas is drawn');
  } finally {
    await browser.close();
  }
});

// Root-first frame names of each sample of a google.v1.Profile object
// (inlined frames expanded: a location's lines outermost first).
function rootFirst(p, vi = 0) {
  const fn = new Map(p.function.map((f) => [String(f.id), p.stringTable[num(f.name)]]));
  const loc = new Map(p.location.map((l) => [String(l.id), l]));
  return p.sample.map((s) => {
    const names = [];
    for (const id of [...s.locationId].reverse()) {
      const l = loc.get(String(id));
      for (const ln of [...(l.line || [])].reverse()) names.push(fn.get(String(ln.functionId)));
    }
    return { names, value: num(s.value[vi]), locs: s.locationId.map(String) };
  });
}

test('stack_trace_selector: a call site selects the stacks under it in SelectMergeStacktraces, SelectMergeProfile and SelectSeries', { timeout: 90000 }, async () => {
  const req = { profileTypeID: CPU, labelSelector: '{service_name="demo"}', start: from, end: to };
  const full = rootFirst((await both('SelectMergeProfile', req)));
  const total = full.reduce((a, s) => a + s.value, 0);
  assert.ok(full.some((s) => s.names.includes(BURNER)), `${BURNER} is in the merged profile`);
  // the shortest root prefix through the burner that leaves something out
  // (the demo's stacks vary from run to run)
  const sumOf = (site) => full.filter((s) => site.every((n, i) => s.names[i] === n)).reduce((a, s) => a + s.value, 0);
  let site = null;
  for (const s of full.filter((x) => x.names.includes(BURNER)))
    for (let k = s.names.indexOf(BURNER) + 1; k <= s.names.length && !site; k++)
      if (sumOf(s.names.slice(0, k)) < total) site = s.names.slice(0, k);
  assert.ok(site, 'some call site through the burner is a real cut');
  const starts = (s) => site.every((n, i) => s.names[i] === n);
  const want = sumOf(site);
  assert.ok(want > 0 && want < total, `the call site ${site.join(';')} holds ${want} of ${total}: a real cut`);
  const sel = { callSite: site.map((name) => ({ name })) };
  const fg = (await both('SelectMergeStacktraces', { ...req, stackTraceSelector: sel })).flamegraph;
  assert.equal(num(fg.total), want);
  assert.ok(fg.names.includes(BURNER));
  const mp = rootFirst(await both('SelectMergeProfile', { ...req, stackTraceSelector: sel }));
  assert.ok(mp.length > 0 && mp.every(starts), 'every sample of the selected profile starts with the call site');
  assert.equal(mp.reduce((a, s) => a + s.value, 0), want);
  // Diff: each side with its own selector (left: the call site, right: none)
  const d = (await both('Diff', { left: { ...req, stackTraceSelector: sel }, right: req })).flamegraph;
  assert.equal(num(d.leftTicks), want);
  assert.equal(num(d.rightTicks), total);
  // SelectSeries filters each stored profile: compare with each stored
  // profile (native single-profile read) filtered here
  const Prof = root.lookupType('google.v1.Profile');
  let perProfile = 0;
  for (const ts of (await nativeCpu())[0].timestamps) {
    const r = await http(profd.base + '/api/v1/query?' + qs({ query: 'cpu{job="demo"}', time: ts / 1000, report: 'proto' }));
    assert.equal(r.status, 200, r.text);
    const po = Prof.toObject(Prof.decode(zlib.gunzipSync(r.buf)), OBJ);
    const one = rootFirst(po, po.sampleType.findIndex((t) => po.stringTable[num(t.type)] === 'cpu'));
    perProfile += one.filter(starts).reduce((a, x) => a + x.value, 0);
  }
  assert.ok(perProfile > 0);
  const ss = await both('SelectSeries', { ...req, step: 3600, stackTraceSelector: sel });
  assert.equal(ss.series.length, 1);
  assert.equal(ss.series[0].points.reduce((a, p) => a + p.value, 0), perProfile);
  // a call site nothing has: empty
  const none = await both('SelectMergeStacktraces', { ...req, stackTraceSelector: { callSite: [{ name: 'no.such.function' }] } });
  assert.equal(num(none.flamegraph.total), 0);
});

test('stack_trace_selector go_pgo: keep_locations leaf locations, aggregate_callees drops the leaf line', { timeout: 90000 }, async () => {
  const req = { profileTypeID: CPU, labelSelector: '{service_name="demo"}', start: from, end: to };
  const full = await both('SelectMergeProfile', req);
  const total = full.sample.reduce((a, s) => a + num(s.value[0]), 0);
  const p = await both('SelectMergeProfile', { ...req, stackTraceSelector: { goPgo: { keepLocations: 2, aggregateCallees: true } } });
  assert.ok(full.sample.some((s) => s.locationId.length > 2), 'the demo has deeper stacks: a real cut');
  assert.ok(p.sample.length > 0 && p.sample.length <= full.sample.length, `${p.sample.length} of ${full.sample.length} samples`);
  assert.ok(p.sample.every((s) => s.locationId.length <= 2));
  assert.equal(p.sample.reduce((a, s) => a + num(s.value[0]), 0), total, 'nothing lost, only joined');
  const loc = new Map(p.location.map((l) => [String(l.id), l]));
  for (const s of p.sample) assert.equal(num(loc.get(String(s.locationId[0])).line[0].line), 0, 'leaf line number cleared');
  // go tool pprof reads it
  const file = path.join(dir, 'pgo.pb');
  fs.writeFileSync(file, (await connect('querier.v1.QuerierService', 'SelectMergeProfile',
    { ...req, stackTraceSelector: { goPgo: { keepLocations: 5 } } }, 'proto')).raw);
  const top = await run('go', ['tool', 'pprof', '-top', file], { env: goEnv(dir) }, 60000);
  assert.equal(top.code, 0, top.stderr);
});

test('malformed profile type IDs are invalid_argument, as Pyroscope\'s parser says', { timeout: 30000 }, async () => {
  for (const id of ['nonsense', 'process_cpu:cpu', 'a:b:c:d:e:f:g']) {
    for (const [method, extra] of [['SelectMergeStacktraces', {}], ['SelectMergeProfile', {}], ['SelectSeries', { step: 15 }]]) {
      for (const codec of ['proto', 'json']) {
        const r = await connect('querier.v1.QuerierService', method, { profileTypeID: id, labelSelector: '{}', start: from, end: to, ...extra }, codec);
        assert.equal(r.status, 400, `${method} ${id}`);
        assert.equal(r.error.code, 'invalid_argument');
        assert.match(r.error.message, /profile-type selection must be of the form <name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>\(:delta\), got\(\d\)/);
        assert.ok(r.error.message.includes(id));
      }
    }
    const rr = await http(profd.base + '/pyroscope/render?' + qs({ query: `${id}{}`, from: String(from), until: String(to) }));
    assert.equal(rr.status, 400, rr.text);
    assert.equal(rr.json.code, 'invalid_argument');
  }
  // a sixth part (":delta") is accepted, as upstream's
  const ok = await both('SelectMergeStacktraces', { profileTypeID: CPU + ':delta', labelSelector: '{}', start: from, end: to });
  assert.ok(num(ok.flamegraph.total) > 0);
});

test('/pyroscope/render fills timeline (startTime, samples, durationDelta) and serves format=dot', { timeout: 60000 }, async () => {
  const native = await nativeCpu();
  const ti = native[0].sample_types.findIndex((t) => t.type === 'cpu');
  // until is snapped down to a step, as Pyroscope's timeline: one step more covers every profile
  const until = to + 15000;
  const rr = await http(profd.base + '/pyroscope/render?' + qs({ query: `${CPU}{service_name="demo"}`, from: String(from), until: String(until) }));
  assert.equal(rr.status, 200, rr.text.slice(0, 300));
  const tl = rr.json.timeline;
  assert.ok(tl, 'timeline is there');
  assert.equal(tl.durationDelta, 15, 'a ~1 min range: 15 s steps (the minimum)');
  const S = Math.floor(from / 15000) * 15, E = Math.floor(until / 15000) * 15;
  assert.equal(tl.startTime, S);
  assert.equal(tl.samples.length, (E - S) / 15);
  const want = new Array(tl.samples.length).fill(0);
  native[0].timestamps.forEach((ts, i) => {
    const k = Math.floor((Math.floor(ts / 1000) - S) / 15);
    if (k >= 0 && k < want.length) want[k] += native[0].totals[i][ti];
  });
  assert.deepEqual(tl.samples, want);
  assert.equal(want.reduce((a, v) => a + v, 0), native[0].totals.reduce((a, row) => a + row[ti], 0), 'every profile is in the timeline');
  // format=dot: Graphviz text that dot(1) renders
  const dot = await http(profd.base + '/pyroscope/render?' + qs({ query: `${CPU}{service_name="demo"}`, from: String(from), until: String(to), format: 'dot', 'max-nodes': 20 }));
  assert.equal(dot.status, 200, dot.text.slice(0, 300));
  assert.match(dot.headers.get('content-type'), /^text\/plain/);
  assert.match(dot.text, /^digraph /);
  assert.ok(dot.text.includes(BURNER));
  const dotFile = path.join(dir, 'render.dot');
  fs.writeFileSync(dotFile, dot.text);
  const svg = await run('dot', ['-Tsvg', dotFile], {}, 30000);
  assert.equal(svg.code, 0, svg.stderr);
  assert.match(svg.stdout, /<svg/);
  // nothing selected: an empty body
  const empty = await http(profd.base + '/pyroscope/render?' + qs({ query: `${CPU}{service_name="nobody"}`, from: String(from), until: String(to), format: 'dot' }));
  assert.equal(empty.status, 200);
  assert.equal(empty.text, '');
});
