// End-to-end tests of operating profd as one operates Prometheus (issue 28):
//  - file_sd watching bounded: a broken SD file with profd's own log in the
//    same folder is logged and counted once, not once per log line; other
//    files of the folder wake nothing; the SD file's own changes still do.
//  - Prometheus 3.x configuration keys: understood or warned about, never
//    refused; kubernetes_sd roles endpointslice and ingress accepted.
//  - /api/v1/targets: droppedTargets with their discoveredLabels, state=,
//    scrapePool=, droppedTargetCounts and keep_dropped_targets, compared with
//    Debian's Prometheus 2.42 on the same config.
//  - events: served after a restart without --config.file.
//  - /metrics of a fresh profd: every documented metric named, zero values
//    where the label values are known.
//  - 2,000 idle kept-alive connections that made a request each: profd's
//    RSS grows < 64 MiB (it keeps 256, closes the longest idle, and while
//    it holds 256 answers with "Connection: close").
//
//   PROFD_BIN=build/profd node --test tests/e2e/operate.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  SRC, Proc, apiData, freePort, http, killAll, profdBin, run, sleep, tempDir, waitFor,
} from './lib.mjs';
import { startPrometheus } from './prom.mjs';

let dir;

before(() => { dir = tempDir('profd-operate-'); });
after(async () => {
  await killAll();
  if (process.env.PD_KEEP_TMP !== '1') fs.rmSync(dir, { recursive: true, force: true });
});

const write = (name, text) => {
  const p = path.join(dir, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, text);
  return p;
};

// One sample value of /metrics (0 when absent).
async function metric(base, name, labels = '') {
  const r = await http(base + '/metrics');
  assert.equal(r.status, 200);
  const line = r.text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}}` : `${name} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

// `profd serve` whose stdout and stderr go to logPath (appended), as a
// service manager would redirect them; waits for /-/ready.
async function startLoggingProfd({ storage, config, logPath, extraArgs = [] }) {
  const port = await freePort();
  const fd = fs.openSync(logPath, 'a');
  const args = ['serve', `--storage.path=${storage}`, `--web.listen-address=127.0.0.1:${port}`,
    ...(config ? [`--config.file=${config}`] : []), ...extraArgs];
  const p = new Proc('profd', profdBin(), args, { stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  p.port = port;
  p.base = `http://127.0.0.1:${port}`;
  await waitFor('profd to answer /-/ready', async () => {
    if (p.exited) throw new Error(`profd exited early\n${fs.readFileSync(logPath, 'utf8').slice(-4000)}`);
    const r = await http(p.base + '/-/ready', { timeoutMs: 2000 }).catch(() => null);
    return r && r.status === 200;
  }, 30000, 150);
  return p;
}

const noProfiles = `    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`;

test('file_sd: a broken file beside profd\'s own log is logged once per change, not in a loop', async () => {
  const sd = path.join(dir, 'sd');
  const logPath = path.join(sd, 'profd.log');
  write('sd/targets.json', '[{"targets": ["127.0.0.1:1"], "labels": {broken');
  const cfg = write('sd.yml', `global:
  scrape_interval: 1h
scrape_configs:
  - job_name: sd
    file_sd_configs:
      - files: ['${sd}/*.json']
${noProfiles}`);
  const profd = await startLoggingProfd({ storage: path.join(dir, 'data-sd'), config: cfg, logPath });
  const fails = () => metric(profd.base, 'profd_sd_refresh_failures_total', 'mechanism="file"');
  const warnings = () => fs.readFileSync(logPath, 'utf8').split('\n')
    .filter((l) => l.includes('level=warn') && l.includes('file_sd')).length;
  await waitFor('the broken file to be counted', async () => (await fails()) >= 1, 20000);
  // The old watcher re-read on every change in the folder: each warning it
  // wrote to profd.log woke it again (tens of thousands a second). Let it run
  // while requests make profd write (more log lines in the folder).
  for (let i = 0; i < 20; i++) {
    await http(profd.base + '/api/v1/targets');
    await http(profd.base + '/no/such/path');
    await sleep(250);
  }
  // Other files of the folder, written many times, wake nothing.
  for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(sd, 'notes.txt'), `note ${i}\n`);
  fs.writeFileSync(path.join(sd, '.targets.json.swp'), 'editor state');
  await sleep(3000);
  // The counter and the log line are two writes: read them when they agree
  // (a re-read under way between the two reads would be counted, not logged yet).
  let w = 0, f = -1;
  await waitFor('the failures counted and logged to agree', async () => {
    f = await fails();
    w = warnings();
    return f === w;
  }, 10000).catch(() => {});
  assert.ok(w >= 1 && w < 10, `${w} file_sd warnings in the log (want 1..9)\n` +
    fs.readFileSync(logPath, 'utf8').slice(-3000));
  assert.ok(f >= 1 && f < 10, `profd_sd_refresh_failures_total{mechanism="file"} = ${f} (want 1..9)`);
  assert.equal(f, w, 'each failure counted is logged once');

  // The SD file's own change is still seen: fixed, its target appears.
  fs.writeFileSync(path.join(sd, 'targets.json'), JSON.stringify([{ targets: ['127.0.0.1:1'], labels: { env: 'fixed' } }]));
  await waitFor('the fixed file\'s target', async () => {
    const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets;
    return ts.some((t) => t.labels.env === 'fixed');
  }, 20000);
  // Broken again, differently: counted again, once (a write may be read twice).
  const before2 = await fails();
  fs.writeFileSync(path.join(sd, 'targets.json'), '{not a list');
  await waitFor('the new breakage to be counted', async () => (await fails()) > before2, 20000);
  await sleep(3000);
  f = await fails();
  assert.ok(f - before2 <= 2, `one broken write counted ${f - before2} times`);
  // the previous targets are kept
  const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  assert.ok(ts.some((t) => t.labels.env === 'fixed'), 'the targets of the last good read stay');
  await profd.stop();
});

// Every key of Prometheus 3.x's config/config.go GlobalConfig and
// ScrapeConfig (up to 3.14), the sections profd has no use for, and the
// kubernetes_sd roles endpointslice and ingress: written here in the shape
// of upstream's documentation/examples/prometheus.yml, prometheus-kubernetes.yml
// and config/testdata/conf.good.yml (not copied).
const PROM3_JOB_IGNORED = ['scrape_protocols', 'fallback_scrape_protocol', 'scrape_native_histograms',
  'always_scrape_classic_histograms', 'convert_classic_histograms_to_nhcb', 'scrape_failure_log_file',
  'enable_compression', 'track_timestamps_staleness', 'sample_limit', 'target_limit', 'label_limit',
  'label_name_length_limit', 'label_value_length_limit', 'native_histogram_bucket_limit',
  'native_histogram_min_bucket_factor', 'metric_name_validation_scheme', 'metric_name_escaping_scheme',
  'extra_scrape_metrics', 'metric_relabel_configs'];
const PROM3_GLOBAL_IGNORED = ['evaluation_interval', 'rule_query_offset', 'query_log_file',
  'scrape_failure_log_file', 'scrape_protocols', 'sample_limit', 'target_limit', 'label_limit',
  'label_name_length_limit', 'label_value_length_limit', 'metric_name_validation_scheme',
  'metric_name_escaping_scheme', 'scrape_native_histograms', 'always_scrape_classic_histograms',
  'convert_classic_histograms_to_nhcb', 'extra_scrape_metrics'];
const PROM3_TOP_IGNORED = ['runtime', 'alerting', 'rule_files', 'storage', 'tracing', 'remote_write',
  'remote_read', 'otlp'];

function prometheus3Config(tokenFile) {
  return `global:
  scrape_interval: 15s
  scrape_timeout: 10s
  evaluation_interval: 30s
  rule_query_offset: 10s
  query_log_file: /tmp/query.log
  scrape_failure_log_file: /tmp/fail.log
  scrape_protocols: [PrometheusProto, OpenMetricsText1.0.0, PrometheusText0.0.4]
  body_size_limit: 15MB
  sample_limit: 1500
  target_limit: 30
  label_limit: 30
  label_name_length_limit: 200
  label_value_length_limit: 200
  metric_name_validation_scheme: utf8
  metric_name_escaping_scheme: allow-utf-8
  scrape_native_histograms: true
  always_scrape_classic_histograms: true
  convert_classic_histograms_to_nhcb: false
  extra_scrape_metrics: true
  external_labels: {monitor: codelab, foo: bar}
runtime:
  gogc: 42
rule_files: [first.rules, my/*.rules]
remote_write:
  - url: http://remote1/push
    name: drop_expensive
    protobuf_message: io.prometheus.write.v2.Request
    write_relabel_configs:
      - source_labels: [__name__]
        regex: expensive.*
        action: drop
    oauth2: {client_id: "123", client_secret: "456", token_url: "http://remote1/auth"}
remote_read:
  - url: http://remote1/read
    read_recent: true
    required_matchers: {job: special}
otlp:
  promote_resource_attributes: [k8s.cluster.name, service.instance.id]
  translation_strategy: NoUTF8EscapingWithSuffixes
  keep_identifying_resource_attributes: true
storage:
  tsdb:
    out_of_order_time_window: 30m
  exemplars:
    max_exemplars: 100000
tracing:
  endpoint: localhost:4317
  client_type: grpc
alerting:
  alertmanagers:
    - scheme: https
      static_configs:
        - targets: [1.2.3.4:9093]
scrape_configs:
  - job_name: prometheus
    honor_labels: true
    honor_timestamps: true
    track_timestamps_staleness: true
    scrape_interval: 15s
    scrape_timeout: 5s
    scrape_protocols: [PrometheusProto, OpenMetricsText1.0.0]
    fallback_scrape_protocol: PrometheusText0.0.4
    scrape_native_histograms: true
    always_scrape_classic_histograms: false
    convert_classic_histograms_to_nhcb: true
    scrape_failure_log_file: fail_prom.log
    enable_compression: false
    body_size_limit: 10MB
    sample_limit: 1000
    target_limit: 35
    label_limit: 35
    label_name_length_limit: 210
    label_value_length_limit: 210
    native_histogram_bucket_limit: 160
    native_histogram_min_bucket_factor: 1.1
    keep_dropped_targets: 10
    metric_name_validation_scheme: legacy
    metric_name_escaping_scheme: underscores
    extra_scrape_metrics: false
    static_configs:
      - targets: ['localhost:9090', 'localhost:9191']
        labels: {my: label, your: label}
    relabel_configs:
      - source_labels: [job, __meta_dns_name]
        regex: (.*)some-[regex]
        target_label: job
        replacement: foo-\${1}
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: expensive_metric.*
        action: drop
    authorization: {credentials_file: ${tokenFile}}
    follow_redirects: true
    enable_http2: true
  - job_name: kubernetes-endpointslices
    kubernetes_sd_configs:
      - role: endpointslice
        api_server: https://localhost:1234
        namespaces: {names: [default]}
        selectors:
          - role: endpointslice
            label: app=web
          - role: pod
            field: spec.nodeName=n1
    tls_config: {insecure_skip_verify: true}
    relabel_configs:
      - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_scrape]
        action: keep
        regex: true
  - job_name: kubernetes-ingresses
    metrics_path: /probe
    params: {module: [http_2xx]}
    kubernetes_sd_configs:
      - role: ingress
        api_server: https://localhost:1234
    relabel_configs:
      - source_labels: [__meta_kubernetes_ingress_scheme, __address__, __meta_kubernetes_ingress_path]
        regex: (.+);(.+);(.+)
        replacement: \${1}://\${2}\${3}
        target_label: __param_target
      - target_label: __address__
        replacement: blackbox-exporter.example.com:9115
  - job_name: service-consul
    consul_sd_configs:
      - server: localhost:1234
        services: [nginx]
`;
}

test('Prometheus 3.x configuration: every key understood or warned about, roles endpointslice and ingress', async () => {
  const token = write('token', 'secret\n');
  const cfg = write('prom3.yml', prometheus3Config(token));
  const r = await run(profdBin(), ['check', 'config', cfg]);
  assert.equal(r.code, 0, `profd check config refused a Prometheus 3 file\n${r.stdout}${r.stderr}`);
  const out = r.stdout + r.stderr;
  assert.match(out, /dialect prometheus/);
  const warned = (where, key) => new RegExp(`${where}: "${key}" ignored`).test(out);
  for (const k of PROM3_JOB_IGNORED) assert.ok(warned('scrape_configs entry', k), `job key ${k} not warned about\n${out}`);
  for (const k of PROM3_GLOBAL_IGNORED) assert.ok(warned('global', k), `global key ${k} not warned about\n${out}`);
  for (const k of PROM3_TOP_IGNORED) assert.ok(warned('the top level', k), `section ${k} not warned about\n${out}`);
  assert.ok(warned('scrape_configs entry', 'consul_sd_configs'));
  assert.doesNotMatch(out, /"keep_dropped_targets" ignored/, 'keep_dropped_targets is honoured');
  // serve loads it too (a reload path would refuse what check refuses)
  const profd = await startLoggingProfd({ storage: path.join(dir, 'data-prom3'), config: cfg, logPath: path.join(dir, 'prom3.log') });
  await profd.stop();

  // Debian's prometheus package ships its example configuration: it loads too
  for (const f of ['/usr/share/doc/prometheus/examples/prometheus.yml', '/etc/prometheus/prometheus.yml']) {
    if (!fs.existsSync(f)) continue;
    const d = await run(profdBin(), ['check', 'config', f]);
    assert.equal(d.code, 0, `${f}\n${d.stdout}${d.stderr}`);
  }
});

// A Prometheus 2.42 config (no keep_dropped_targets, no profiling_config:
// 2.42 refuses both) whose relabel rules drop some static and file_sd targets.
function droppingConfig(sdFile) {
  return `global:
  scrape_interval: 1h
scrape_configs:
  - job_name: keepers
    static_configs:
      - targets: ['127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3']
        labels: {env: prod}
      - targets: ['127.0.0.1:4']
        labels: {env: dev}
    relabel_configs:
      - source_labels: [env]
        regex: dev
        action: drop
      - source_labels: [__address__]
        regex: '.*:3'
        action: drop
  - job_name: filed
    file_sd_configs:
      - files: ['${sdFile}']
    relabel_configs:
      - source_labels: [__meta_filepath, team]
        regex: '.*;(web|db)'
        action: keep
`;
}

test('/api/v1/targets: droppedTargets and their discoveredLabels as Debian\'s Prometheus 2.42 lists them; state; keep_dropped_targets', async () => {
  const sdFile = write('drop-sd/t.json', JSON.stringify([
    { targets: ['127.0.0.1:10', '127.0.0.1:11'], labels: { team: 'web' } },
    { targets: ['127.0.0.1:12'], labels: { team: 'batch', 'x_y': 'z' } },
  ]));
  const cfg = write('drop.yml', droppingConfig(sdFile));
  const prom = await startPrometheus(dir, { config: cfg });
  const promPort = prom.port;
  const profd = await startLoggingProfd({ storage: path.join(dir, 'data-drop'), config: cfg, logPath: path.join(dir, 'drop.log') });
  // profd's own per-profile-type labels (__name__, __profile_path__) aside
  const key = (ls) => JSON.stringify(Object.entries(ls).filter(([k]) => k !== '__name__' && k !== '__profile_path__').sort());
  const promData = await waitFor('Prometheus to list its dropped targets', async () => {
    if (prom.exited) throw new Error(`prometheus exited\n${prom.tail()}`);
    const r = await http(`http://127.0.0.1:${promPort}/api/v1/targets`, { timeoutMs: 3000 }).catch(() => null);
    const d = r && r.json && r.json.data;
    return d && d.droppedTargets && d.droppedTargets.length === 3 && d.activeTargets.length === 4 ? d : null;
  }, 60000, 500);
  const want = [...new Set(promData.droppedTargets.map((t) => key(t.discoveredLabels)))].sort();
  const ours = await waitFor('profd to list its dropped targets', async () => {
    const d = await apiData(profd.base, '/api/v1/targets');
    return d.droppedTargets.length ? d : null;
  }, 20000);
  const got = [...new Set(ours.droppedTargets.map((t) => key(t.discoveredLabels)))].sort();
  assert.deepEqual(got, want, 'the same dropped targets with the same discovered labels');
  // a target per profile type (7 defaults): each dropped pair listed and counted
  assert.equal(ours.droppedTargets.length, 3 * 7);
  assert.deepEqual(ours.droppedTargetCounts, { keepers: 2 * 7, filed: 1 * 7 });
  for (const t of ours.droppedTargets) {
    assert.ok(['keepers', 'filed'].includes(t.scrapePool));
    assert.equal(t.discoveredLabels.job, t.scrapePool);
  }
  // active targets: the same label sets too
  const wantActive = [...new Set(promData.activeTargets.map((t) => key(t.discoveredLabels)))].sort();
  const gotActive = [...new Set(ours.activeTargets.map((t) => key(t.discoveredLabels)))].sort();
  assert.deepEqual(gotActive, wantActive);
  // state= and scrapePool= as Prometheus answers them
  for (const q of ['state=active', 'state=dropped', 'state=any', 'scrapePool=filed', 'state=dropped&scrapePool=keepers']) {
    const p = (await http(`http://127.0.0.1:${promPort}/api/v1/targets?${q}`)).json.data;
    const o = await apiData(profd.base, `/api/v1/targets?${q}`);
    assert.deepEqual([...new Set(o.droppedTargets.map((t) => key(t.discoveredLabels)))].sort(),
      [...new Set(p.droppedTargets.map((t) => key(t.discoveredLabels)))].sort(), q);
    assert.deepEqual([...new Set(o.activeTargets.map((t) => key(t.discoveredLabels)))].sort(),
      [...new Set(p.activeTargets.map((t) => key(t.discoveredLabels)))].sort(), q);
  }
  await prom.stop();
  await profd.stop();

  // keep_dropped_targets (Prometheus 2.47+): listed up to the limit, all counted
  const cfg2 = write('drop2.yml', droppingConfig(sdFile).replace('  - job_name: keepers\n', '  - job_name: keepers\n    keep_dropped_targets: 3\n'));
  const p2 = await startLoggingProfd({ storage: path.join(dir, 'data-drop2'), config: cfg2, logPath: path.join(dir, 'drop2.log') });
  const d2 = await apiData(p2.base, '/api/v1/targets?state=dropped');
  assert.equal(d2.droppedTargets.filter((t) => t.scrapePool === 'keepers').length, 3);
  assert.equal(d2.droppedTargetCounts.keepers, 2 * 7);
  assert.equal(d2.activeTargets.length, 0);
  await p2.stop();
});

test('events: a burst and a target_down logged with a configuration are served after a restart without --config.file', async () => {
  const dead = await freePort(); // nobody listens: each burst scrape is refused
  const cfg = write('events.yml', `scrape_configs:
  - job_name: app
    scrape_interval: 1h
    static_configs: [{targets: ['127.0.0.1:${dead}']}]
    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
    adaptive_capture:
      scrape_interval: 1s
      max_duration: 10m
`);
  const storage = path.join(dir, 'data-events');
  const p1 = await startLoggingProfd({ storage, config: cfg, logPath: path.join(dir, 'events1.log') });
  const r = await http(p1.base + '/api/v1/alerts', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ version: '4', alerts: [{ status: 'firing', labels: { alertname: 'HeapHigh', job: 'app' } }] }),
  });
  assert.equal(r.status, 200, r.text);
  const evs = await waitFor('burst_started and target_down', async () => {
    const e = await apiData(p1.base, '/api/v1/events?start=0');
    return e.some((x) => x.kind === 'target_down') ? e : null;
  }, 30000);
  const down = evs.find((x) => x.kind === 'target_down');
  assert.equal(down.reason, 'connection refused');
  assert.ok(evs.some((x) => x.kind === 'burst_started'));
  await p1.stop();

  // the same storage, no configuration: the events are still listed
  const p2 = await startLoggingProfd({ storage, logPath: path.join(dir, 'events2.log') });
  const again = await apiData(p2.base, '/api/v1/events?start=0');
  assert.deepEqual(again.map((e) => `${e.id} ${e.kind} ${e.time}`), evs.map((e) => `${e.id} ${e.kind} ${e.time}`));
  // and the targets list is Prometheus' empty one
  const t = await apiData(p2.base, '/api/v1/targets');
  assert.deepEqual(t, { activeTargets: [], droppedTargets: [], droppedTargetCounts: {} });
  await p2.stop();
});

// Metric names the documentation mentions: docs/operations.md (where the
// docs move the metrics list), else README.md; names followed by "(" (C
// functions) and the non-metric profd_* words are left out.
const NOT_METRICS = new Set(['profd_access_control']);
// (process_* names are left out too: "process_cpu" is also a profile type.)
function documentedMetrics() {
  const ops = path.join(SRC, 'docs', 'operations.md');
  const file = fs.existsSync(ops) ? ops : path.join(SRC, 'README.md');
  const text = fs.readFileSync(file, 'utf8');
  const names = new Set();
  for (const m of text.matchAll(/\b(profd_[a-z0-9_]*[a-z0-9])\b(\()?/g)) {
    if (m[2] || NOT_METRICS.has(m[1]) || m[1].startsWith('profd_agent')) continue;
    names.add(m[1]);
  }
  return { file, names, complete: file === ops };
}

test('/metrics of a fresh profd names every documented metric (zero values where the labels are known)', async () => {
  const p = await startLoggingProfd({ storage: path.join(dir, 'data-fresh'), logPath: path.join(dir, 'fresh.log') });
  const text = (await http(p.base + '/metrics')).text;
  await p.stop();
  const typed = new Set([...text.matchAll(/^# TYPE (\S+) (counter|gauge)$/gm)].map((m) => m[1]));
  const { file, names, complete } = documentedMetrics();
  assert.ok(names.size > 20, `only ${names.size} metric names found in ${file}`);
  const missing = [...names].filter((n) => !typed.has(n)).sort();
  assert.deepEqual(missing, [], `documented in ${path.basename(file)} but not in /metrics of a fresh profd`);
  // no family without HELP and TYPE (every family is in the catalog)
  assert.doesNotMatch(text, /^# TYPE \S+ untyped$/m);
  if (complete) { // the operations page lists every metric profd exposes
    const undocumented = [...typed].filter((n) => n.startsWith('profd_') && !names.has(n)).sort();
    assert.deepEqual(undocumented, [], `in /metrics but not in ${path.basename(file)}`);
  }
  // zero values where the label values are known from the start
  for (const line of ['profd_storage_merges_waiting 0', 'profd_storage_merge_wait_seconds_total 0',
    'profd_scrape_targets 0', 'profd_sd_refresh_failures_total{mechanism="file"} 0',
    'profd_adaptive_events_total{kind="target_down"} 0', 'profd_alerts_received_total{status="firing",matched="true"} 0']) {
    assert.ok(text.split('\n').includes(line), `no "${line}" in /metrics of a fresh profd`);
  }
});

function rssBytes(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return Number(m[1]) * 1024;
}

// One kept-alive connection that made one request: resolves {sock, status}.
// from: the local address (every 127/8 address is the loopback's), so many
// clients can be told apart by profd's per-address cap.
function oneRequest(port, from = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ port, host: '127.0.0.1', localAddress: from });
    let buf = '';
    sock.setEncoding('latin1');
    sock.on('error', reject);
    sock.on('connect', () => sock.write('GET /api/v1/status/buildinfo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
    const onData = (d) => {
      buf += d;
      const h = buf.indexOf('\r\n\r\n');
      if (h < 0) return;
      const len = Number((buf.slice(0, h).match(/content-length: *(\d+)/i) || [0, 0])[1]);
      if (buf.length < h + 4 + len) return;
      sock.off('data', onData);
      sock.off('error', reject);
      sock.on('error', () => {}); // closed by profd later: expected
      resolve({ sock, status: Number(buf.split(' ')[1]), close: /\r\nconnection: *close\r\n/i.test(buf.slice(0, h + 2)) });
    };
    sock.on('data', onData);
  });
}

test('2,000 idle kept-alive connections after one request each: RSS growth < 64 MiB, the longest idle closed', { timeout: 240000 }, async () => {
  const KEEP = 256; // PD_HTTP_IDLE_KEEP (src/http/server.c; docs/operations.md)
  const p = await startLoggingProfd({ storage: path.join(dir, 'data-idle'), logPath: path.join(dir, 'idle.log') });
  const cut = () => metric(p.base, 'profd_http_cut_off_total', 'reason="idle_budget"');
  const declined = () => metric(p.base, 'profd_http_keepalive_declined_total');
  for (let i = 0; i < 20; i++) await oneRequest(p.port).then(({ sock }) => sock.destroy()); // warm up
  const rss0 = rssBytes(p.pid);
  const socks = [];
  for (let b = 0; b < 20; b++) { // 20 x 100 at once, from 8 client addresses (250 each:
    // under the default --web.max-connections-per-ip=512)
    const got = await Promise.all(Array.from({ length: 100 }, (_, i) => oneRequest(p.port, `127.0.0.${2 + (b * 100 + i) % 8}`)));
    for (const g of got) { assert.equal(g.status, 200); socks.push(g.sock); }
  }
  // profd keeps at most KEEP of them: the others are closed — the longest
  // idle first, or, once it holds KEEP, by a "Connection: close" on their response
  await waitFor('the idle budget to close the excess', async () => (await cut()) + (await declined()) >= 2000 - KEEP, 60000, 250);
  const closed = await waitFor('the clients to see the closes', async () => {
    const n = socks.filter((s) => s.destroyed || s.readyState !== 'open').length;
    return n >= 2000 - KEEP ? n : null;
  }, 30000, 250);
  const rss1 = rssBytes(p.pid);
  console.log(`2,000 idle kept-alive connections: RSS ${(rss0 / 1048576).toFixed(1)} -> ${(rss1 / 1048576).toFixed(1)} MiB, ${closed} closed by profd`);
  assert.ok(rss1 - rss0 < 64 * 1048576, `RSS grew ${((rss1 - rss0) / 1048576).toFixed(1)} MiB`);
  // the connections kept still serve
  const kept = socks.filter((s) => !s.destroyed && s.readyState === 'open');
  assert.ok(kept.length > 0 && kept.length <= KEEP, `${kept.length} kept`);
  // holding KEEP, a new connection's response says it will not be kept
  // (the client knows before it could reuse it), and profd closes it
  const d0 = await declined();
  const extra = [];
  const told = await waitFor('a response with Connection: close', async () => {
    const r = await oneRequest(p.port);
    if (r.close) return r;
    // kept open: profd holds fewer than KEEP when a burst's scans declined
    // more than the excess (load); each kept one counts until it holds KEEP
    extra.push(r.sock);
    return null;
  }, 30000, 20);
  assert.equal(told.status, 200);
  await waitFor('profd to close it', async () => told.sock.destroyed || told.sock.readyState !== 'open', 30000, 50);
  assert.ok((await declined()) > d0);
  const again = await new Promise((resolve) => {
    kept[0].once('data', (d) => resolve(String(d).split(' ')[1]));
    kept[0].write('GET /-/healthy HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
  assert.equal(again, '200');
  for (const s of [...socks, ...extra]) s.destroy();
  await p.stop();
});

// Issue 28 item 1: the default per-address cap. 600 connections from one
// address that send nothing: 512 are kept, the rest closed at accept and
// counted (per_ip_limit); another address is still served, and so is the
// first once its connections are gone.
test('default --web.max-connections-per-ip=512: one address cannot take every connection', { timeout: 240000 }, async () => {
  // a long read timeout: the silent connections are closed by the cap only
  const p = await startLoggingProfd({ storage: path.join(dir, 'data-perip'), logPath: path.join(dir, 'perip.log'),
    extraArgs: ['--web.read-timeout=10m'] });
  const refused = () => metric(p.base, 'profd_http_rejected_total', 'reason="per_ip_limit"');
  const r0 = await refused();
  const socks = [];
  for (let i = 0; i < 600; i++) {
    const s = net.connect({ port: p.port, host: '127.0.0.1', localAddress: '127.0.0.20' });
    s.on('error', () => {});
    socks.push(s);
  }
  await waitFor('profd to refuse the connections past 512', async () => (await refused()) - r0 >= 600 - 512, 120000, 250);
  const closed = await waitFor('the clients to see the closes', async () => {
    const n = socks.filter((s) => s.destroyed || s.readyState !== 'open').length;
    return n >= 600 - 512 ? n : null;
  }, 60000, 250);
  assert.ok(closed <= 600 - 512 + 5, `${closed} of 600 closed: the cap is 512`);
  const other = await oneRequest(p.port, '127.0.0.21');
  assert.equal(other.status, 200);
  other.sock.destroy();
  for (const s of socks) s.destroy();
  const again = await waitFor('the address to be served again', async () => {
    const r = await oneRequest(p.port, '127.0.0.20').catch(() => null);
    if (r) r.sock.destroy();
    return r && r.status === 200 ? r : null;
  }, 60000, 250);
  assert.equal(again.status, 200);
  await p.stop();
});
