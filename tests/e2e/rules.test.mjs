// Issue 30, profiles become metrics: profd scrapes a real Go program
// (tests/e2e/hotapp, Debian's golang-go) whose CPU work in main.hotTagged
// runs under pprof.Do labels endpoint=/checkout and /search; a recording
// rule "CPU nanoseconds in main.hotTagged by endpoint" sends one sample per
// profile by remote write to Debian's Prometheus 2.42
// (--web.enable-remote-write-receiver).
//   - PromQL sum_over_time over the run equals profd's merge of that
//     function per endpoint (the same integer nanoseconds);
//   - Prometheus is stopped for 30 s and started again on the same storage:
//     nothing is lost — the samples wait in profd's queue (retried, counted
//     in profd_remote_storage_retried_samples_total), none is dropped or
//     failed, and the sums still agree;
//   - GET /api/v1/rules shows the rule healthy with its last evaluation;
//     `profd check config` names a bad rule's line and key, exit 2.
//
//   PROFD_BIN=build/profd node --test tests/e2e/rules.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { apiData, freePort, http, killAll, profdBin, qs, run, sleep, startProfd, tempDir, waitFor } from './lib.mjs';
import { buildHotapp, startHotapp } from './hotapp.mjs';
import { startPrometheus } from './prom.mjs';

let dir, profd, app, prom, promPort, t0, cfgPath, cfgText;
const RULE = 'profd_hot_tagged_cpu_nanoseconds';

async function startProm() {
  prom = await startPrometheus(dir, { port: promPort, remoteWriteReceiver: true, ready: true });
}

async function promQuery(q) {
  const r = await http(`http://127.0.0.1:${promPort}/api/v1/query?` + qs({ query: q, time: String(Date.now() / 1000) }));
  assert.equal(r.status, 200, r.text);
  return r.json.data.result;
}

function metric(text, name) {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + '{') || line.split(' ')[0] === name) sum += Number(line.split(' ').pop());
  return sum;
}
const metrics = async () => (await http(profd.base + '/metrics')).text;

before(async () => {
  profdBin();
  dir = tempDir('pd-rules-');
  const bin = await buildHotapp(dir);
  app = await startHotapp(bin);
  promPort = await freePort();
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), 'global:\n  scrape_interval: 1h\n');
  await startProm();
  const cfg = cfgPath = path.join(dir, 'profd.yml');
  fs.writeFileSync(cfg, cfgText = `global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: hot
    profiling_config:
      pprof_config:
        cpu: {enabled: true, seconds: 1}
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate'].map((t) => `        ${t}: {enabled: false}`).join('\n')}
    static_configs:
      - targets: ["${app.addr}"]
recording_rules:
  - record: ${RULE}
    selector: 'cpu{job="hot"}'
    sample_type: cpu
    function: 'main\\.hotTagged'
    by: [endpoint]
remote_write:
  - url: http://127.0.0.1:${promPort}/api/v1/write
    queue_config: {min_backoff: 100ms, max_backoff: 1s}
`);
  t0 = Math.floor(Date.now() / 1000) - 5;
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// profd's merge of main.hotTagged (cum, CPU ns) per endpoint, all profiles
async function profdHot(endpoint) {
  const r = await http(profd.base + '/api/v1/query?' + qs({
    mode: 'merge', query: `cpu{job="hot",endpoint="${endpoint}"}`, from: t0, to: Math.ceil(Date.now() / 1000) + 5,
    report: 'top', sample_index: 'cpu', limit: 0,
  }));
  assert.equal(r.status, 200, r.text.slice(0, 500));
  const top = r.json.data || r.json;
  const row = top.rows.find((x) => x.function === 'main.hotTagged');
  return row ? Number(row.cum) : 0;
}

async function promHot() {
  const res = await promQuery(`sum_over_time(${RULE}[1h])`);
  const out = {};
  for (const s of res) out[s.metric.endpoint || ''] = Number(s.value[1]);
  return out;
}

async function drained() {
  await waitFor('profd remote write queue to drain', async () => metric(await metrics(), 'profd_remote_storage_samples_pending') === 0, 120000, 250);
}

test('the rule\'s series arrive in Prometheus; Prometheus down 30 s then back loses nothing; sums equal profd\'s merge', { timeout: 600000 }, async () => {
  await waitFor('rule samples for both endpoints in Prometheus', async () => {
    const p = await promHot().catch(() => ({}));
    return p['/checkout'] > 0 && p['/search'] > 0;
  }, 120000, 500);
  const rules = await apiData(profd.base, '/api/v1/rules');
  const rule = rules.groups[0].rules[0];
  assert.equal(rule.name, RULE);
  assert.equal(rule.health, 'ok', JSON.stringify(rule));
  assert.ok(rule.evaluations > 0 && rule.lastEvaluation, JSON.stringify(rule));
  assert.deepEqual(rule.by, ['endpoint']);

  // Prometheus down for 30 s: scrapes go on, samples queue and are retried
  await prom.stop();
  const sentBefore = metric(await metrics(), 'profd_remote_storage_samples_total');
  await sleep(30000);
  // still down: a retry and a queued sample are waited for (how many came
  // in the 30 s depends on the machine's load)
  await waitFor('retries while Prometheus is down', async () =>
    metric(await metrics(), 'profd_remote_storage_retried_samples_total') > 0, 120000, 250);
  await waitFor('samples waiting in the queue', async () =>
    metric(await metrics(), 'profd_remote_storage_samples_pending') > 0, 120000, 250);
  let m;
  await startProm();
  await waitFor('samples sent after Prometheus is back', async () => metric(await metrics(), 'profd_remote_storage_samples_total') > sentBefore, 120000, 500);

  // stop the program, let the last scrapes land, drain the queue, compare
  app.kill();
  await sleep(5000);
  await drained();
  m = await metrics();
  assert.equal(metric(m, 'profd_remote_storage_dropped_samples_total'), 0, 'nothing dropped');
  assert.equal(metric(m, 'profd_remote_storage_failed_samples_total'), 0, 'nothing refused');
  const got = await promHot();
  for (const ep of ['/checkout', '/search']) {
    const want = await profdHot(ep);
    assert.ok(want > 0, `profd has main.hotTagged for ${ep}`);
    assert.equal(got[ep], want, `sum_over_time of ${ep} in Prometheus vs profd's merge`);
  }
  // /checkout does twice /search's work: the ratio shows through
  assert.ok(got['/checkout'] > got['/search'], JSON.stringify(got));
});

test('SIGHUP reloads the rules: an unchanged rule keeps its state, a new one is listed; a bad file keeps them', async () => {
  const before = (await apiData(profd.base, '/api/v1/rules')).groups[0].rules[0];
  fs.writeFileSync(cfgPath, cfgText.replace('remote_write:', `  - record: profd_cold_cpu_nanoseconds
    selector: 'cpu{job="hot"}'
    sample_type: cpu
    function: 'main\\.coldWork'
remote_write:`));
  process.kill(profd.pid, 'SIGHUP');
  let rules;
  await waitFor('the new rule listed', async () => {
    rules = (await apiData(profd.base, '/api/v1/rules')).groups[0].rules;
    return rules.length === 2;
  }, 60000, 200);
  assert.equal(rules[0].name, RULE);
  assert.ok(rules[0].evaluations >= before.evaluations, 'the unchanged rule keeps its history');
  assert.equal(rules[1].name, 'profd_cold_cpu_nanoseconds');
  assert.equal(rules[1].health, 'unknown');
  fs.writeFileSync(cfgPath, cfgText.replace("sample_type: cpu\n", "sample_type: cpu\n    function_match: leaf\n"));
  process.kill(profd.pid, 'SIGHUP');
  await waitFor('the failed reload logged', async () => /reload failed, keeping the old configuration/.test(profd.out), 60000, 200);
  assert.match(profd.out, /function_match: \\?'leaf\\?'|function_match: .leaf./);
  assert.equal((await apiData(profd.base, '/api/v1/rules')).groups[0].rules.length, 2);
});

test('profd check config names a bad rule by file, line and key; exit 2', async () => {
  const bad = path.join(dir, 'bad.yml');
  fs.writeFileSync(bad, `scrape_configs: []
recording_rules:
  - record: ok_metric
    selector: cpu
    sample_type: cpu
  - record: bad_metric
    selector: cpu
    sample_type: cpu
    function_match: leaf
    function: x
`);
  const r = await run(profdBin(), ['check', 'config', bad]);
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /bad\.yml:9:21: rule bad_metric: function_match: "leaf": want total/);
  fs.writeFileSync(bad, `recording_rules:
  - record: m
    selector: 'cpu{job='
    sample_type: cpu
`);
  const r2 = await run(profdBin(), ['check', 'config', bad]);
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /bad\.yml:3:15: rule m: selector cpu\{job=:/);
  const good = path.join(dir, 'good.yml');
  fs.writeFileSync(good, `recording_rules:
  - {record: m, selector: 'cpu{job="a"}', sample_type: cpu, function: 'main\\..*', function_match: self, by: [endpoint]}
remote_write: [{url: 'http://127.0.0.1:9/api/v1/write', write_relabel_configs: []}]
`);
  const r3 = await run(profdBin(), ['check', 'config', good]);
  assert.equal(r3.code, 0, r3.stderr);
  assert.match(r3.stdout, /recording rule m: cpu of cpu\{job="a"\}, stacks ending in main\\\.\.\*, by \(endpoint\)/);
  assert.match(r3.stdout, /warning: .*write_relabel_configs ignored/);
});
