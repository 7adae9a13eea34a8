// Issue 30, regression report: a real Go program (tests/e2e/hotapp, Debian's
// golang-go) built at two versions — v2 with main.hotTagged doing twice the
// work (go build -ldflags -X main.defaultFactor) — and run twice at v1. profd
// scrapes the three, labelled version and run.
//   - GET /api/v1/regressions?query=cpu{job="reg"}&by=version ranks
//     main.hotTagged first, grown, from v1 to v2;
//   - the two runs of v1 (by=run) report nothing above the noise;
//   - a bad parameter is a 400 naming it.
//
//   PROFD_BIN=build/profd node --test tests/e2e/regressions.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, freePort, goEnv, http, killAll, profdBin, qs, run, sleep, startProfd, tempDir, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let dir, profd, t0;

async function build(dir, name, factor) {
  const bin = path.join(dir, name);
  const r = await run('go', ['build', '-o', bin, '-ldflags', `-X main.defaultFactor=${factor}`, '.'],
    { cwd: path.join(here, 'hotapp'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/e2e/hotapp\n${r.stdout}${r.stderr}`);
  return bin;
}

async function start(bin, port) {
  // asyncpreemptoff: on a busy machine the scheduler preempts the hot loop
  // by signal more often, and SIGPROF then lands in runtime.asyncPreempt
  // above main.hotTagged (CI ranked it first: 0.28 -> 0.54 of the time,
  // load, not code); without async preemption the leaf is the loop itself.
  const p = new Proc(path.basename(bin), bin, [`-listen=127.0.0.1:${port}`],
    { env: { ...process.env, GODEBUG: 'asyncpreemptoff=1' } });
  await waitFor('the Go target to serve /debug/pprof/', async () => {
    if (p.exited) throw new Error(`exited early\n${p.tail()}`);
    const h = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 2000 }).catch(() => null);
    return h && h.status === 200;
  }, 30000, 100);
  return p;
}

async function profiles(sel) {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: sel, from: t0, to: Math.ceil(Date.now() / 1000) + 5 }));
  return new Set(data.flatMap((s) => s.timestamps)).size;
}

// The samples (sample type "samples") of every profile of sel since t0, merged.
async function samples(sel) {
  const d = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: sel, from: t0,
    to: Math.ceil(Date.now() / 1000) + 5, report: 'top', limit: 1, sample_index: 'samples' }));
  return d.total || 0;
}

before(async () => {
  profdBin();
  dir = tempDir('pd-regress-');
  const v1 = await build(dir, 'hotapp-v1', 1);
  const v2 = await build(dir, 'hotapp-v2', 2);
  const [pa, pb, pc] = [await freePort(), await freePort(), await freePort()];
  const cfg = path.join(dir, 'profd.yml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: reg
    scrape_interval: 3s
    scrape_timeout: 3s
    profiling_config:
      pprof_config:
        cpu: {enabled: true, seconds: 2}
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate'].map((t) => `        ${t}: {enabled: false}`).join('\n')}
    static_configs:
      - targets: ["127.0.0.1:${pa}"]
        labels: {version: v1, run: a}
      - targets: ["127.0.0.1:${pb}"]
        labels: {version: v1, run: b}
      - targets: ["127.0.0.1:${pc}"]
        labels: {version: v2, run: c}
`);
  t0 = Math.floor(Date.now() / 1000) - 5;
  await start(v1, pa);
  await start(v1, pb);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg });
  // v2 comes later, as a release does: its first profile is after v1's
  await waitFor('profiles of v1', async () => (await profiles('cpu{job="reg",version="v1"}')) >= 2, 120000, 500);
  await start(v2, pc);
  await waitFor('12 profiles of each run', async () =>
    (await profiles('cpu{job="reg",run="a"}')) >= 12 && (await profiles('cpu{job="reg",run="b"}')) >= 12 &&
    (await profiles('cpu{job="reg",run="c"}')) >= 12, 300000, 1000);
  // The report's noise is the standard error of a share, about
  // sqrt(p(1-p) / samples): what decides is how many samples there are, not
  // how many profiles. On a busy machine a 2 s profile holds a few samples
  // (load 30: v1 -> v2 was reported as nothing above the noise). +17 points
  // (hotTagged 50% -> 67%) stands over 4 noises from ~200 samples of v2
  // and twice that of v1; wait for three times that.
  await waitFor('600 CPU samples of v2 and 1,200 of v1', async () =>
    (await samples('cpu{job="reg",version="v2"}')) >= 600 && (await samples('cpu{job="reg",version="v1"}')) >= 1200,
  600000, 2000);
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('v1 -> v2: main.hotTagged, whose work doubled, is ranked first, grown', async () => {
  const d = await apiData(profd.base, '/api/v1/regressions?' + qs({ query: 'cpu{job="reg"}', by: 'version', from: t0, sample_index: 'cpu' }));
  assert.deepEqual(d.versions.map((v) => v.version), ['v1', 'v2'], JSON.stringify(d.versions));
  assert.equal(d.comparisons.length, 1);
  const c = d.comparisons[0];
  assert.equal(c.from, 'v1');
  assert.equal(c.to, 'v2');
  assert.ok(c.functions.length >= 1, JSON.stringify(c));
  assert.equal(c.functions[0].function, 'main.hotTagged', JSON.stringify(c.functions.slice(0, 3)));
  assert.equal(c.functions[0].direction, 'grew');
  assert.ok(c.functions[0].change > 4 * c.functions[0].noise, JSON.stringify(c.functions[0]));
  assert.equal(c.compare.query, 'cpu{job="reg",version="v1"}');
  assert.equal(c.compare.query_b, 'cpu{job="reg",version="v2"}');
});

test('two runs of one version report nothing above the noise', async () => {
  const d = await apiData(profd.base, '/api/v1/regressions?' + qs({ query: 'cpu{job="reg",version="v1"}', by: 'run', from: t0, sample_index: 'cpu' }));
  assert.deepEqual(d.versions.map((v) => v.version).sort(), ['a', 'b']);
  assert.equal(d.comparisons.length, 1);
  assert.deepEqual(d.comparisons[0].functions, [], JSON.stringify(d.comparisons[0]));
  assert.equal(d.comparisons[0].reported, 0);
});

test('a bad parameter is a 400 naming it, counted', async () => {
  for (const [q, want] of [[{}, /missing query/], [{ query: 'cpu{' }, /invalid query/], [{ query: 'cpu', limit: '0' }, /invalid limit/],
    [{ query: 'cpu', min_change: '2' }, /invalid min_change/], [{ query: 'cpu', from: 'yesterday' }, /invalid from/]]) {
    const r = await http(profd.base + '/api/v1/regressions?' + qs(q));
    assert.equal(r.status, 400, JSON.stringify(q));
    assert.match(r.json.error, want);
  }
  const m = (await http(profd.base + '/metrics')).text;
  assert.match(m, /profd_rejected_input_total\{reason="bad_query"\} [1-9]/);
});
