// Traces to profiles (issue 26 item 3): Grafana's "Profiles for this span"
// (Tempo -> Pyroscope data source) calls the querier's
// SelectMergeSpanProfile with the span ids of a trace; profd answers the
// merged stacks of only the samples whose `span_id` pprof label is one of
// them (the filter runs inside the store's aggregation, storage.h
// pd_storage_sample_filter).
//
// The traced program is real: tests/e2e/grafana/spanapp, a Go program built
// here with Debian's Go 1.19 against Debian's OpenTelemetry Go SDK
// (golang-opentelemetry-otel-dev, GOPATH mode, no network). It does NOT use
// grafana/otel-profiling-go (not packaged by Debian): spanapp carries a
// small TracerProvider wrapper of our own that does what otel-profiling-go
// does with the same label names — pprof goroutine labels span_id (the root
// span's id, 16 hex digits) and span_name on root spans, and the span
// attribute pyroscope.profile.id (which makes Grafana offer "Profiles for
// this span"). Root spans "spanA" spin in main.funcA, "spanB" in main.funcB; each has a child span
// (which, as with otel-profiling-go's default, carries the root's labels).
// The span ids are read from the program's own trace output (the OTel
// SDK's stdout exporter, one JSON span per line). profd scrapes its CPU
// profile (net/http/pprof).
//
// Calls go through the vendored grafana/pyroscope protos (protobufjs), in
// both Connect codecs.
//
//   PROFD_BIN=build/profd node --test tests/e2e/grafana/spans.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import {
  SRC, Proc, apiData, freePort, http, killAll, qs, run, startProfd, tempDir, waitFor,
} from '../lib.mjs';

const PROTO_ROOT = path.join(SRC, 'third_party', 'grafana-pyroscope');
const CPU = 'process_cpu:cpu:nanoseconds:cpu:nanoseconds';
const SEL = '{service_name="spanapp"}';
const OBJ = { longs: String, enums: String, bytes: String, defaults: false, arrays: true };

let dir, app, profd, root, from, to;

function loadProtos() {
  const r = new protobuf.Root();
  r.resolvePath = (origin, target) => path.join(PROTO_ROOT, target);
  r.loadSync(['querier/v1/querier.proto'], { keepCase: false });
  r.resolveAll();
  return r;
}

// One Connect unary call of querier.v1.QuerierService in codec 'proto' or
// 'json': {status, obj} or {status, error (Connect's error JSON)}.
async function connect(method, req, codec) {
  const m = root.lookupService('querier.v1.QuerierService').methods[method];
  m.resolve();
  const Req = m.resolvedRequestType, Resp = m.resolvedResponseType;
  const body = codec === 'proto' ? Buffer.from(Req.encode(Req.fromObject(req)).finish())
    : Buffer.from(JSON.stringify(Req.toObject(Req.fromObject(req), OBJ)));
  const r = await http(`${profd.base}/querier.v1.QuerierService/${method}`, {
    method: 'POST', body, timeoutMs: 60000,
    headers: { 'Content-Type': `application/${codec}`, 'Connect-Protocol-Version': '1' },
  });
  if (r.status !== 200) return { status: r.status, error: r.json };
  const msg = codec === 'proto' ? Resp.decode(r.buf) : Resp.fromObject(JSON.parse(r.text));
  return { status: 200, obj: Resp.toObject(msg, OBJ) };
}

// SelectMergeSpanProfile in both codecs (equal answers); the flame graph.
async function spanProfile(spanSelector, labelSelector = SEL) {
  const req = { profileTypeID: CPU, labelSelector, spanSelector, start: from, end: to };
  const p = await connect('SelectMergeSpanProfile', req, 'proto');
  assert.equal(p.status, 200, `SelectMergeSpanProfile (proto): ${JSON.stringify(p.error)}`);
  const j = await connect('SelectMergeSpanProfile', req, 'json');
  assert.equal(j.status, 200, `SelectMergeSpanProfile (json): ${JSON.stringify(j.error)}`);
  assert.deepEqual(j.obj, p.obj, 'the JSON answer equals the binary one');
  return p.obj.flamegraph;
}

const total = (fg) => Number(fg.total || 0);

// Total (self + callees) per function name of a flame graph (levels: 4
// values a node: x offset, total, self, name index).
function totalByName(fg) {
  const out = new Map();
  for (const l of fg.levels || []) {
    const v = (l.values || []).map(Number);
    for (let i = 0; i + 3 < v.length; i += 4) {
      const name = fg.names[v[i + 3]];
      out.set(name, (out.get(name) || 0) + v[i + 1]);
    }
  }
  return out;
}
const has = (fg, fn) => (fg.names || []).includes(fn);

// The spans the program reported (its stdout exporter's JSON lines).
function spans() {
  const out = [];
  for (const line of app.out.split('\n')) {
    if (!line.startsWith('{')) continue;
    let s;
    try { s = JSON.parse(line); } catch { continue; }
    const root = !s.Parent || /^0+$/.test(s.Parent.SpanID);
    const attr = (s.Attributes || []).find((a) => a.Key === 'pyroscope.profile.id');
    out.push({ name: s.Name, id: s.SpanContext.SpanID, root, profileId: attr ? attr.Value.Value : null });
  }
  return out;
}

async function buildApp() {
  const out = path.join(dir, 'spanapp');
  const env = {
    ...process.env, HOME: dir, GOCACHE: path.join(dir, 'gocache'), GOFLAGS: '', GOTOOLCHAIN: 'local',
    GO111MODULE: 'off', GOPROXY: 'off', GOPATH: `/usr/share/gocode:${path.join(dir, 'gopath')}`,
  };
  const r = await run('go', ['build', '-o', out, path.join(SRC, 'tests', 'e2e', 'grafana', 'spanapp', 'main.go')],
    { cwd: dir, env }, 180000);
  if (r.code !== 0) {
    throw new Error(`go build of tests/e2e/grafana/spanapp failed (exit ${r.code}); are golang-go and ` +
      `golang-opentelemetry-otel-dev installed? (scripts/install-deps.sh)\n${r.stdout}${r.stderr}`);
  }
  return out;
}

before(async () => {
  root = loadProtos();
  dir = tempDir('profd-spans-');
  const bin = await buildApp();
  const port = await freePort();
  app = new Proc('spanapp', bin, [`-listen=127.0.0.1:${port}`, '-span=700ms']);
  await waitFor('spanapp to serve /debug/pprof/', async () => {
    if (app.exited) throw new Error(`spanapp exited early\n${app.tail()}`);
    const r = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 2000 }).catch(() => null);
    return r && r.status === 200;
  }, 20000, 100);
  const cfg = path.join(dir, 'profd.yaml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: spanapp
    scrape_interval: 3s
    scrape_timeout: 3s
    static_configs:
      - targets: ["127.0.0.1:${port}"]
    profiling_config:
      pprof_config:
        cpu: {path: /debug/pprof/profile, seconds: 2}
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        heap: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
`);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg });
  from = Date.now() - 60000;
  await waitFor('4 cpu profiles of spanapp', async () => {
    const cpu = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'cpu{job="spanapp"}', from: from / 1000 }));
    // every series of the job: a scrape is split by span_name, and CPU
    // outside any span (the runtime's, more of it on a busy machine) is a
    // series without span_name, listed first, with only a few profiles
    return new Set(cpu.flatMap((x) => x.timestamps)).size >= 4;
  }, 90000, 500);
  app.kill(); // no more profiles or spans: every answer below sees the same data
  await app.wait(5000);
  await new Promise((r) => setTimeout(r, 1000));
  to = Date.now() + 1000;
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('the program reports its spans (stdout exporter); root spans carry pyroscope.profile.id', async () => {
  const s = spans();
  for (const x of s) assert.equal(x.profileId, x.root ? x.id : null, JSON.stringify(x));
  assert.ok(s.filter((x) => x.root && x.name === 'spanA').length >= 3, `spanA root spans in:\n${app.tail()}`);
  assert.ok(s.filter((x) => x.root && x.name === 'spanB').length >= 3, `spanB root spans in:\n${app.tail()}`);
  for (const x of s) assert.match(x.id, /^[0-9a-f]{16}$/);
});

test('one span id: that span\'s stacks, not the other span\'s', { timeout: 120000 }, async () => {
  const s = spans();
  for (const [name, mine, other] of [['spanA', 'main.funcA', 'main.funcB'], ['spanB', 'main.funcB', 'main.funcA']]) {
    // the span with the most samples (profiles cover 2 s of every 3 s: a
    // span at a window's edge has few)
    let found = null;
    for (const x of s.filter((y) => y.root && y.name === name)) {
      const fg = await spanProfile([x.id]);
      if (total(fg) > 0 && (!found || total(fg) > total(found.fg))) found = { x, fg };
    }
    assert.ok(found, `some ${name} span has samples`);
    const { fg } = found;
    assert.ok(has(fg, mine), `${name} ${found.x.id}: ${mine} in ${JSON.stringify(fg.names)}`);
    assert.ok(!has(fg, other), `${name} ${found.x.id}: no ${other} in ${JSON.stringify(fg.names)}`);
    // most of the span's CPU is under its own function (beside: the runtime)
    const cum = totalByName(fg);
    assert.ok(cum.get(mine) * 2 > total(fg), `${mine} is most of ${name}: ${cum.get(mine)} of ${total(fg)}`);
  }
});

test('all spans of a kind: disjoint, and within the whole profile', { timeout: 120000 }, async () => {
  const s = spans();
  const a = s.filter((x) => x.root && x.name === 'spanA').map((x) => x.id);
  const b = s.filter((x) => x.root && x.name === 'spanB').map((x) => x.id);
  const fa = await spanProfile(a), fb = await spanProfile(b), fab = await spanProfile([...a, ...b.map((x) => x.toUpperCase())]);
  assert.ok(total(fa) > 0 && total(fb) > 0);
  assert.ok(has(fa, 'main.funcA') && !has(fa, 'main.funcB'));
  assert.ok(has(fb, 'main.funcB') && !has(fb, 'main.funcA'));
  assert.equal(total(fab), total(fa) + total(fb), 'A and B together (ids in either case) = A + B');
  const all = await connect('SelectMergeStacktraces', { profileTypeID: CPU, labelSelector: SEL, start: from, end: to }, 'proto');
  assert.equal(all.status, 200);
  assert.ok(total(fab) <= total(all.obj.flamegraph), 'the spans are a part of the whole');
  // a label selector that matches no series narrows to nothing
  assert.equal(total(await spanProfile(a, '{service_name="nothing-here"}')), 0);
});

test('child spans, unknown and no ids: empty; a bad id: invalid_argument', { timeout: 60000 }, async () => {
  const s = spans();
  const ids = new Set(s.map((x) => x.id));
  // child spans carry their root's labels (otel-profiling-go's default scope)
  const child = s.filter((x) => !x.root).map((x) => x.id);
  assert.ok(child.length > 0);
  const fc = await spanProfile(child);
  assert.equal(total(fc), 0);
  assert.deepEqual(fc.names, ['total']);
  let unknown = '0123456789abcdef';
  while (ids.has(unknown)) unknown = (BigInt('0x' + unknown) + 1n).toString(16).padStart(16, '0');
  const fu = await spanProfile([unknown]);
  assert.equal(total(fu), 0);
  assert.deepEqual(fu.names, ['total']);
  assert.equal(total(await spanProfile([])), 0);
  for (const bad of ['xyz', '0123456789abcdef0', '0123456789abcdeg']) {
    for (const codec of ['proto', 'json']) {
      const r = await connect('SelectMergeSpanProfile', { profileTypeID: CPU, labelSelector: SEL, spanSelector: [bad], start: from, end: to }, codec);
      assert.equal(r.status, 400, `${bad} (${codec})`);
      assert.equal(r.error.code, 'invalid_argument');
      assert.ok(r.error.message.includes(bad), r.error.message);
    }
  }
});

test('stored losslessly: go tool pprof -tags shows the span labels; /api/v1/query?span_id= narrows', { timeout: 90000 }, async () => {
  const s = spans();
  const a = s.filter((x) => x.root && x.name === 'spanA').map((x) => x.id);
  const b = s.filter((x) => x.root && x.name === 'spanB').map((x) => x.id);
  const range = { query: 'cpu{job="spanapp"}', mode: 'merge', from: String(from / 1000), to: String(to / 1000) };
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const genv = { ...process.env, HOME: gd, GOCACHE: path.join(gd, 'cache'), PPROF_TMPDIR: path.join(gd, 'pprof'), GOFLAGS: '' };
  const tags = await run('go', ['tool', 'pprof', '-tags', `${profd.base}/api/v1/query?` + qs({ ...range, report: 'proto' })],
    { env: genv, cwd: gd }, 60000);
  assert.equal(tags.code, 0, tags.stderr);
  assert.match(tags.stdout, /span_id:/, tags.stdout.slice(0, 2000));
  // span_name is a string label without an id in it: like Pyroscope, profd
  // makes it a series label (docs/push.md, dynamic labels); span_id stays on
  // the samples
  assert.doesNotMatch(tags.stdout, /span_name:/, tags.stdout.slice(0, 2000));
  const series = await apiData(profd.base, '/api/v1/series?' +
    qs({ 'match[]': 'cpu{job="spanapp"}', start: String(from / 1000), end: String(to / 1000) }));
  const spanNames = new Set(series.map((x) => x.span_name).filter(Boolean));
  assert.ok(spanNames.has('spanA') && spanNames.has('spanB'), `span_name series: ${JSON.stringify(series)}`);
  assert.ok(series.every((x) => !('span_id' in x)), 'span_id is never a series label');
  const shown = [...tags.stdout.matchAll(/\b([0-9a-f]{16})\b/g)].map((m) => m[1]);
  assert.ok(shown.some((id) => a.includes(id)) && shown.some((id) => b.includes(id)),
    `spanA and spanB ids among the tags:\n${tags.stdout.slice(0, 2000)}`);
  // profd's own API takes the same filter
  const top = await apiData(profd.base, '/api/v1/query?' + qs({ ...range, report: 'top', span_id: a.join(',') }));
  const names = JSON.stringify(top);
  assert.ok(names.includes('main.funcA') && !names.includes('main.funcB'), names.slice(0, 2000));
  const bad = await http(`${profd.base}/api/v1/query?` + qs({ ...range, report: 'top', span_id: 'nothex' }));
  assert.equal(bad.status, 400);
  assert.match(bad.text, /span_id.*nothex/);
});
