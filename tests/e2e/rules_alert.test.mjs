// Issue 30, the loop closed: a recording rule's series (CPU in
// main.hotTagged of a real Go program, tests/e2e/hotapp, by job and
// instance) goes by remote write into Debian's Prometheus 2.42; a
// Prometheus alerting rule on it fires through Debian's
// prometheus-alertmanager into profd's POST /api/v1/alerts, which starts an
// adaptive burst of that target (profd_adaptive_bursts_started_total, a
// burst_started event, goroutine profiles every 2 s instead of every 15 s).
//
//   PROFD_BIN=build/profd node --test tests/e2e/rules_alert.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { apiData, freePort, http, killAll, profdBin, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { buildHotapp, startHotapp } from './hotapp.mjs';
import { startAlertmanager, startPrometheus } from './prom.mjs';

let dir, profd, app, prom, am;

before(async () => {
  profdBin();
  dir = tempDir('pd-rules-alert-');
  app = await startHotapp(await buildHotapp(dir));
  const profdPort = await freePort(), amPort = await freePort(), promPort = await freePort();
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
  fs.writeFileSync(path.join(dir, 'alerts.yml'), `groups:
  - name: profd
    interval: 1s
    rules:
      - alert: HotTaggedBusy
        expr: sum by (job, instance) (sum_over_time(profd_hot_tagged_cpu_nanoseconds[1m])) > 0
        labels: {severity: ticket}
`);
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), `global:
  evaluation_interval: 1s
rule_files: ['${path.join(dir, 'alerts.yml')}']
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:${amPort}']
`);
  const cfg = path.join(dir, 'profd.yml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: hot
    scrape_interval: 15s
    profiling_config:
      pprof_config:
        cpu: {enabled: true, seconds: 1}
${['allocs', 'block', 'heap', 'mutex', 'threadcreate'].map((t) => `        ${t}: {enabled: false}`).join('\n')}
    static_configs:
      - targets: ["${app.addr}"]
    adaptive_capture:
      profiles: [goroutine]
      scrape_interval: 2s
      max_duration: 10m
recording_rules:
  - record: profd_hot_tagged_cpu_nanoseconds
    selector: 'cpu{job="hot"}'
    sample_type: cpu
    function: 'main\\.hotTagged'
    by: [job, instance]
remote_write:
  - url: http://127.0.0.1:${promPort}/api/v1/write
`);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg, port: profdPort });
  am = await startAlertmanager(dir, { port: amPort });
  prom = await startPrometheus(dir, { port: promPort, remoteWriteReceiver: true });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('an alert on a recording rule\'s series starts an adaptive burst of the target', { timeout: 600000 }, async () => {
  await waitFor('the alert to start a burst', async () => {
    if (prom.exited) throw new Error(`prometheus exited\n${prom.tail()}`);
    if (am.exited) throw new Error(`alertmanager exited\n${am.tail()}`);
    const m = (await http(profd.base + '/metrics')).text;
    return /profd_adaptive_bursts_started_total\{[^}]*job="hot"[^}]*\} [1-9]/.test(m);
  }, 300000, 500);
  const ev = await apiData(profd.base, '/api/v1/events?' + qs({ kind: 'burst_started' }));
  assert.ok(ev.length >= 1, JSON.stringify(ev));
  assert.equal(ev[0].job, 'hot');
  assert.match(JSON.stringify(ev[0]), /HotTaggedBusy|alert/);
  // the burst: goroutine profiles of the target come every 2 s instead of every 15 s
  const since = Math.floor(Date.now() / 1000);
  let ts = [];
  await waitFor('three profiles in the burst', async () => {
    const d = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'goroutine{job="hot"}', from: since, to: Math.ceil(Date.now() / 1000) + 5 }));
    ts = [...new Set(d.flatMap((s) => s.timestamps))].sort((a, b) => a - b);
    return ts.length >= 3;
  }, 120000, 500);
  // scheduled 2 s apart, not the job's 15 s (a schedule, not a measured time)
  const gaps = ts.slice(1).map((t, i) => t - ts[i]);
  assert.ok(gaps.some((g) => g < 10000), JSON.stringify(gaps));
});
