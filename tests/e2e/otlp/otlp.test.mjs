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
let protobuf, dir, profd, Req, Resp, Pprof;
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
  ns.add(T('Mapping', [['id', 1, 'uint64'], ['memoryStart', 2, 'uint64'], ['memoryLimit', 3, 'uint64'], ['fileOffset', 4, 'uint64'], ['filename', 5, 'int64'], ['buildId', 6, 'int64']]));
  ns.add(T('Line', [['functionId', 1, 'uint64'], ['line', 2, 'int64']]));
  ns.add(T('Location', [['id', 1, 'uint64'], ['mappingId', 2, 'uint64'], ['address', 3, 'uint64'], ['line', 4, 'Line', 1]]));
  ns.add(T('Function', [['id', 1, 'uint64'], ['name', 2, 'int64'], ['systemName', 3, 'int64'], ['filename', 4, 'int64'], ['startLine', 5, 'int64']]));
  ns.add(T('Profile', [['sampleType', 1, 'ValueType', 1], ['sample', 2, 'Sample', 1], ['mapping', 3, 'Mapping', 1], ['location', 4, 'Location', 1], ['function', 5, 'Function', 1], ['stringTable', 6, 'string', 1], ['timeNanos', 9, 'int64'], ['durationNanos', 10, 'int64'], ['periodType', 11, 'ValueType'], ['period', 12, 'int64']]));
  Pprof = ns.lookupType('Profile');
  dir = tempDir('profd-otlp-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// The pprof at file as one OTLP profile of sample type index si.
function toOtlp(file, si, { timeSec = at, service = 'otlp-e2e' } = {}) {
  const pp = Pprof.toObject(Pprof.decode(zlib.gunzipSync(fs.readFileSync(file))), { longs: String, defaults: true });
  const S = pp.stringTable;
  const strs = [''], sidx = new Map([['', 0]]);
  const str = (s) => { if (!sidx.has(s)) { sidx.set(s, strs.length); strs.push(s); } return sidx.get(s); };
  const dict = { mappingTable: [{}], locationTable: [{}], functionTable: [{}], stringTable: strs, attributeTable: [{}], stackTable: [{}], linkTable: [{}] };
  const mapIdx = new Map(), fnIdx = new Map(), locIdx = new Map();
  for (const m of pp.mapping) {
    mapIdx.set(m.id, dict.mappingTable.length);
    dict.mappingTable.push({ memoryStart: m.memoryStart, memoryLimit: m.memoryLimit, fileOffset: m.fileOffset, filenameStrindex: str(S[m.filename]) });
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
  const samples = pp.sample.map((s) => {
    dict.stackTable.push({ locationIndices: s.locationId.map((id) => locIdx.get(id)) });
    return { stackIndex: dict.stackTable.length - 1, values: [s.value[si]] };
  });
  const st = pp.sampleType[si];
  const profile = {
    sampleType: { typeStrindex: str(S[st.type]), unitStrindex: str(S[st.unit]) },
    periodType: { typeStrindex: str(S[pp.periodType.type]), unitStrindex: str(S[pp.periodType.unit]) },
    period: pp.period, timeUnixNano: timeSec * 1e9, durationNano: pp.durationNanos, samples,
  };
  return {
    resourceProfiles: [{
      resource: { attributes: [
        { key: 'service.name', value: { stringValue: service } },
        { key: 'host.name', value: { stringValue: 'box1' } },
      ] },
      scopeProfiles: [{ scope: { name: 'e2e' }, profiles: [profile] }],
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

async function pprofTop(src) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-top', '-nodecount=100000', '-sample_index=cpu', src], { env: goEnv(gd), cwd: gd }, 90000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  const lines = r.stdout.split('\n');
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
  assert.match(resp.partialSuccess.errorMessage, /profile 1: sample 0: stack_index 999999 out of range/);
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
  assert.match(r.text, /attribute_table of 100001 entries, over 10000/);
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
