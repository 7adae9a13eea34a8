// Issue 18, capture on alert: Debian's Prometheus 2.42 scrapes a real Go
// program (tests/e2e/leaky) and evaluates a rule on its
// go_memstats_heap_inuse_bytes; Debian's prometheus-alertmanager sends the
// alert with its webhook to profd's POST /api/v1/alerts, unchanged. The
// firing alert starts a burst of the matching target (job and instance as
// Prometheus sees them): /metrics shows it and the stored heap profiles come
// every second instead of every 15 s; when the program frees its memory
// the alert resolves and the burst ends (/metrics, events, 15 s spacing
// again).
//
//   PROFD_BIN=build/profd node --test tests/e2e/adaptive_alert.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Proc, apiData, freePort, http, killAll, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { buildLeaky, startLeaky } from './leaky.mjs';

let dir, profd, leaky, prom, am, addr;

function metric(text, name, labels) {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && line.split(' ')[0] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').pop());
  }
  return 0;
}
const metrics = async () => (await http(profd.base + '/metrics')).text;

before(async () => {
  dir = tempDir('pd-adaptive-alert-');
  const bin = await buildLeaky(dir);
  addr = `127.0.0.1:${await freePort()}`;
  const profdPort = await freePort(), amPort = await freePort(), promPort = await freePort();
  const cfg = path.join(dir, 'profd.yaml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: leaky
    scrape_interval: 15s
    profiling_config:
      pprof_config:
        cpu: {enabled: false}
        allocs: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
    static_configs:
      - targets: ['${addr}']
    adaptive_capture:
      scrape_interval: 1s
      max_duration: 10m
`);
  fs.writeFileSync(path.join(dir, 'am.yml'), `route:
  receiver: profd
  group_by: [alertname, job, instance]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: profd
    webhook_configs:
      - url: http://127.0.0.1:${profdPort}/api/v1/alerts
        send_resolved: true
`);
  fs.writeFileSync(path.join(dir, 'rules.yml'), `groups:
  - name: memory
    interval: 1s
    rules:
      - alert: HeapClimbing
        expr: go_memstats_heap_inuse_bytes{job="leaky"} > 40e6
        labels: {severity: page}
`);
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['${path.join(dir, 'rules.yml')}']
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:${amPort}']
scrape_configs:
  - job_name: leaky
    static_configs:
      - targets: ['${addr}']
`);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg, port: profdPort });
  am = new Proc('alertmanager', 'prometheus-alertmanager', [`--config.file=${path.join(dir, 'am.yml')}`,
    `--storage.path=${path.join(dir, 'am')}`, `--web.listen-address=127.0.0.1:${amPort}`, '--cluster.listen-address=']);
  prom = new Proc('prometheus', 'prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--web.listen-address=127.0.0.1:${promPort}`, `--storage.tsdb.path=${path.join(dir, 'prom')}`]);
  await waitFor('Alertmanager to be ready', async () => {
    if (am.exited) throw new Error(`alertmanager exited\n${am.tail()}`);
    const r = await http(`http://127.0.0.1:${amPort}/-/ready`, { timeoutMs: 2000 }).catch(() => null);
    return r && r.status === 200;
  }, 30000, 200);
  // the leak starts after 10 s (a few normal heap scrapes first) and stops, its memory freed, after 35 s more
  leaky = await startLeaky(bin, [addr], ['-rate=4', '-delay=10s', '-stop-after=35s']);
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

async function heapTimes() {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: 'heap{job="leaky"}', from: String(Math.floor(Date.now() / 1000) - 3600), to: String(Math.ceil(Date.now() / 1000) + 60),
  }));
  return data.length ? data[0].timestamps : [];
}

test('a body that is not an Alertmanager message is refused, named and counted; nothing applied', async () => {
  const post = (body) => http(profd.base + '/api/v1/alerts', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const cases = [
    ['{"alerts": [', /not JSON/],
    ['[]', /want a JSON object/],
    ['{"version": "3", "alerts": []}', /"version" must be "4"/],
    ['{"version": "4"}', /"alerts" must be an array/],
    ['{"version": "4", "alerts": [{"status": "pending", "labels": {"job": "leaky"}}]}', /alerts\[0\]: want an object with "status" firing or resolved/],
    [`{"version": "4", "alerts": [{"status": "firing", "labels": {"job": "leaky"}}, {"status": "firing", "labels": {"job": 7}}]}`, /alerts\[1\]\.labels\.job: want a string/],
    ['{"version": "4", "alerts": [{"status": "firing", "labels": {"job": "leaky"}, "startsAt": "yesterday"}]}', /alerts\[0\]\.startsAt: want an RFC 3339 time/],
  ];
  for (const [body, want] of cases) {
    const r = await post(body);
    assert.equal(r.status, 400, body);
    assert.match(r.json.error, want, body);
  }
  const m = await metrics();
  assert.equal(metric(m, 'profd_rejected_input_total', { reason: 'bad_alert' }), cases.length);
  // the second alert of a refused message was valid and matched: nothing was applied
  assert.equal(metric(m, 'profd_adaptive_bursts_started_total', {}), 0);
  assert.equal(metric(m, 'profd_alerts_received_total', {}), 0);
  const r = await http(profd.base + '/api/v1/events?kind=nosuch');
  assert.equal(r.status, 400);
  assert.match(r.json.error, /invalid kind/);
});

test('an Alertmanager alert starts a burst and its resolution ends it', { timeout: 240000 }, async () => {
  await waitFor('the alert to start a burst', async () => {
    if (prom.exited) throw new Error(`prometheus exited\n${prom.tail()}`);
    if (am.exited) throw new Error(`alertmanager exited\n${am.tail()}`);
    const m = await metrics();
    return metric(m, 'profd_adaptive_bursts_started_total', { job: 'leaky', reason: 'alert' }) === 1;
  }, 90000, 250);
  const startedAt = Date.now();
  let m = await metrics();
  assert.equal(metric(m, 'profd_adaptive_targets_in_burst', { job: 'leaky' }), 1);
  assert.equal(metric(m, 'profd_alerts_received_total', { status: 'firing', matched: 'true' }) >= 1, true);
  const started = await apiData(profd.base, '/api/v1/events?' + qs({ kind: 'burst_started', start: '0' }));
  assert.equal(started.length, 1);
  assert.equal(started[0].labels.instance, addr);
  assert.match(started[0].message, /alert HeapClimbing firing/);

  // burst: heap profiles every second
  await new Promise((r) => setTimeout(r, 8000));
  let ts = await heapTimes();
  const inBurst = ts.filter((t) => t >= startedAt);
  assert.ok(inBurst.length >= 6, `heap profiles in 8 s of burst: ${inBurst.length}`);
  const before = ts.filter((t) => t < startedAt - 3000);
  for (let i = 1; i < before.length; i++) assert.ok(before[i] - before[i - 1] >= 14000, '15 s apart before the alert');
  m = await metrics();
  assert.ok(metric(m, 'profd_adaptive_burst_profiles_total', { job: 'leaky', profile_type: 'heap' }) >= 6);

  // the leak stops and frees: the alert resolves, the burst ends
  await waitFor('the resolved alert to end the burst', async () => {
    if (prom.exited || am.exited) throw new Error('prometheus or alertmanager exited');
    const mm = await metrics();
    return metric(mm, 'profd_adaptive_bursts_ended_total', { job: 'leaky', reason: 'resolved' }) === 1;
  }, 120000, 250);
  const endedAt = Date.now();
  m = await metrics();
  assert.equal(metric(m, 'profd_adaptive_targets_in_burst', { job: 'leaky' }), 0);
  assert.ok(metric(m, 'profd_alerts_received_total', { status: 'resolved', matched: 'true' }) >= 1);
  const ended = await apiData(profd.base, '/api/v1/events?' + qs({ kind: 'burst_ended', start: '0' }));
  assert.equal(ended.length, 1);
  assert.equal(ended[0].reason, 'resolved');
  // back to the 15 s interval
  await new Promise((r) => setTimeout(r, 17000));
  ts = await heapTimes();
  const after = ts.filter((t) => t > endedAt + 500);
  assert.ok(after.length >= 1 && after.length <= 2, `heap profiles in 16.5 s after the end: ${after.length}`);
});

test('profd stops cleanly: exit 0, no sanitizer report', { timeout: 30000 }, async () => {
  const ex = await profd.stop(15000);
  assert.equal(ex.code, 0, `profd exit ${JSON.stringify(ex)}\n${profd.tail()}`);
  assert.doesNotMatch(profd.out, /Sanitizer|runtime error:/, profd.tail(20000));
});
