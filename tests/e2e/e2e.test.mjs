// End-to-end test of profd (issue 2, "Real input, end to end"): the real
// binary scraping a real Go program (examples/demo, net/http/pprof) on
// loopback, then the API, `go tool pprof`, restarts and kill -9.
//
//   PROFD_BIN=build/profd node --test tests/e2e/
//
// The tests of this file run in order and share one profd and one demo.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  TESTDATA, Proc, apiData, buildDemo, freePort, goEnv, http, killAll, profdBin, qs, run,
  startDemo, startProfd, tempDir, waitFor, sleep,
} from './lib.mjs';

const TYPES = ['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate', 'cpu'];
const BURNER = 'main.burnCPU';
const LEAKER = 'main.leakMemory';

let dir, storage, configPath, demo, profd, deadPort;
const t0 = Date.now();

// All series matching sel: Map(key → {labels, timestamps}).
async function seriesMap(sel) {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: sel, from: String(Math.floor(t0 / 1000) - 3600), to: String(Math.ceil(Date.now() / 1000) + 3600),
  }));
  assert.ok(Array.isArray(data), `query_range data is not an array: ${JSON.stringify(data).slice(0, 300)}`);
  const m = new Map();
  for (const s of data) {
    assert.ok(s.labels && Array.isArray(s.timestamps) && Array.isArray(s.totals) && Array.isArray(s.sample_types),
      `query_range element lacks labels/timestamps/totals/sample_types: ${JSON.stringify(s).slice(0, 300)}`);
    assert.equal(s.totals.length, s.timestamps.length, 'one totals row per timestamp');
    m.set(JSON.stringify(Object.entries(s.labels).sort()), s);
  }
  return m;
}

const increasing = (ts) => ts.every((v, i) => i === 0 || v > ts[i - 1]);

// Every timestamp of every series in `before` is still listed now.
async function assertKept(before, what) {
  const now = await seriesMap('{__name__=~".+"}');
  let n = 0;
  for (const [key, s] of before) {
    const again = now.get(key);
    assert.ok(again, `${what}: series ${key} is gone\n${profd.tail()}`);
    const have = new Set(again.timestamps);
    const lost = s.timestamps.filter((t) => !have.has(t));
    assert.deepEqual(lost, [], `${what}: series ${key} lost ${lost.length} of ${s.timestamps.length} acknowledged profiles`);
    n += s.timestamps.length;
  }
  return n;
}

async function topFunctions(sel, time, sampleIndex) {
  const p = { query: sel, time: String(time / 1000), report: 'top' };
  if (sampleIndex) p.sample_index = sampleIndex;
  const top = await apiData(profd.base, '/api/v1/query?' + qs(p));
  assert.ok(top && Array.isArray(top.rows), `report=top has no rows: ${JSON.stringify(top).slice(0, 300)}`);
  return top;
}

// The e2e config: the demo (all seven types, cpu over 1 s) and, unless
// opts.dead is false, a job "dead" on a port nobody listens on; with
// opts.again, a job "again" scraping only the demo's heap every second.
function writeConfig(file, demoAddr, deadAddr, opts = {}) {
  const { dead = true, again = false } = opts;
  let y = `# written by tests/e2e/e2e.test.mjs
global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: demo
    static_configs:
      - targets: ["${demoAddr}"]
        labels:
          env: e2e
    profiling_config:
      pprof_config:
        cpu: {path: /debug/pprof/profile, seconds: 1}
`;
  if (dead) {
    y += `  - job_name: dead
    scrape_interval: 2s
    static_configs:
      - targets: ["${deadAddr}"]
`;
  }
  if (again) {
    y += `  - job_name: again
    scrape_interval: 1s
    scrape_timeout: 1s
    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
    static_configs:
      - targets: ["${demoAddr}"]
`;
  }
  fs.writeFileSync(file, y);
}

// Sum of the /metrics samples of `name` whose labels contain every `k="v"` of want.
async function metricSum(name, want = {}) {
  const r = await http(profd.base + '/metrics');
  assert.equal(r.status, 200, `/metrics: HTTP ${r.status}`);
  let sum = 0;
  for (const line of r.text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    const labels = m[3] || '';
    if (Object.entries(want).every(([k, v]) => labels.includes(`${k}="${v}"`))) sum += Number(m[4]);
  }
  return sum;
}

before(async () => {
  profdBin();
  dir = tempDir('profd-e2e-');
  storage = path.join(dir, 'data');
  const demoBin = await buildDemo(dir);
  demo = await startDemo(demoBin);
  deadPort = await freePort();
  configPath = path.join(dir, 'profd.yaml');
  writeConfig(configPath, demo.addr, `127.0.0.1:${deadPort}`);
  profd = await startProfd({ storage, config: configPath, extraArgs: ['--web.enable-lifecycle'] });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// Each bad config: exit 2 before anything is served or stored, with a
// message that names the file, the line and what is wrong.
const BAD_CONFIGS = [
  ['unknown key', 'global:\n  scrape_interval: 2s\nscrape_configs:\n  - job_name: x\n    no_such_key: 1\n' +
    '    static_configs:\n      - targets: ["127.0.0.1:1"]\n', [/no_such_key/, /:5:/]],
  ['bad duration', 'global:\n  scrape_interval: banana\nscrape_configs: []\n', [/banana/, /:2:/, /scrape_interval/]],
  ['bad boolean', 'scrape_configs:\n  - job_name: x\n    profiling_config:\n      pprof_config:\n' +
    '        heap: {enabled: maybe}\n    static_configs: [{targets: ["127.0.0.1:1"]}]\n', [/maybe/, /:5:/, /enabled/]],
  ['YAML syntax', 'scrape_configs:\n  - job_name: x\n    static_configs:\n      - targets: ["127.0.0.1:1"\n', [/:\d+:/]],
  ['missing file', null, [/no-such-config\.yaml/, /No such file/i]],
];

test('a bad config exits 2 with a message naming file, line and problem', { timeout: 180000 }, async () => {
  for (const [what, yaml, want] of BAD_CONFIGS) {
    const name = what === 'missing file' ? 'no-such-config.yaml' : `bad-${what.replace(/\W+/g, '-')}.yaml`;
    const file = path.join(dir, name);
    if (yaml !== null) fs.writeFileSync(file, yaml);
    const data = path.join(dir, 'bad-data');
    const port = await freePort();
    const p = new Proc(`profd-${what}`, profdBin(), ['serve', `--config.file=${file}`,
      `--storage.path=${data}`, `--web.listen-address=127.0.0.1:${port}`]);
    const ex = await p.wait(15000);
    assert.equal(ex.code, 2, `${what}: exit code ${JSON.stringify(ex)}\n${p.tail()}`);
    assert.ok(p.out.includes(name), `${what}: the message names the file\n${p.tail()}`);
    for (const re of want) assert.match(p.out, re, `${what}: the message matches ${re}\n${p.tail()}`);
    assert.ok(!fs.existsSync(path.join(data, 'wal')), `${what}: nothing was stored`);
  }
});

test('query_range lists all seven profile types with increasing timestamps', { timeout: 180000 }, async () => {
  await waitFor('two scrapes of every profile type', async () => {
    const left = [];
    for (const type of TYPES) {
      const m = await seriesMap(`${type}{job="demo"}`);
      if (![...m.values()].some((s) => s.timestamps.length >= 2)) left.push(type);
    }
    if (left.length) throw new Error('not yet: ' + left.join(' '));
    return true;
  }, 45000, 1000).catch((e) => { throw new Error(`${e.message}\n${profd.tail()}`); });
  for (const type of TYPES) {
    const m = await seriesMap(`${type}{job="demo"}`);
    assert.equal(m.size, 1, `${type}: one series for the one demo target`);
    const s = [...m.values()][0];
    assert.equal(s.labels.__name__, type);
    assert.equal(s.labels.job, 'demo');
    assert.equal(s.labels.instance, demo.addr);
    assert.equal(s.labels.env, 'e2e', 'static labels are attached');
    assert.ok(increasing(s.timestamps), `${type}: timestamps increase: ${s.timestamps}`);
    assert.ok(s.timestamps[0] >= t0 - 60000 && s.timestamps.at(-1) <= Date.now() + 60000,
      `${type}: timestamps are Unix ms of now: ${s.timestamps}`);
    assert.ok(s.sample_types.length >= 1 && s.totals.every((row) => row.length === s.sample_types.length),
      `${type}: a total per sample type`);
  }
  // The CPU profile has a nanoseconds sample type whose totals are > 0 (the burner runs).
  const cpu = [...(await seriesMap('cpu{job="demo"}')).values()][0];
  const ns = cpu.sample_types.findIndex((st) => st.unit === 'nanoseconds');
  assert.ok(ns >= 0, `cpu has a nanoseconds sample type: ${JSON.stringify(cpu.sample_types)}`);
  assert.ok(cpu.totals.some((row) => row[ns] > 0), 'cpu totals are positive');
});

test('top of the CPU profile has the burner; of the heap the leak', { timeout: 180000 }, async () => {
  const cpu = await topFunctions('cpu{job="demo"}', Date.now());
  const names = cpu.rows.map((r) => r.function);
  assert.ok(names.includes(BURNER), `cpu top lacks ${BURNER}: ${names.slice(0, 15).join(', ')}`);
  const burner = cpu.rows.find((r) => r.function === BURNER);
  assert.ok(burner.flat > 0 && burner.cum >= burner.flat, `burner has flat > 0 and cum >= flat: ${JSON.stringify(burner)}`);
  assert.equal(cpu.sample_type.unit, 'nanoseconds', 'default sample type of cpu is cpu/nanoseconds');

  // The heap profile reflects the last GC, so the leak may need a cycle or two to show.
  await waitFor(`${LEAKER} in the heap profile's top`, async () => {
    for (const idx of ['inuse_space', 'alloc_space']) {
      const heap = await topFunctions('heap{job="demo"}', Date.now(), idx);
      assert.equal(heap.sample_type.type, idx, 'sample_index chooses the sample type');
      assert.equal(heap.sample_type.unit, 'bytes');
      if (heap.rows.some((r) => r.function === LEAKER)) return true;
    }
    return false;
  }, 30000, 2000);

  const fg = await apiData(profd.base, '/api/v1/query?' + qs({ query: 'cpu{job="demo"}', time: String(Date.now() / 1000), report: 'flamegraph' }));
  const found = [];
  const walk = (n) => { if (n.name === BURNER) found.push(n); (n.children || []).forEach(walk); };
  walk(fg);
  assert.ok(found.length > 0, `flamegraph has a ${BURNER} frame`);
  assert.ok(fg.value >= found.reduce((a, n) => a + n.value, 0), 'root value covers the burner');
});

test('go tool pprof -top reads report=proto straight from profd', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/v1/query?` + qs({ query: 'cpu{job="demo"}', time: String(Date.now() / 1000), report: 'proto' });
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-top', url], { env: goEnv(gd), cwd: gd }, 50000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /main\.burnCPU/, `go tool pprof -top prints the burner\n${r.stdout}`);
  assert.match(r.stdout, /Type: cpu/, `the default sample type is cpu\n${r.stdout}`);
});

test('a malformed push gets 400 and changes nothing', { timeout: 180000 }, async () => {
  const good = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
  const created = new Date(Math.floor(Date.now() / 1000) * 1000 - 120000);
  const push = (body, createdAt) => http(`${profd.base}/api/0/profiles?` + qs({
    service: 'e2e-push', type: 'heap', instance_id: 'i-1', labels: 'zone=a,team=x', created_at: createdAt.toISOString().replace(/\.\d+Z$/, 'Z'),
  }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } });

  const ok = await push(good, created);
  assert.ok(ok.status >= 200 && ok.status < 300, `a valid push is accepted: HTTP ${ok.status} ${ok.text}`);
  const sel = 'heap{service="e2e-push"}';
  const before = await seriesMap(sel);
  assert.equal(before.size, 1, 'the pushed series exists');
  const s = [...before.values()][0];
  assert.deepEqual(s.timestamps, [created.getTime()], 'stored at created_at');
  assert.equal(s.labels.instance_id, 'i-1');
  assert.equal(s.labels.zone, 'a');
  assert.equal(s.labels.team, 'x');

  const garbage = Buffer.from('this is not a pprof profile \x00\x01\x02\xff\xfe', 'latin1');
  const truncated = good.subarray(0, Math.floor(good.length / 2));
  const fakeGzip = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(64, 0x41)]);
  for (const [what, body] of [['garbage', garbage], ['truncated gzip', truncated], ['bad gzip', fakeGzip]]) {
    const r = await push(body, new Date(created.getTime() + 1000));
    assert.equal(r.status, 400, `${what}: HTTP ${r.status} ${r.text}`);
    assert.ok(r.json && r.json.status === 'error' && r.json.error, `${what}: an error envelope: ${r.text.slice(0, 300)}`);
  }
  const after = await seriesMap(sel);
  assert.deepEqual([...after.values()].map((x) => x.timestamps), [s.timestamps], 'query_range unchanged');
  const all = await seriesMap('{service="e2e-push"}');
  assert.equal(all.size, 1, 'no other series appeared');
});

test('a dead target shows health down with its error', { timeout: 180000 }, async () => {
  const dead = await waitFor('the dead target to be scraped', async () => {
    const data = await apiData(profd.base, '/api/v1/targets');
    const list = (data.activeTargets || []).filter((t) => t.scrapePool === 'dead');
    return list.length && list.every((t) => t.health !== 'unknown') ? list : null;
  }, 20000, 500);
  for (const t of dead) {
    assert.equal(t.health, 'down', JSON.stringify(t));
    assert.ok(t.lastError && t.lastError.length > 0, `a last error: ${JSON.stringify(t)}`);
    assert.match(t.lastError, /connect/i, `the error says the connection failed: ${t.lastError}`);
    assert.ok(t.lastScrape > t0 - 60000, `a dead target has a last scrape time: ${t.lastScrape}`);
    assert.equal(t.labels.instance, `127.0.0.1:${deadPort}`);
  }
  const types = new Set(dead.map((t) => t.profileType));
  for (const type of TYPES) assert.ok(types.has(type), `dead target has an entry for ${type}`);
  const data = await apiData(profd.base, '/api/v1/targets');
  const up = data.activeTargets.filter((t) => t.scrapePool === 'demo');
  assert.equal(up.length, TYPES.length, 'one entry per profile type of the demo');
  for (const t of up) {
    assert.equal(t.health, 'up', JSON.stringify(t));
    assert.ok(t.lastScrape > t0 - 60000, `lastScrape is Unix ms: ${t.lastScrape}`);
    // seconds: a scrape lasts no longer than this test has run (no constant
    // bound on a measured duration, issue 34)
    assert.ok(t.lastScrapeDuration >= 0 && t.lastScrapeDuration * 1000 <= Date.now() - t0, `duration in seconds: ${t.lastScrapeDuration}`);
  }
  const dq = await seriesMap(`{job="dead"}`);
  assert.equal(dq.size, 0, 'nothing stored for the dead target');
  assert.ok(await metricSum('profd_scrapes_total', { job: 'dead', outcome: 'error' }) >= TYPES.length,
    '/metrics counts the failed scrapes of the dead target');
  assert.equal(await metricSum('profd_scrapes_total', { job: 'dead', outcome: 'success' }), 0,
    'no successful scrape of the dead target');
});

test('/metrics counts scrapes', { timeout: 180000 }, async () => {
  const r = await http(profd.base + '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.text, /^profd_scrapes_total\{[^}]*\} \d+/m, 'profd_scrapes_total with labels');
  assert.match(r.text, /# TYPE profd_scrapes_total counter/);
});

test('POST /-/reload and SIGHUP reload the config; stored data is untouched', { timeout: 180000 }, async () => {
  const pools = async () => (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  const poolNames = (ts) => [...new Set(ts.map((t) => t.scrapePool))].sort();
  const before = await seriesMap('{__name__=~".+"}');

  // POST /-/reload: job "dead" goes, job "again" (heap only) comes.
  writeConfig(configPath, demo.addr, `127.0.0.1:${deadPort}`, { dead: false, again: true });
  let r = await http(profd.base + '/-/reload', { method: 'POST' });
  assert.equal(r.status, 200, `POST /-/reload: HTTP ${r.status} ${r.text}\n${profd.tail()}`);
  let ts = await pools();
  assert.deepEqual(poolNames(ts), ['again', 'demo'], 'the targets follow the reloaded config');
  assert.deepEqual(ts.filter((t) => t.scrapePool === 'again').map((t) => t.profileType), ['heap'],
    'the new job scrapes only what its pprof_config enables');
  for (const t of ts.filter((x) => x.scrapePool === 'demo')) {
    assert.equal(t.health, 'up', `a target that stays keeps its health: ${JSON.stringify(t)}`);
  }
  await waitFor('a heap profile of the new job "again"', async () => {
    const m = await seriesMap('heap{job="again"}');
    return m.size === 1 && [...m.values()][0].timestamps.length >= 1;
  }, 15000, 500);
  await assertKept(before, 'after POST /-/reload');

  // A config that does not load: the reload fails with the reason, nothing changes.
  const good = fs.readFileSync(configPath);
  fs.writeFileSync(configPath, 'global:\n  scrape_interval: soon\nscrape_configs: []\n');
  r = await http(profd.base + '/-/reload', { method: 'POST' });
  assert.ok(r.status >= 400, `a bad config fails the reload: HTTP ${r.status} ${r.text}`);
  assert.match(r.text, /soon/, `the reply says what is wrong: ${r.text}`);
  assert.deepEqual(poolNames(await pools()), ['again', 'demo'], 'a failed reload keeps the old targets');
  process.kill(profd.pid, 'SIGHUP');
  await waitFor('profd to log the failed SIGHUP reload', () => /reload failed/.test(profd.out), 10000, 200);
  assert.equal(profd.exited, null, `profd survives a bad SIGHUP reload\n${profd.tail()}`);
  assert.deepEqual(poolNames(await pools()), ['again', 'demo'], 'a failed SIGHUP reload keeps the old targets');
  fs.writeFileSync(configPath, good);

  // SIGHUP: back to the first config; the data of the removed job stays.
  const before2 = await seriesMap('{__name__=~".+"}');
  writeConfig(configPath, demo.addr, `127.0.0.1:${deadPort}`);
  process.kill(profd.pid, 'SIGHUP');
  await waitFor('SIGHUP to bring back job "dead" and drop job "again"', async () =>
    JSON.stringify(poolNames(await pools())) === JSON.stringify(['dead', 'demo']), 10000, 200);
  assert.equal(profd.exited, null, `profd is still running after SIGHUP\n${profd.tail()}`);
  await assertKept(before2, 'after SIGHUP');
  // Scraping goes on after both reloads.
  const heapNow = [...(await seriesMap('heap{job="demo"}')).values()][0].timestamps.length;
  await waitFor('a new demo heap scrape after the reloads', async () =>
    [...(await seriesMap('heap{job="demo"}')).values()][0].timestamps.length > heapNow, 10000, 500);
});

let p2Spawn = 0; // when the profd of the restart test was started

test('profiles survive a restart (SIGTERM)', { timeout: 180000 }, async () => {
  const before = await seriesMap('{__name__=~".+"}');
  assert.ok(before.size >= TYPES.length + 1, `series before: ${before.size}`);
  const cpuBefore = [...before.values()].find((s) => s.labels.__name__ === 'cpu');
  const ex = await profd.stop(20000);
  assert.equal(ex.code, 0, `profd exits 0 on SIGTERM: ${JSON.stringify(ex)}\n${profd.tail()}`);
  p2Spawn = Date.now();
  profd = await startProfd({ storage, config: configPath, name: 'profd-restarted' });
  const n = await assertKept(before, 'after SIGTERM and restart');
  assert.ok(n >= 2 * TYPES.length, `checked ${n} profiles`);
  // The bodies are readable too: the oldest CPU profile still has the burner.
  const top = await topFunctions(`cpu{job="demo"}`, cpuBefore.timestamps[0]);
  assert.ok(top.rows.some((r) => r.function === BURNER), 'oldest cpu profile still has the burner');
});

test('acknowledged profiles survive kill -9', { timeout: 180000 }, async () => {
  // Let scrapes land in the restarted process first (waited for, not slept:
  // a busy machine only makes them later).
  await waitFor('a scrape by the restarted process', async () =>
    (await metricSum('profd_scrapes_total', { job: 'demo', outcome: 'success' })) >= 2, 120000, 250);
  const before = await seriesMap('{__name__=~".+"}');

  // Pushes in flight when the process dies: every one answered 2xx must be
  // there afterwards. Four loops, each its own series (instance_id).
  const body = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
  // half an hour back: inside the window of seriesMap, apart from the scrapes
  const base = Math.floor(Date.now() / 1000) * 1000 - 1800000;
  const acked = new Map(); // instance_id -> [created_at ms]
  let killed = false;
  const loop = async (inst) => {
    acked.set(inst, []);
    for (let i = 0; !killed; i++) {
      const ts = base + i * 1000;
      const r = await http(`${profd.base}/api/0/profiles?` + qs({
        service: 'e2e-kill9', type: 'heap', instance_id: inst, created_at: new Date(ts).toISOString().replace(/\.\d+Z$/, 'Z'),
      }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } }).catch(() => null);
      if (r && r.status >= 200 && r.status < 300) acked.get(inst).push(ts);
      else if (!killed) throw new Error(`push ${inst}#${i} failed before the kill: ${r ? r.status + ' ' + r.text : 'no reply'}`);
    }
  };
  const loops = ['k0', 'k1', 'k2', 'k3'].map(loop);
  await waitFor('pushes to be acknowledged', () => [...acked.values()].every((v) => v.length >= 5), 20000, 50);
  // Scrapes acknowledged by this process (counted only once stored).
  const scraped = await metricSum('profd_scrapes_total', { job: 'demo', outcome: 'success' });
  profd.kill('SIGKILL');
  killed = true;
  const ex = await profd.wait(10000);
  assert.equal(ex.signal, 'SIGKILL');
  await Promise.all(loops);

  profd = await startProfd({ storage, config: configPath, name: 'profd-after-kill9' });
  const n = await assertKept(before, 'after kill -9');
  assert.ok(n > 0);

  const pushed = await seriesMap('heap{service="e2e-kill9"}');
  let nAcked = 0;
  for (const [inst, list] of acked) {
    const s = [...pushed.values()].find((x) => x.labels.instance_id === inst);
    assert.ok(s, `series of ${inst} survives kill -9`);
    const have = new Set(s.timestamps);
    const lost = list.filter((t) => !have.has(t));
    assert.deepEqual(lost, [], `${inst}: ${lost.length} of ${list.length} acknowledged pushes lost by kill -9`);
    nAcked += list.length;
  }
  assert.ok(nAcked >= 20, `checked ${nAcked} acknowledged pushes`);

  // Every scrape the killed process counted as a success is stored: its
  // scrapes are the demo profiles stamped after it was started.
  let stored = 0;
  for (const s of (await seriesMap('{job="demo"}')).values()) stored += s.timestamps.filter((t) => t >= p2Spawn).length;
  assert.ok(scraped > 0, 'the killed process had scraped');
  assert.ok(stored >= scraped, `stored ${stored} demo profiles of the killed process, it acknowledged ${scraped}`);

  // And it keeps scraping into the same series after the crash.
  const heapBefore = [...before.values()].find((s) => s.labels.__name__ === 'heap' && s.labels.job === 'demo');
  await waitFor('a new heap scrape after kill -9', async () => {
    const m = await seriesMap('heap{job="demo"}');
    const s = [...m.values()][0];
    return s && s.timestamps.length > heapBefore.timestamps.length && increasing(s.timestamps);
  }, 15000, 500);
});
