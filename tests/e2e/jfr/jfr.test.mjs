// End-to-end test of Pyroscope's /ingest?format=jfr with a real JVM:
// Debian's OpenJDK 17 (openjdk-17-jdk-headless) compiles and runs
// tests/e2e/jfr/Hot.java under -XX:StartFlightRecording (settings=profile);
// the recording is pushed as the Pyroscope Java agent pushes it (multipart
// part "jfr", gzip, plus a "labels" part) to /ingest?name=app&format=jfr;
// `go tool pprof -top` on the native query URL shows Hot.burnCpu on top of
// cpu and Hot.allocate on top of the allocation samples. Then hostile
// input — a lying constant-pool offset, a truncated recording, a gzip bomb,
// a bad labels part — each answers 4xx naming the problem, is counted in
// /metrics and leaves the store as it was.
//
//   PROFD_BIN=build/profd node --test tests/e2e/jfr/jfr.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir } from '../lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let dir, profd, jfr, jfrFile, from;

before(async () => {
  profdBin();
  dir = tempDir('profd-jfr-');
  const cls = path.join(dir, 'classes');
  fs.mkdirSync(cls);
  let r = await run('javac', ['-d', cls, path.join(here, 'Hot.java')], {}, 120000);
  assert.equal(r.code, 0, `javac failed (is openjdk-17-jdk-headless installed? scripts/install-deps.sh)\n${r.stdout}${r.stderr}`);
  const out = path.join(dir, 'hot.jfr');
  // settings=profile plus the TLAB allocation events (off in JDK 17's profile.jfc)
  r = await run('java', [`-XX:StartFlightRecording=filename=${out},settings=profile,+jdk.ObjectAllocationInNewTLAB#enabled=true,+jdk.ObjectAllocationOutsideTLAB#enabled=true`, '-cp', cls, 'Hot', '3'],
    { cwd: dir }, 120000);
  assert.equal(r.code, 0, `java failed\n${r.stdout}${r.stderr}`);
  jfr = fs.readFileSync(out);
  jfrFile = out;
  assert.equal(jfr.subarray(0, 4).toString('latin1'), 'FLR\0');
  profd = await startProfd({ storage: path.join(dir, 'data') });
  from = Math.floor(Date.now() / 1000) - 60;
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// POST like the Java agent: multipart with a gzip "jfr" part and "labels".
async function pushAgent(body, { labels = Buffer.alloc(0), at = from, name = 'app', gzip = true } = {}) {
  const fd = new FormData();
  fd.append('jfr', new Blob([gzip ? zlib.gzipSync(body) : body]), 'jfr');
  fd.append('labels', new Blob([labels]), 'labels');
  const q = qs({ name, from: at, until: at + 10, format: 'jfr', sampleRate: 100, spyName: 'javaspy', units: 'samples', aggregationType: 'sum' });
  return http(`${profd.base}/ingest?${q}`, { method: 'POST', body: fd });
}

async function pprofTop(url, extra = []) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-top', ...extra, url], { env: goEnv(gd), cwd: gd }, 90000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  // the rows after the header line "flat  flat%  sum% cum cum%"
  const lines = r.stdout.split('\n');
  const h = lines.findIndex((l) => /flat%\s+sum%/.test(l));
  assert.ok(h >= 0, r.stdout);
  return lines.slice(h + 1).filter((l) => l.trim()).map((l) => l.trim().split(/\s+/).slice(5).join(' '));
}

async function metric(name, reason) {
  const r = await http(`${profd.base}/metrics`);
  const re = new RegExp(`^${name}\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)`, 'm');
  const m = r.text.match(re);
  return m ? Number(m[1]) : 0;
}

async function profilesStored() {
  const r = await http(`${profd.base}/api/v1/query_range?` + qs({ query: '{service_name="app"}', from: from - 3600, to: from + 3600 }));
  assert.equal(r.status, 200, r.text);
  return JSON.stringify(r.json.data);
}

test('a JFR pushed as the Java agent does comes back per profile type, hot methods on top', async () => {
  const r = await pushAgent(jfr);
  assert.equal(r.status, 200, r.text);
  const url = (sel) => `${profd.base}/api/v1/query?` + qs({ query: sel, time: from, report: 'proto' });
  const cpu = await pprofTop(url('cpu{service_name="app"}'));
  assert.equal(cpu[0], 'Hot.burnCpu', cpu.slice(0, 5).join('\n'));
  const alloc = await pprofTop(url('alloc_sample{service_name="app"}'), ['-sample_index=alloc_sample_bytes']);
  assert.equal(alloc[0], 'Hot.allocate', alloc.slice(0, 5).join('\n'));
  // issue 26: the same recording again at the same second (a second JVM of
  // the app with the same labels, or the agent's next upload within the
  // second) is kept too, every event kind of it, side by side at the next ms
  const again = await pushAgent(jfr);
  assert.equal(again.status, 200, again.text);
  const rr = await http(`${profd.base}/api/v1/query_range?` + qs({ query: '{service_name="app"}', from: from - 1, to: from + 1 }));
  assert.equal(rr.status, 200, rr.text);
  assert.ok(rr.json.data.length >= 2, `several event kinds: ${rr.text.slice(0, 300)}`);
  for (const s of rr.json.data) {
    assert.deepEqual(s.timestamps, [from * 1000, from * 1000 + 1], `${s.labels.__name__}: both uploads`);
    assert.deepEqual(s.totals[1], s.totals[0], `${s.labels.__name__}: the same recording twice`);
  }
  // raw body (no multipart), another time: stored too
  const raw = await http(`${profd.base}/ingest?` + qs({ name: 'app', from: from + 20, format: 'jfr' }), { method: 'POST', body: jfr });
  assert.equal(raw.status, 200, raw.text);
});

// Connect JSON call to Pyroscope's querier (what Grafana's data source calls).
async function querier(method, body) {
  const r = await http(`${profd.base}/querier.v1.QuerierService/${method}`, {
    method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' },
  });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// Sum of the durations of `jfr print` (the JDK's own reader) for an event type, in ns.
async function jfrPrintNanos(event) {
  const r = await run('jfr', ['print', '--json', '--events', event, jfrFile], {}, 60000);
  assert.equal(r.code, 0, r.stderr);
  const evs = JSON.parse(r.stdout).recording.events;
  let ns = 0n;
  for (const e of evs) {
    const m = /^PT(?:(\d+)M)?(\d+)(?:\.(\d+))?S$/.exec(e.values.duration);
    assert.ok(m, e.values.duration);
    ns += BigInt(m[1] || 0) * 60000000000n + BigInt(m[2]) * 1000000000n + BigInt((m[3] || '').padEnd(9, '0').slice(0, 9));
  }
  return { ns, n: evs.length };
}

test('Java types under Pyroscope\'s profile type IDs (grafana/jfr-parser\'s names), profd\'s names as aliases; delay is jfr print\'s nanoseconds', async () => {
  const r = await pushAgent(jfr, { name: 'appq' });
  assert.equal(r.status, 200, r.text);
  const range = { start: (from - 3600) * 1000, end: (from + 3600) * 1000 };
  const types = (await querier('ProfileTypes', range)).profileTypes.map((t) => t.ID);
  for (const id of ['process_cpu:cpu:nanoseconds:cpu:nanoseconds',
    'memory:alloc_in_new_tlab_objects:count:space:bytes', 'memory:alloc_in_new_tlab_bytes:bytes:space:bytes',
    'memory:alloc_sample_objects:count:space:bytes', 'memory:alloc_sample_bytes:bytes:space:bytes',
    'mutex:contentions:count:mutex:count', 'mutex:delay:nanoseconds:mutex:count',
    'block:contentions:count:block:count', 'block:delay:nanoseconds:block:count'])
    assert.ok(types.includes(id), `${id} not in ${types.join(' ')}`);
  assert.ok(!types.some((t) => /^(alloc_in_new_tlab|alloc_sample):/.test(t) || t === 'mutex:contentions:count:contentions:count'), types.join(' '));
  const total = async (id) => {
    const fg = (await querier('SelectMergeStacktraces', { profileTypeID: id, labelSelector: '{service_name="appq"}', ...range })).flamegraph;
    return BigInt(fg.total || 0);
  };
  // each canonical ID and profd's own name (the alias) select the same data
  for (const [id, alias] of [
    ['memory:alloc_in_new_tlab_bytes:bytes:space:bytes', 'alloc_in_new_tlab:alloc_in_new_tlab_bytes:bytes:space:bytes'],
    ['memory:alloc_sample_bytes:bytes:space:bytes', 'alloc_sample:alloc_sample_bytes:bytes:space:bytes'],
    ['mutex:contentions:count:mutex:count', 'mutex:contentions:count:contentions:count'],
    ['block:delay:nanoseconds:block:count', 'block:delay:nanoseconds:contentions:count'],
  ]) {
    const a = await total(id);
    assert.ok(a > 0n, `${id}: empty`);
    assert.equal(await total(alias), a, `${alias} vs ${id}`);
  }
  // delay: nanoseconds as the JDK's jfr print shows them (Pyroscope's own
  // converter keeps the raw ticks: ticksPerSecond/1e9 times these)
  for (const [id, ev] of [['mutex:delay:nanoseconds:mutex:count', 'jdk.JavaMonitorEnter'], ['block:delay:nanoseconds:block:count', 'jdk.ThreadPark']]) {
    const want = await jfrPrintNanos(ev);
    assert.ok(want.n > 0, `no ${ev} events in the recording`);
    const got = await total(id);
    const diff = got > want.ns ? got - want.ns : want.ns - got;
    assert.ok(diff <= BigInt(want.n), `${id}: ${got} ns, jfr print ${want.ns} ns over ${want.n} events`);
  }
});

test('hostile JFR and labels: 4xx naming the problem, counted, store unchanged', async () => {
  const before = await profilesStored();
  const bad0 = await metric('profd_rejected_input_total', 'bad_profile');
  // a lying constant-pool offset (header bytes 16..23)
  const lie = Buffer.from(jfr);
  lie.writeBigUInt64BE(BigInt(jfr.length) * 8n, 16);
  let r = await pushAgent(lie, { at: from + 100 });
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /chunk 1 at offset 16: constant pool offset \d+ is outside the chunk/);
  // truncated
  r = await pushAgent(jfr.subarray(0, Math.floor(jfr.length / 2)), { at: from + 110 });
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /chunk 1 at offset 8: chunk size/);
  // not JFR at all
  r = await pushAgent(Buffer.from('hello'), { at: from + 120 });
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /jfr: chunk 1 at offset 0/);
  assert.equal(await metric('profd_rejected_input_total', 'bad_profile'), bad0 + 3);
  // a gzip bomb: 200 MiB of zeros, over the 64 MiB decompression cap
  const big0 = await metric('profd_rejected_input_total', 'too_large');
  r = await pushAgent(Buffer.alloc(200 << 20), { at: from + 130 });
  assert.equal(r.status, 413, r.text);
  assert.match(r.text, /jfr: gzip/);
  assert.equal(await metric('profd_rejected_input_total', 'too_large'), big0 + 1);
  // a labels part that is not a LabelsSnapshot
  const bl0 = await metric('profd_rejected_input_total', 'bad_labels');
  r = await pushAgent(jfr, { at: from + 140, labels: Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]) });
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /labels: not a LabelsSnapshot/);
  assert.equal(await metric('profd_rejected_input_total', 'bad_labels'), bl0 + 1);
  assert.equal(await profilesStored(), before, 'nothing stored by the refused pushes');
});
