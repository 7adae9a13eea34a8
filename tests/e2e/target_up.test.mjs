// End-to-end test of the per-target series of /metrics (profd_target_up,
// profd_scrape_last_duration_seconds, profd_scrape_last_success_timestamp_seconds):
// the real profd binary scraping, on loopback, the real Go demo
// (examples/demo: up), a node HTTP server answering 500 and a body that is
// not a profile (down), and a port nobody listens on (down); then reloads
// (POST /-/reload, SIGHUP) that drop targets, whose series must leave the
// /metrics text. Everything is read through profd's real /metrics endpoint.
//
//   PROFD_BIN=build/profd node --test tests/e2e/target_up.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  buildDemo, freePort, http as get, killAll, profdBin, startDemo, startProfd, tempDir, waitFor,
} from './lib.mjs';

let dir, configPath, demo, profd, deadPort, broken, brokenAddr;
const t0 = Date.now();

// Parses the Prometheus text format: [{name, labels: {k: v}, value}] and the
// TYPE of each family.
function parseMetrics(text) {
  const samples = [];
  const types = {};
  for (const line of text.split('\n')) {
    let m = line.match(/^# TYPE (\S+) (\S+)$/);
    if (m) { types[m[1]] = m[2]; continue; }
    if (!line || line.startsWith('#')) continue;
    m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/);
    assert.ok(m, `a /metrics line that does not parse: ${line}`);
    const labels = {};
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/gy;
    let l;
    const body = m[2] || '';
    while (re.lastIndex < body.length && (l = re.exec(body))) {
      assert.ok(!(l[1] in labels), `label ${l[1]} twice in ${line}`);
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    assert.equal(re.lastIndex, body.length, `labels that do not parse: ${line}`);
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { samples, types };
}

async function metrics() {
  const r = await get(profd.base + '/metrics');
  assert.equal(r.status, 200, `/metrics: HTTP ${r.status}`);
  return parseMetrics(r.text);
}

// The samples of family `name` whose labels include every pair of want.
function pick(ms, name, want = {}) {
  return ms.samples.filter((s) => s.name === name &&
    Object.entries(want).every(([k, v]) => s.labels[k] === v));
}

const pprof = (enabled, extra = '') => `    profiling_config:
      pprof_config:
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate', 'cpu']
    .map((t) => `        ${t}: {enabled: ${enabled.includes(t)}}`).join('\n')}
${extra}`;

// demo: heap and goroutine of the Go demo (with opts.goroutine false, heap only);
// broken: the node server's /500 and /garbage; dead: nothing listens.
function writeConfig({ broken: withBroken = true, dead = true, goroutine = true } = {}) {
  let y = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: demo
${pprof(goroutine ? ['heap', 'goroutine'] : ['heap'])}
    static_configs:
      - targets: ["${demo.addr}"]
        labels: {env: e2e}
`;
  if (withBroken) {
    y += `  - job_name: broken
${pprof([], '        err500: {path: /500}\n        garbage: {path: /garbage}\n')}
    static_configs:
      - targets: ["${brokenAddr}"]
`;
  }
  if (dead) {
    y += `  - job_name: dead
${pprof(['heap'])}
    static_configs:
      - targets: ["127.0.0.1:${deadPort}"]
`;
  }
  fs.writeFileSync(configPath, y);
}

before(async () => {
  profdBin();
  dir = tempDir('profd-e2e-up-');
  demo = await startDemo(await buildDemo(dir));
  deadPort = await freePort();
  broken = http.createServer((req, res) => {
    if (req.url.startsWith('/500')) { res.writeHead(500); res.end('internal error\n'); return; }
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    res.end('this is not a pprof profile');
  });
  await new Promise((r) => broken.listen(0, '127.0.0.1', r));
  brokenAddr = `127.0.0.1:${broken.address().port}`;
  configPath = path.join(dir, 'profd.yaml');
  writeConfig();
  profd = await startProfd({ storage: path.join(dir, 'data'), config: configPath, extraArgs: ['--web.enable-lifecycle'] });
});

after(async () => {
  await killAll();
  if (broken) broken.close();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('profd_target_up is 1 for a live target, 0 for a 500, a garbage body and a dead port', { timeout: 180000 }, async () => {
  const ms = await waitFor('a profd_target_up series for every target', async () => {
    const m = await metrics();
    return pick(m, 'profd_target_up').length >= 5 ? m : null;
  }, 20000, 300);
  assert.equal(ms.types.profd_target_up, 'gauge');
  assert.equal(ms.types.profd_scrape_last_duration_seconds, 'gauge');
  assert.equal(ms.types.profd_scrape_last_success_timestamp_seconds, 'gauge');
  const up = pick(ms, 'profd_target_up');
  const show = JSON.stringify(up);
  assert.equal(up.length, 5, `one series per target and profile type: ${show}`);

  for (const type of ['heap', 'goroutine']) {
    const want = { job: 'demo', instance: demo.addr, profile_type: type, env: 'e2e' };
    const s = pick(ms, 'profd_target_up', want);
    assert.equal(s.length, 1, `demo ${type}: ${show}`);
    assert.deepEqual(s[0].labels, want, 'labels: the target labels and profile_type, nothing else');
    assert.equal(s[0].value, 1, `demo ${type} is up`);
    const d = pick(ms, 'profd_scrape_last_duration_seconds', want);
    assert.ok(d.length === 1 && d[0].value >= 0, `duration: ${JSON.stringify(d)}`);
    const ts = pick(ms, 'profd_scrape_last_success_timestamp_seconds', want);
    assert.ok(ts.length === 1 && ts[0].value * 1000 >= t0 - 1000 && ts[0].value * 1000 <= Date.now(),
      `last success is Unix seconds of now: ${JSON.stringify(ts)}`);
  }
  for (const [want, what] of [
    [{ job: 'broken', profile_type: 'err500' }, 'HTTP 500'],
    [{ job: 'broken', profile_type: 'garbage' }, 'a body that is not a profile'],
    [{ job: 'dead', profile_type: 'heap', instance: `127.0.0.1:${deadPort}` }, 'nothing listening'],
  ]) {
    const s = pick(ms, 'profd_target_up', want);
    assert.equal(s.length, 1, `${what}: ${show}`);
    assert.equal(s[0].value, 0, `${what} is down`);
    assert.equal(pick(ms, 'profd_scrape_last_success_timestamp_seconds', want).length, 0,
      `${what}: no success timestamp`);
    assert.equal(pick(ms, 'profd_scrape_last_duration_seconds', want).length, 1, `${what}: a duration`);
  }
  // the same verdict as /api/v1/targets
  const targets = (await get(profd.base + '/api/v1/targets')).json.data.activeTargets;
  for (const t of targets) {
    if (t.health === 'unknown') continue;
    const s = pick(ms, 'profd_target_up', { job: t.scrapePool, profile_type: t.profileType });
    assert.equal(s.length, 1, `${t.scrapePool}/${t.profileType}`);
    assert.equal(s[0].value, t.health === 'up' ? 1 : 0, `${t.scrapePool}/${t.profileType}: ${t.health}`);
  }
});

test('a reload that drops targets removes their series from /metrics', { timeout: 180000 }, async () => {
  // POST /-/reload: job "dead" and the broken target go
  writeConfig({ broken: false, dead: false });
  let r = await get(profd.base + '/-/reload', { method: 'POST' });
  assert.equal(r.status, 200, `POST /-/reload: HTTP ${r.status} ${r.text}`);
  let ms = await metrics();
  for (const job of ['dead', 'broken']) {
    for (const name of ['profd_target_up', 'profd_scrape_last_duration_seconds',
      'profd_scrape_last_success_timestamp_seconds', 'profd_scrapes_total',
      'profd_scrape_duration_seconds_total']) {
      assert.deepEqual(pick(ms, name, { job }), [], `${name} of job ${job} is gone after the reload`);
    }
  }
  assert.equal(pick(ms, 'profd_target_up', { job: 'demo' }).length, 2, 'the demo stays');
  // ...and stays gone while scraping goes on (no late update brings it back)
  const n = pick(ms, 'profd_scrapes_total', { job: 'demo', profile_type: 'heap', outcome: 'success' })[0].value;
  ms = await waitFor('two more demo heap scrapes', async () => {
    const m = await metrics();
    return pick(m, 'profd_scrapes_total', { job: 'demo', profile_type: 'heap', outcome: 'success' })[0].value >= n + 2 ? m : null;
  }, 15000, 300);
  assert.deepEqual(pick(ms, 'profd_target_up', { job: 'dead' }), []);
  assert.deepEqual(pick(ms, 'profd_target_up', { job: 'broken' }), []);
  assert.ok(pick(ms, 'profd_target_up', { job: 'demo' }).every((s) => s.value === 1), 'the demo is still up');

  // SIGHUP: one profile type of the demo goes; the other stays
  writeConfig({ broken: false, dead: false, goroutine: false });
  process.kill(profd.pid, 'SIGHUP');
  ms = await waitFor('the goroutine series of the demo to go after SIGHUP', async () => {
    const m = await metrics();
    // each family's series are removed one after another: wait for both
    return pick(m, 'profd_target_up', { job: 'demo', profile_type: 'goroutine' }).length === 0 &&
      pick(m, 'profd_scrape_last_success_timestamp_seconds', { profile_type: 'goroutine' }).length === 0 ? m : null;
  }, 10000, 200);
  assert.equal(profd.exited, null, `profd still runs\n${profd.tail()}`);
  assert.equal(pick(ms, 'profd_scrape_last_success_timestamp_seconds', { profile_type: 'goroutine' }).length, 0);
  const heap = pick(ms, 'profd_target_up', { job: 'demo', profile_type: 'heap' });
  assert.ok(heap.length === 1 && heap[0].value === 1, `demo heap stays up: ${JSON.stringify(heap)}`);

  // and a target that comes back gets its series again
  writeConfig({ broken: false, dead: true, goroutine: false });
  r = await get(profd.base + '/-/reload', { method: 'POST' });
  assert.equal(r.status, 200);
  await waitFor('job "dead" to be down again', async () => {
    const s = pick(await metrics(), 'profd_target_up', { job: 'dead' });
    return s.length === 1 && s[0].value === 0;
  }, 10000, 200);
});
