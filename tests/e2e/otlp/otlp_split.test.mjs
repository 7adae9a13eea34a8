// Issue 26 item 2 for OTLP: sample attributes become series labels. A real
// Go CPU profile (shared testdata) re-expressed as an OTLP v1.11 request by
// protobufjs (from the vendored .proto files), its samples carrying the
// attribute http.route = "/a" or "/b" (alternating), a span_id on some
// (kept on the samples, never a series label) and an integer thread.id
// (a numeric label: stays on the samples):
//   - one request, 200, no partial success;
//   - two series, {"http.route"="/a"} and {"http.route"="/b"}, each with the
//     resource's labels, selected by /api/v1/series;
//   - their totals add up to the profile's, and each one's merge equals the
//     original profile's samples of that route (go tool pprof -top);
//   - no series has a span_id or thread.id label.
//
//   PROFD_BIN=build/profd node --test tests/e2e/otlp/otlp_split.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { SRC, TESTDATA, apiData, goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir } from '../lib.mjs';

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
  dir = tempDir('profd-otlp-split-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const routeOf = (i) => (i % 2 ? '/b' : '/a');
let pp;

// The pprof at PROFILE as one OTLP profile of sample type cpu (index 1),
// sample i with attributes http.route = routeOf(i), thread.id = i % 3 (int),
// and span_id on every third sample.
function toOtlp() {
  pp = Pprof.toObject(Pprof.decode(zlib.gunzipSync(fs.readFileSync(PROFILE))), { longs: String, defaults: true });
  const S = pp.stringTable;
  const strs = [''], sidx = new Map([['', 0]]);
  const str = (s) => { if (!sidx.has(s)) { sidx.set(s, strs.length); strs.push(s); } return sidx.get(s); };
  const dict = { mappingTable: [{}], locationTable: [{}], functionTable: [{}], stringTable: strs, attributeTable: [{}], stackTable: [{}], linkTable: [{}] };
  const attr = (key, value) => { dict.attributeTable.push({ keyStrindex: str(key), value }); return dict.attributeTable.length - 1; };
  const routeA = attr('http.route', { stringValue: '/a' }), routeB = attr('http.route', { stringValue: '/b' });
  const thr = [0, 1, 2].map((n) => attr('thread.id', { intValue: n }));
  const span = attr('span_id', { stringValue: '00f067aa0ba902b7' });
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
  const samples = pp.sample.map((s, i) => {
    dict.stackTable.push({ locationIndices: s.locationId.map((id) => locIdx.get(id)) });
    const ai = [i % 2 ? routeB : routeA, thr[i % 3]];
    if (i % 3 === 0) ai.push(span);
    return { stackIndex: dict.stackTable.length - 1, values: [s.value[1]], attributeIndices: ai };
  });
  const st = pp.sampleType[1];
  const profile = {
    sampleType: { typeStrindex: str(S[st.type]), unitStrindex: str(S[st.unit]) },
    periodType: { typeStrindex: str(S[pp.periodType.type]), unitStrindex: str(S[pp.periodType.unit]) },
    period: pp.period, timeUnixNano: at * 1e9, durationNano: pp.durationNanos, samples,
  };
  return {
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-split' } }] },
      scopeProfiles: [{ scope: { name: 'e2e' }, profiles: [profile] }],
    }],
    dictionary: dict,
  };
}

// The original profile's samples of one route, as a pprof file for go tool pprof.
function routeFile(route) {
  const raw = Pprof.decode(zlib.gunzipSync(fs.readFileSync(PROFILE)));
  raw.sample = raw.sample.filter((s, i) => routeOf(i) === route);
  const f = path.join(dir, `route${route.replace('/', '_')}.pb.gz`);
  fs.writeFileSync(f, zlib.gzipSync(Pprof.encode(raw).finish()));
  return f;
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

test('an OTLP profile whose samples carry attributes is stored as one series per attribute set', async () => {
  const r = await http(`${profd.base}/v1development/profiles`, {
    method: 'POST', body: zlib.gzipSync(Buffer.from(Req.encode(Req.fromObject(toOtlp())).finish())),
    headers: { 'Content-Type': 'application/x-protobuf', 'Content-Encoding': 'gzip' },
  });
  assert.equal(r.status, 200, r.text);
  const resp = Resp.toObject(Resp.decode(r.buf), { longs: Number });
  assert.ok(!resp.partialSuccess || !resp.partialSuccess.rejectedProfiles, JSON.stringify(resp));
  const all = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': '{service_name="otlp-split"}', start: at - 60, end: at + 60 }));
  assert.deepEqual(all.map((s) => s['http.route']).sort(), ['/a', '/b'], JSON.stringify(all));
  for (const s of all) {
    assert.equal(s.__name__, 'cpu');
    assert.ok(!('span_id' in s) && !('thread.id' in s), `span ids and numbers stay on the samples: ${JSON.stringify(s)}`);
  }
  for (const route of ['/a', '/b']) {
    const sel = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': `{"http.route"="${route}"}`, start: at - 60, end: at + 60 }));
    assert.equal(sel.length, 1, JSON.stringify(sel));
  }
});

test('each route\'s series holds exactly that route\'s samples (go tool pprof -top)', { timeout: 120000 }, async () => {
  for (const route of ['/a', '/b']) {
    const url = `${profd.base}/api/v1/query?` + qs({ query: `cpu{service_name="otlp-split","http.route"="${route}"}`, time: at, report: 'proto' });
    const got = await pprofTop(url);
    const want = await pprofTop(routeFile(route));
    assert.ok(want.length > 2, want.join('\n'));
    assert.deepEqual(got, want, route);
  }
});
