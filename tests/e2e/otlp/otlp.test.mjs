// End-to-end test of POST /v1development/profiles (OTLP profiles,
// opentelemetry-proto v1.11.0): a real Go CPU profile (shared testdata,
// net/http/pprof of the demo) is decoded and re-expressed as an
// ExportProfilesServiceRequest, encoded by protobufjs (npm, pinned in this
// folder) from the vendored .proto files under third_party/, gzip'd and
// posted; `go tool pprof -top` of what profd serves equals that of the
// original file, row for row; the same as OTLP/JSON (protobufjs's JSON
// form). Then partial success (one profile with a bad
// stack index beside a good one) and hostile requests: a truncated
// protobuf, 100k attributes, a gzip bomb, AnyValue nested 2,000 deep —
// each 4xx naming the problem, counted in /metrics, store unchanged.
//
//   PROFD_BIN=build/profd node --test tests/e2e/otlp/otlp.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { SRC, TESTDATA, goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir } from '../lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let protobuf, dir, profd, Req, Resp, Pprof, Req19, Status;
const PROFILE = path.join(TESTDATA, 'pprof', 'go-demo-once', 'profile.pb.gz');
const at = Math.floor(Date.now() / 1000) - 120;

before(async () => {
  profdBin();
  const pj = path.join(here, 'node_modules', 'protobufjs', 'index.js');
  if (!fs.existsSync(pj)) throw new Error('protobufjs is not installed in tests/e2e/otlp: run scripts/install-deps.sh --test');
  protobuf = (await import(pj)).default;
  const root = new protobuf.Root();
  const inc = path.join(SRC, 'third_party', 'opentelemetry-proto');
  root.resolvePath = (origin, target) => path.join(inc, target);
  await root.load('opentelemetry/proto/collector/profiles/v1development/profiles_service.proto', { keepCase: false });
  Req = root.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest');
  Resp = root.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceResponse');
  // pprof's messages (google/pprof profile.proto field numbers), to read the original
  const T = (name, fields) => {
    const t = new protobuf.Type(name);
    for (const [n, id, type, rep] of fields) t.add(new protobuf.Field(n, id, type, rep ? 'repeated' : undefined));
    return t;
  };
  const ns = new protobuf.Root().define('pp');
  ns.add(T('ValueType', [['type', 1, 'int64'], ['unit', 2, 'int64']]));
  ns.add(T('Label', [['key', 1, 'int64'], ['str', 2, 'int64'], ['num', 3, 'int64'], ['numUnit', 4, 'int64']]));
  ns.add(T('Sample', [['locationId', 1, 'uint64', 1], ['value', 2, 'int64', 1], ['label', 3, 'Label', 1]]));
  ns.add(T('Mapping', [['id', 1, 'uint64'], ['memoryStart', 2, 'uint64'], ['memoryLimit', 3, 'uint64'], ['fileOffset', 4, 'uint64'], ['filename', 5, 'int64'], ['buildId', 6, 'int64'],
    ['hasFunctions', 7, 'bool'], ['hasFilenames', 8, 'bool'], ['hasLineNumbers', 9, 'bool'], ['hasInlineFrames', 10, 'bool']]));
  ns.add(T('Line', [['functionId', 1, 'uint64'], ['line', 2, 'int64']]));
  ns.add(T('Location', [['id', 1, 'uint64'], ['mappingId', 2, 'uint64'], ['address', 3, 'uint64'], ['line', 4, 'Line', 1]]));
  ns.add(T('Function', [['id', 1, 'uint64'], ['name', 2, 'int64'], ['systemName', 3, 'int64'], ['filename', 4, 'int64'], ['startLine', 5, 'int64']]));
  ns.add(T('Profile', [['sampleType', 1, 'ValueType', 1], ['sample', 2, 'Sample', 1], ['mapping', 3, 'Mapping', 1], ['location', 4, 'Location', 1], ['function', 5, 'Function', 1], ['stringTable', 6, 'string', 1], ['timeNanos', 9, 'int64'], ['durationNanos', 10, 'int64'], ['periodType', 11, 'ValueType'], ['period', 12, 'int64']]));
  Pprof = ns.lookupType('Profile');
  // google.rpc.Status (googleapis google/rpc/status.proto field numbers; details as raw bytes)
  const gs = new protobuf.Root().define('google.rpc');
  gs.add(T('Status', [['code', 1, 'int32'], ['message', 2, 'string'], ['details', 3, 'bytes', 1]]));
  Status = gs.lookupType('Status');
  // the same request as an opentelemetry-proto v1.9.0 client encodes it (tests/e2e/otlp/proto-v1.9.0)
  const r19 = new protobuf.Root();
  r19.resolvePath = (origin, target) => path.join(here, 'proto-v1.9.0', target);
  await r19.load('opentelemetry/proto/collector/profiles/v1development/profiles_service.proto', { keepCase: false });
  Req19 = r19.lookupType('opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest');
  dir = tempDir('profd-otlp-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// The pprof at file as one OTLP profile of sample type index si (an array:
// one profile per index, as the collector's pprof translator converts a pprof
// with several sample types), mappings with the translator's attributes
// (pprof.mapping.has_*, process.executable.build_id.gnu).
function toOtlp(file, si, { timeSec = at, service = 'otlp-e2e' } = {}) {
  const pp = Pprof.toObject(Pprof.decode(zlib.gunzipSync(fs.readFileSync(file))), { longs: String, defaults: true });
  const S = pp.stringTable;
  const strs = [''], sidx = new Map([['', 0]]);
  const str = (s) => { if (!sidx.has(s)) { sidx.set(s, strs.length); strs.push(s); } return sidx.get(s); };
  const dict = { mappingTable: [{}], locationTable: [{}], functionTable: [{}], stringTable: strs, attributeTable: [{}], stackTable: [{}], linkTable: [{}] };
  const mapIdx = new Map(), fnIdx = new Map(), locIdx = new Map();
  const attr = (key, value) => { dict.attributeTable.push({ keyStrindex: str(key), value }); return dict.attributeTable.length - 1; };
  for (const m of pp.mapping) {
    mapIdx.set(m.id, dict.mappingTable.length);
    const ai = [];
    if (S[m.buildId]) ai.push(attr('process.executable.build_id.gnu', { stringValue: S[m.buildId] }));
    for (const f of ['Functions', 'Filenames', 'LineNumbers', 'InlineFrames'])
      if (m['has' + f]) ai.push(attr('pprof.mapping.has_' + f.replace(/[A-Z]/g, (c, i) => (i ? '_' : '') + c.toLowerCase()), { boolValue: true }));
    dict.mappingTable.push({ memoryStart: m.memoryStart, memoryLimit: m.memoryLimit, fileOffset: m.fileOffset, filenameStrindex: str(S[m.filename]), attributeIndices: ai });
  }
  for (const f of pp.function) {
    fnIdx.set(f.id, dict.functionTable.length);
    dict.functionTable.push({ nameStrindex: str(S[f.name]), systemNameStrindex: str(S[f.systemName]), filenameStrindex: str(S[f.filename]), startLine: f.startLine });
  }
  for (const l of pp.location) {
    locIdx.set(l.id, dict.locationTable.length);
    dict.locationTable.push({ mappingIndex: l.mappingId !== '0' ? mapIdx.get(l.mappingId) : 0, address: l.address,
      lines: l.line.map((ln) => ({ functionIndex: fnIdx.get(ln.functionId), line: ln.line })) });
  }
  const stacks = pp.sample.map((s) => {
    dict.stackTable.push({ locationIndices: s.locationId.map((id) => locIdx.get(id)) });
    return dict.stackTable.length - 1;
  });
  const profiles = [].concat(si).map((k) => {
    const st = pp.sampleType[k];
    return {
      sampleType: { typeStrindex: str(S[st.type]), unitStrindex: str(S[st.unit]) },
      periodType: { typeStrindex: str(S[pp.periodType.type]), unitStrindex: str(S[pp.periodType.unit]) },
      period: pp.period, timeUnixNano: timeSec * 1e9, durationNano: pp.durationNanos,
      samples: pp.sample.map((s, i) => ({ stackIndex: stacks[i], values: [s.value[k]] })),
    };
  });
  return {
    resourceProfiles: [{
      resource: { attributes: [
        { key: 'service.name', value: { stringValue: service } },
        { key: 'host.name', value: { stringValue: 'box1' } },
      ] },
      scopeProfiles: [{ scope: { name: 'e2e' }, profiles }],
    }],
    dictionary: dict,
  };
}

const encode = (obj) => Buffer.from(Req.encode(Req.fromObject(obj)).finish());

async function post(body, { gzip = true, headers = {} } = {}) {
  return http(`${profd.base}/v1development/profiles`, {
    method: 'POST', body: gzip ? zlib.gzipSync(body) : body,
    headers: { 'Content-Type': 'application/x-protobuf', ...(gzip ? { 'Content-Encoding': 'gzip' } : {}), ...headers },
  });
}

async function pprofTop(src, { index = 'cpu', mode = '-top' } = {}) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', mode, '-nodecount=100000', `-sample_index=${index}`, src], { env: goEnv(gd), cwd: gd }, 90000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  const lines = r.stdout.split('\n');
  if (mode !== '-top') return lines.filter((l) => l.trim() && !/^(File|Build ID|Type|Time|Duration|Showing|Dropped|Local symbolization|Some binary|Main binary):?/.test(l.trim()));
  const h = lines.findIndex((l) => /flat%\s+sum%/.test(l));
  assert.ok(h >= 0, r.stdout);
  return lines.slice(h + 1).filter((l) => l.trim());
}

async function metric(reason) {
  const r = await http(`${profd.base}/metrics`);
  const m = r.text.match(new RegExp(`^profd_rejected_input_total\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
}

async function stored() {
  const r = await http(`${profd.base}/api/v1/query_range?` + qs({ query: '{service_name=~"otlp.*"}', from: at - 3600, to: at + 3600 }));
  assert.equal(r.status, 200, r.text);
  return JSON.stringify(r.json.data);
}

test('a real Go CPU profile sent as OTLP by protobufjs comes back equal', async () => {
  const r = await post(encode(toOtlp(PROFILE, 1)));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('content-type'), 'application/x-protobuf');
  const resp = Resp.toObject(Resp.decode(r.buf), { longs: Number });
  assert.ok(!resp.partialSuccess || !resp.partialSuccess.rejectedProfiles, JSON.stringify(resp));
  const url = `${profd.base}/api/v1/query?` + qs({ query: 'cpu{service_name="otlp-e2e","host.name"="box1"}', time: at, report: 'proto' });
  const got = await pprofTop(url);
  const want = await pprofTop(PROFILE);
  assert.ok(want.length > 5, want.join('\n'));
  assert.deepEqual(got, want);
});

test('the same profile as OTLP/JSON (protobufjs toObject: camelCase, int64 strings, base64 bytes) comes back equal', async () => {
  const msg = Req.fromObject(toOtlp(PROFILE, 1, { timeSec: at + 10, service: 'otlp-json' }));
  msg.resourceProfiles[0].scopeProfiles[0].profiles[0].profileId = Buffer.from('0123456789abcdef');
  const body = JSON.stringify(Req.toObject(msg, { longs: String, enums: Number, bytes: String }));
  assert.match(body, /"timeUnixNano":"\d+"/);
  const r = await http(`${profd.base}/v1development/profiles`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.deepEqual(r.json, {});
  const url = `${profd.base}/api/v1/query?` + qs({ query: 'cpu{service_name="otlp-json"}', time: at + 10, report: 'proto' });
  assert.deepEqual(await pprofTop(url), await pprofTop(PROFILE));
  // a JSON partial success answers in JSON, rejectedProfiles as a string
  const bad = toOtlp(PROFILE, 1, { timeSec: at + 40, service: 'otlp-json' });
  bad.resourceProfiles[0].scopeProfiles[0].profiles[0].samples[0].stackIndex = -3;
  const r2 = await http(`${profd.base}/v1development/profiles`, { method: 'POST', body: JSON.stringify(bad), headers: { 'Content-Type': 'application/json' } });
  assert.equal(r2.status, 200, r2.text);
  assert.equal(r2.json.partialSuccess.rejectedProfiles, '1');
  assert.match(r2.json.partialSuccess.errorMessage, /stack_index -3 out of range/);
  // malformed JSON: 400 naming the field
  const r3 = await http(`${profd.base}/v1development/profiles`, { method: 'POST', body: '{"resourceProfiles":{}}', headers: { 'Content-Type': 'application/json' } });
  assert.equal(r3.status, 400, r3.text);
  assert.match(r3.text, /ExportProfilesServiceRequest\.resourceProfiles: want an array/);
});

test('partial success: a profile with a bad stack index is rejected, the other stored', async () => {
  const req = toOtlp(PROFILE, 1, { timeSec: at + 30, service: 'otlp-partial' });
  const bad = JSON.parse(JSON.stringify(req.resourceProfiles[0].scopeProfiles[0].profiles[0]));
  bad.samples[0].stackIndex = 999999;
  bad.timeUnixNano = (at + 60) * 1e9;
  req.resourceProfiles[0].scopeProfiles[0].profiles.push(bad);
  const r = await post(encode(req));
  assert.equal(r.status, 200, r.text);
  const resp = Resp.toObject(Resp.decode(r.buf), { longs: Number });
  assert.equal(resp.partialSuccess.rejectedProfiles, 1);
  assert.match(resp.partialSuccess.errorMessage, /profile 1 sample 0: stack_index 999999 out of range/);
  const q = await http(`${profd.base}/api/v1/query_range?` + qs({ query: 'cpu{service_name="otlp-partial"}', from: at, to: at + 3600 }));
  assert.equal(JSON.stringify(q.json.data).match(/"timestamps":\[[^\]]*\]/)[0].split(',').length, 1, q.text);
});

test('hostile OTLP: 4xx naming the problem, counted, store unchanged', async () => {
  const before = await stored();
  const bad0 = await metric('bad_profile'), big0 = await metric('too_large');
  const good = encode(toOtlp(PROFILE, 1, { timeSec: at + 300 }));
  let r = await post(good.subarray(0, Math.floor(good.length / 2)));
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /not an ExportProfilesServiceRequest/);
  // 100k attributes in the dictionary
  const many = toOtlp(PROFILE, 1, { timeSec: at + 310 });
  for (let i = 0; i < 100000; i++) many.dictionary.attributeTable.push({ keyStrindex: 0, value: { intValue: i } });
  r = await post(encode(many));
  assert.equal(r.status, 413, r.text);
  assert.match(r.text, /attribute_table of 1000\d\d entries, over 10000/);
  // a gzip bomb
  r = await post(Buffer.alloc(200 << 20));
  assert.equal(r.status, 413, r.text);
  assert.match(r.text, /gzip body/);
  // AnyValue nested 2,000 deep in a resource attribute
  let v = { stringValue: 'x' };
  for (let i = 0; i < 2000; i++) v = { arrayValue: { values: [v] } };
  const deep = toOtlp(PROFILE, 1, { timeSec: at + 320 });
  deep.resourceProfiles[0].resource.attributes.push({ key: 'deep', value: v });
  r = await post(encode(deep));
  assert.equal(r.status, 413, r.text);
  assert.match(r.text, /nest deeper than 16/);
  assert.equal(await metric('bad_profile'), bad0 + 1);
  assert.equal(await metric('too_large'), big0 + 3);
  // JSON nested past the cap
  let j = '"x"';
  for (let i = 0; i < 100; i++) j = `{"arrayValue":{"values":[${j.startsWith('{') ? j : `{"stringValue":${j}}`}]}}`;
  r = await http(`${profd.base}/v1development/profiles`, { method: 'POST', body: `{"resourceProfiles":[{"resource":{"attributes":[{"key":"d","value":${j}}]}}]}`, headers: { 'Content-Type': 'application/json' } });
  assert.equal(r.status, 413, r.text);
  assert.match(r.text, /OTLP\/JSON: JSON messages nest deeper than 16/);
  assert.equal(await stored(), before);
});

// The served profile's pprof (decoded) for query q at time t.
async function servedPprof(q, t) {
  const r = await http(`${profd.base}/api/v1/query?` + qs({ query: q, time: t, report: 'proto' }));
  assert.equal(r.status, 200, r.text);
  return Pprof.toObject(Pprof.decode(zlib.gunzipSync(r.buf)), { longs: Number, defaults: true });
}
const typesOf = (pp) => pp.sampleType.map((t) => `${pp.stringTable[t.type]}/${pp.stringTable[t.unit]}`);
const respOf = (r) => Resp.toObject(Resp.decode(r.buf), { longs: Number });

// One small request: stack [1] of function "f", samples as given.
function tiny(samples, { timeSec = at, service = 'otlp-shape', attrs = [] } = {}) {
  return {
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeProfiles: [{ scope: { name: 'e2e' }, profiles: [{
        sampleType: { typeStrindex: 1, unitStrindex: 2 }, periodType: { typeStrindex: 1, unitStrindex: 2 }, period: 1,
        timeUnixNano: timeSec * 1e9, durationNano: 1e9, samples,
      }] }],
    }],
    dictionary: {
      stringTable: ['', 'samples', 'count', 'f', 'thread', 'w1'],
      mappingTable: [{}], locationTable: [{}, { lines: [{ functionIndex: 1, line: 3 }] }], functionTable: [{}, { nameStrindex: 3 }],
      stackTable: [{}, { locationIndices: [1] }], linkTable: [{}], attributeTable: [{}, { keyStrindex: 4, value: { stringValue: 'w1' } }, ...attrs],
    },
  };
}

test('OTLP sample shapes: per-timestamp values are summed, timestamps alone count 1 each', async () => {
  const ts = (n) => Array.from({ length: n }, (_, i) => (at + 100) * 1e9 + i * 1e6);
  const r = await post(encode(tiny([
    { stackIndex: 1, values: [2, 2, 3, 3], timestampsUnixNano: ts(4) }, // 10
    { stackIndex: 1, attributeIndices: [1], timestampsUnixNano: ts(3) }, // 3
    { stackIndex: 1, attributeIndices: [1], values: [7] }, // 7, joined with the one above: 10
  ], { timeSec: at + 100 })));
  assert.equal(r.status, 200, r.text);
  assert.ok(!respOf(r).partialSuccess, JSON.stringify(respOf(r)));
  // the thread attribute is a sample label, so it became a series label
  // (docs/push.md, dynamic labels): one series per thread value
  const byThread = {};
  for (const [k, sel] of [['-', 'samples{service_name="otlp-shape",thread=""}'], ['w1', 'samples{service_name="otlp-shape",thread="w1"}']]) {
    const pp = await servedPprof(sel, at + 100);
    for (const s of pp.sample) byThread[k] = (byThread[k] || 0) + s.value[0];
  }
  assert.deepEqual(byThread, { '-': 10, w1: 10 });
});

test('OTLP: a sample with neither values nor timestamps is refused in partial_success, named', async () => {
  const req = tiny([{ stackIndex: 1, values: [4] }], { timeSec: at + 110, service: 'otlp-neither' });
  const p2 = JSON.parse(JSON.stringify(req.resourceProfiles[0].scopeProfiles[0].profiles[0]));
  p2.timeUnixNano = (at + 120) * 1e9;
  p2.samples = [{ stackIndex: 1, values: [1] }, { stackIndex: 1, attributeIndices: [1] }];
  req.resourceProfiles[0].scopeProfiles[0].profiles.push(p2);
  const r = await post(encode(req));
  assert.equal(r.status, 200, r.text);
  const ps = respOf(r).partialSuccess;
  assert.equal(ps.rejectedProfiles, 1);
  assert.match(ps.errorMessage, /profile 1 sample 1 has neither values nor timestamps_unix_nano/);
  const q = await http(`${profd.base}/api/v1/query_range?` + qs({ query: '{service_name="otlp-neither"}', from: at, to: at + 3600 }));
  assert.deepEqual(q.json.data.map((s) => s.timestamps.length), [1], q.text);
  // values and timestamps of different counts: refused too (MUST have the same number)
  const r2 = await post(encode(tiny([{ stackIndex: 1, values: [1, 2], timestampsUnixNano: [1] }], { timeSec: at + 130, service: 'otlp-neither' })));
  assert.match(respOf(r2).partialSuccess.errorMessage, /2 values and 1 timestamps_unix_nano/);
});

test('a pprof with two sample types converted the standard way (two Profiles, one time) is one profile with both types', async () => {
  const r = await post(encode(toOtlp(PROFILE, [0, 1], { timeSec: at + 200, service: 'otlp-two' })));
  assert.equal(r.status, 200, r.text);
  assert.ok(!respOf(r).partialSuccess, JSON.stringify(respOf(r)));
  const q = await http(`${profd.base}/api/v1/query_range?` + qs({ query: '{service_name="otlp-two"}', from: at, to: at + 3600 }));
  assert.equal(q.json.data.length, 1, q.text);
  const url = `${profd.base}/api/v1/query?` + qs({ query: 'cpu{service_name="otlp-two"}', time: at + 200, report: 'proto' });
  assert.deepEqual(typesOf(await servedPprof('cpu{service_name="otlp-two"}', at + 200)), ['samples/count', 'cpu/nanoseconds']);
  assert.deepEqual(await pprofTop(url, { index: 'samples' }), await pprofTop(PROFILE, { index: 'samples' }));
  assert.deepEqual(await pprofTop(url, { index: 'cpu' }), await pprofTop(PROFILE, { index: 'cpu' }));
});

test('mapping flags (pprof.mapping.has_*) and build ids are kept: go tool pprof -raw and -traces (inline frames) equal the original', async () => {
  const r = await post(encode(toOtlp(PROFILE, [0, 1], { timeSec: at + 210, service: 'otlp-flags' })));
  assert.equal(r.status, 200, r.text);
  const url = `${profd.base}/api/v1/query?` + qs({ query: 'cpu{service_name="otlp-flags"}', time: at + 210, report: 'proto' });
  const mappings = (lines) => lines.slice(lines.findIndex((l) => l === 'Mappings'));
  const want = mappings(await pprofTop(PROFILE, { mode: '-raw' }));
  assert.ok(want.some((l) => /\[FN\]/.test(l)), want.join('\n'));
  assert.deepEqual(mappings(await pprofTop(url, { mode: '-raw' })), want);
  const traces = await pprofTop(url, { mode: '-traces' });
  assert.ok(traces.some((l) => /\(inline\)/.test(l)), traces.join('\n'));
  assert.deepEqual(traces, await pprofTop(PROFILE, { mode: '-traces' }));
});

test('a request of opentelemetry-proto v1.9.0 is refused, never read with invented labels', async () => {
  const before = await stored();
  // with sample attributes: the wire types give it away, the whole request is refused
  const withAttrs = tiny([{ stackIndex: 1, values: [5], attributeIndices: [1] }], { timeSec: at + 400, service: 'otlp-v19' });
  let r = await post(Buffer.from(Req19.encode(Req19.fromObject(withAttrs)).finish()));
  assert.equal(r.status, 400, r.text);
  let st = Status.toObject(Status.decode(r.buf));
  assert.equal(st.code, 3);
  assert.match(st.message, /another release .*v1\.9\.0/);
  // without attributes v1.11.0 reads its values as attribute indices: refused as a sample with neither
  const plain = tiny([{ stackIndex: 1, values: [1] }], { timeSec: at + 410, service: 'otlp-v19' });
  r = await post(Buffer.from(Req19.encode(Req19.fromObject(plain)).finish()));
  assert.equal(r.status, 200, r.text);
  const ps = respOf(r).partialSuccess;
  assert.equal(ps.rejectedProfiles, 1);
  assert.match(ps.errorMessage, /neither values nor timestamps_unix_nano .*v1\.9\.0/);
  assert.equal(await stored(), before);
});

test('errors are a google.rpc.Status in the request\'s content type (protobuf or JSON)', async () => {
  const good = encode(toOtlp(PROFILE, 1, { timeSec: at + 500 }));
  let r = await post(good.subarray(0, 100), { gzip: false });
  assert.equal(r.status, 400);
  assert.equal(r.headers.get('content-type'), 'application/x-protobuf');
  const st = Status.toObject(Status.decode(r.buf));
  assert.equal(st.code, 3);
  assert.match(st.message, /not an ExportProfilesServiceRequest/);
  r = await http(`${profd.base}/v1development/profiles`, { method: 'POST', body: '{"resourceProfiles":{}}', headers: { 'Content-Type': 'application/json' } });
  assert.equal(r.status, 400);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.equal(r.json.code, 3);
  assert.match(r.json.message, /resourceProfiles: want an array/);
  r = await post(Buffer.alloc(200 << 20));
  assert.equal(r.status, 413);
  assert.equal(Status.toObject(Status.decode(r.buf)).code, 8);
});
