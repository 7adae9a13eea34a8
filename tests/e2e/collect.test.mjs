// End-to-end tests of collection as Prometheus does it (issue 14), all on
// loopback with real programs:
//  - relabeling: one config file using every relabel action (hashmod
//    included) run through Debian's Prometheus 2.42 (scraping the Go
//    targets' /metrics) and through profd (scraping their /debug/pprof);
//    both /api/v1/targets must give the same target label sets;
//  - scrape auth and TLS: Go targets (tests/e2e/collect/target) behind TLS
//    with certificates made by openssl here, basic auth (password_file) and
//    a bearer token (bearer_token_file); wrong credentials show HTTP 401 in
//    /api/v1/targets;
//  - delta: true asks ?seconds=<interval> (Parca) and stores the profile;
//  - service discovery: file_sd (files rewritten while running), http_sd (a
//    local HTTP server), dns_sd (Debian's dnsmasq serving SRV and A records
//    on loopback); targets and their /metrics series come and go;
//  - `profd check config` on Debian's /etc/prometheus/prometheus.yml and on
//    a Parca-style file, and exit 2 naming the line on a bad one.
//
//   PROFD_BIN=build/profd node --test tests/e2e/collect.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import nodeHttp from 'node:http';
import path from 'node:path';
import {
  SRC, Proc, apiData, freePort, goEnv, http, killAll, profdBin, run, startProfd, tempDir, waitFor,
} from './lib.mjs';
import { startPrometheus } from './prom.mjs';

let dir, targetBin;

before(async () => {
  dir = tempDir('profd-collect-');
  targetBin = path.join(dir, 'target');
  const r = await run('go', ['build', '-o', targetBin, '.'],
    { cwd: path.join(SRC, 'tests', 'e2e', 'collect', 'target'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of the test target failed\n${r.stdout}${r.stderr}`);
});

after(async () => {
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// Starts the Go target with extra flags; waits until it listens.
async function startTarget(name, flags = [], scheme = 'http', curlArgs = []) {
  const port = await freePort();
  const p = new Proc(name, targetBin, [`-listen=127.0.0.1:${port}`, ...flags]);
  p.port = port;
  p.addr = `127.0.0.1:${port}`;
  await waitFor(`${name} to listen`, async () => {
    if (p.exited) throw new Error(`${name} exited\n${p.tail()}`);
    const r = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-k', ...curlArgs,
      `${scheme}://${p.addr}/metrics`], {}, 5000);
    return r.stdout !== '000' && r.stdout !== '';
  }, 30000, 200);
  return p;
}

function write(name, text) {
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

// "a=1,b=2" sorted text of a label object, without the names in skip.
function labelKey(labels, skip = []) {
  return Object.keys(labels).filter((k) => !skip.includes(k)).sort()
    .map((k) => `${k}=${labels[k]}`).join(',');
}

test('relabeling gives the same target labels as Prometheus 2.42', async () => {
  const ts = [];
  for (let i = 0; i < 4; i++) ts.push(await startTarget(`target${i}`));
  const [a, b, c, d] = ts.map((t) => t.addr);
  // Every action: replace, keep, drop, keepequal, dropequal, hashmod,
  // labelmap, labeldrop, labelkeep, lowercase, uppercase.
  const cfg = write('relabel.yml', `global:
  scrape_interval: 15s
  evaluation_interval: 15s
scrape_configs:
  - job_name: cmp
    scrape_interval: 5s
    params:
      debug: ['0']
    static_configs:
      - targets: ['${a}', '${b}', '${c}']
        labels: {env: Prod, team: Core, __meta_custom_zone: eu-1, k1: x, k2: x, d1: p, d2: q}
      - targets: ['${d}']
        labels: {env: Dev, team: Edge, __meta_custom_zone: us-2, k1: x, k2: x, d1: same, d2: same}
      - targets: ['${d}']
        labels: {env: Test, team: Edge, k1: x, k2: y, d1: p, d2: q}
    relabel_configs:
      - source_labels: [__address__]
        regex: '127\\.0\\.0\\.1:(\\d+)'
        target_label: port
        replacement: 'p$1'
      - source_labels: [__address__]
        target_label: shard
        modulus: 1000
        action: hashmod
      - source_labels: [__address__, env]
        separator: '@'
        target_label: host_env
      - source_labels: [env]
        regex: 'Prod|Dev|Test'
        action: keep
      - source_labels: [__address__]
        regex: '.*:${c.split(':')[1]}'
        action: drop
      - source_labels: [k1]
        target_label: k2
        action: keepequal
      - source_labels: [d1]
        target_label: d2
        action: dropequal
      - regex: '__meta_custom_(.+)'
        replacement: 'zone_$1'
        action: labelmap
      - source_labels: [env]
        target_label: env_lower
        action: lowercase
      - source_labels: [team]
        target_label: team_upper
        action: uppercase
      - source_labels: [__param_debug]
        target_label: debug
      - regex: 'k[12]|d[12]'
        action: labeldrop
      - regex: '__.*|job|instance|env.*|team.*|zone_.*|port|shard|host_env|debug'
        action: labelkeep
`);
  // profd reads it unchanged
  const chk = await run(profdBin(), ['check', 'config', cfg]);
  assert.equal(chk.code, 0, chk.stderr + chk.stdout);
  assert.match(chk.stdout, /dialect prometheus/);
  assert.match(chk.stdout, /evaluation_interval" ignored/);

  const prom = await startPrometheus(dir, { config: cfg });
  const promPort = prom.port;
  const profd = await startProfd({ storage: path.join(dir, 'data-relabel'), config: cfg });
  const promTargets = await waitFor('Prometheus to list its targets', async () => {
    if (prom.exited) throw new Error(`prometheus exited\n${prom.tail()}`);
    const r = await http(`http://127.0.0.1:${promPort}/api/v1/targets`, { timeoutMs: 30000 }).catch(() => null);
    const list = r && r.json && r.json.data && r.json.data.activeTargets;
    return list && list.length ? list : null;
  }, 60000, 500);
  const ours = await apiData(profd.base, '/api/v1/targets');
  const want = [...new Set(promTargets.map((t) => labelKey(t.labels)))].sort();
  const got = [...new Set(ours.activeTargets.map((t) => labelKey(t.labels, ['__name__'])))].sort();
  // a and b survive (c dropped by drop, d/Dev by dropequal, d/Test by keepequal)
  assert.equal(want.length, 2, `Prometheus kept ${want.length} targets:\n${want.join('\n')}`);
  assert.deepEqual(got, want);
  // each kept target once per profile type (7 defaults)
  assert.equal(ours.activeTargets.length, 2 * 7);
  for (const t of ours.activeTargets) {
    assert.match(t.scrapeUrl, /[?&]debug=0(&|$)/);
    assert.equal(t.discoveredLabels.__name__, t.labels.__name__);
  }
  await prom.stop();
  await profd.stop();
  for (const t of ts) await t.stop();
});

test('scrapes through TLS, basic auth and a bearer token; wrong credentials show 401', async () => {
  // a CA and a server certificate for 127.0.0.1, made here
  const ca = path.join(dir, 'ca'), srv = path.join(dir, 'srv');
  const ssl = async (args) => {
    const r = await run('openssl', args, { cwd: dir });
    assert.equal(r.code, 0, `openssl ${args.join(' ')}\n${r.stderr}`);
  };
  await ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=profd test CA',
    '-keyout', `${ca}.key`, '-out', `${ca}.pem`]);
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', `${srv}.key`,
    '-out', `${srv}.csr`]);
  write('san.ext', 'subjectAltName=IP:127.0.0.1\n');
  await ssl(['x509', '-req', '-in', `${srv}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
    '-CAcreateserial', '-days', '2', '-extfile', path.join(dir, 'san.ext'), '-out', `${srv}.pem`]);

  // a second server certificate naming only DNS:target.profd.test: reached with server_name
  const srv2 = path.join(dir, 'srv2');
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=target.profd.test', '-keyout', `${srv2}.key`,
    '-out', `${srv2}.csr`]);
  write('san2.ext', 'subjectAltName=DNS:target.profd.test\n');
  await ssl(['x509', '-req', '-in', `${srv2}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
    '-CAcreateserial', '-days', '2', '-extfile', path.join(dir, 'san2.ext'), '-out', `${srv2}.pem`]);

  const tls = await startTarget('tls', [`-tls.cert=${srv}.pem`, `-tls.key=${srv}.key`], 'https');
  const tls2 = await startTarget('tls2', [`-tls.cert=${srv2}.pem`, `-tls.key=${srv2}.key`], 'https');
  const basic = await startTarget('basic', ['-basic=alice:wonder land']);
  const bearer = await startTarget('bearer', ['-bearer=t0ken']);
  write('pw', 'wonder land\n');
  write('token', 't0ken\n');
  const pprof = `    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`;
  const cfg = write('auth.yml', `global:
  scrape_interval: 2s
scrape_configs:
  - job_name: tls
    scheme: https
    tls_config: {ca_file: ca.pem, min_version: TLS12}
    static_configs: [{targets: ['${tls.addr}']}]
${pprof}  - job_name: tls_server_name
    scheme: https
    tls_config: {ca_file: ca.pem, server_name: target.profd.test}
    static_configs: [{targets: ['${tls2.addr}']}]
${pprof}  - job_name: tls_wrong_name
    scheme: https
    tls_config: {ca_file: ca.pem}
    static_configs: [{targets: ['${tls2.addr}']}]
${pprof}  - job_name: tls_unverified
    scheme: https
    static_configs: [{targets: ['${tls.addr}']}]
${pprof}  - job_name: basic
    basic_auth: {username: alice, password_file: pw}
    static_configs: [{targets: ['${basic.addr}']}]
${pprof}  - job_name: basic_wrong
    basic_auth: {username: alice, password: nope}
    static_configs: [{targets: ['${basic.addr}']}]
${pprof}  - job_name: bearer
    bearer_token_file: token
    static_configs: [{targets: ['${bearer.addr}']}]
${pprof}  - job_name: bearer_wrong
    authorization: {credentials: wrong}
    static_configs: [{targets: ['${bearer.addr}']}]
${pprof}`);
  const profd = await startProfd({ storage: path.join(dir, 'data-auth'), config: cfg });
  const health = await waitFor('every target scraped', async () => {
    const d = await apiData(profd.base, '/api/v1/targets');
    const by = Object.fromEntries(d.activeTargets.map((t) => [t.scrapePool, t]));
    return Object.keys(by).length === 8 && Object.values(by).every((t) => t.health !== 'unknown') ? by : null;
  }, 60000, 500);
  for (const job of ['tls', 'tls_server_name', 'basic', 'bearer']) {
    assert.equal(health[job].health, 'up', `${job}: ${health[job].lastError}`);
  }
  assert.equal(health.tls_wrong_name.health, 'down');
  assert.match(health.tls_wrong_name.lastError, /certificate|SSL|name/i);
  // the series keep the real address
  assert.equal(health.tls_server_name.labels.instance, tls2.addr);
  assert.equal(health.basic_wrong.health, 'down');
  assert.equal(health.basic_wrong.lastError, 'HTTP 401');
  assert.equal(health.bearer_wrong.lastError, 'HTTP 401');
  assert.equal(health.tls_unverified.health, 'down');
  assert.match(health.tls_unverified.lastError, /certificate/i);
  // the profiles are stored
  for (const job of ['tls', 'basic', 'bearer']) {
    const s = await apiData(profd.base, `/api/v1/series?match[]=${encodeURIComponent(`heap{job="${job}"}`)}`);
    assert.equal(s.length, 1, `${job}: ${JSON.stringify(s)}`);
  }
  await profd.stop();
  for (const t of [tls, tls2, basic, bearer]) await t.stop();
});

test('delta: true asks ?seconds=<interval> as Parca and stores the profile', async () => {
  const t = await startTarget('delta');
  // Parca's structure: object_storage, memory/process_cpu names, timeout > interval
  const cfg = write('parca.yml', `object_storage:
  bucket:
    type: "FILESYSTEM"
    config:
      directory: "./data"
scrape_configs:
  - job_name: "default"
    scrape_interval: "2s"
    static_configs:
      - targets: [ '${t.addr}' ]
    profiling_config:
      pprof_config:
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
`);
  const chk = await run(profdBin(), ['check', 'config', cfg]);
  assert.equal(chk.code, 0, chk.stderr);
  assert.match(chk.stdout, /dialect parca/);
  assert.match(chk.stdout, /profile process_cpu: \/debug\/pprof\/profile\?seconds=2, timeout 5s, delta/);
  assert.match(chk.stdout, /WARNING: .*"object_storage" ignored/);
  const profd = await startProfd({ storage: path.join(dir, 'data-delta'), config: cfg });
  const cpu = await waitFor('two process_cpu profiles', async () => {
    const d = await apiData(profd.base, '/api/v1/targets');
    const c = d.activeTargets.find((x) => x.profileType === 'process_cpu');
    if (!c || c.health !== 'up') return null;
    const now = Date.now() / 1000;
    const r = await apiData(profd.base, `/api/v1/query_range?query=process_cpu&from=${now - 600}&to=${now + 60}`);
    return r.length && r[0].timestamps && r[0].timestamps.length >= 2 ? c : null;
  }, 60000, 500);
  assert.match(cpu.scrapeUrl, /\/debug\/pprof\/profile\?seconds=2$/);
  assert.equal(cpu.labels.__name__, 'process_cpu');
  await profd.stop();
  await t.stop();
});

test('file_sd and http_sd: targets appear and go without a reload, with their /metrics series', async () => {
  const t1 = await startTarget('sd1');
  const t2 = await startTarget('sd2');
  const t3 = await startTarget('sd3');
  const sdDir = path.join(dir, 'sd');
  fs.mkdirSync(sdDir);
  // written as a temp file then renamed, as tools that manage these files do
  const writeSd = (name, text) => {
    fs.writeFileSync(path.join(sdDir, `.${name}.tmp`), text);
    fs.renameSync(path.join(sdDir, `.${name}.tmp`), path.join(sdDir, name));
  };
  writeSd('a.json', JSON.stringify([{ targets: [t1.addr], labels: { env: 'json' } }]));
  // a local HTTP SD server whose answer the test changes
  let httpGroups = [{ targets: [t3.addr], labels: { env: 'http' } }];
  let httpStatus = 200;
  const srv = nodeHttp.createServer((req, res) => {
    res.writeHead(httpStatus, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(httpGroups));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const sdUrl = `http://127.0.0.1:${srv.address().port}/targets`;
  const cfg = write('sd.yml', `global:
  scrape_interval: 2s
scrape_configs:
  - job_name: sd
    file_sd_configs:
      - files: ['sd/*.json', 'sd/*.yml']
        refresh_interval: 1h
    http_sd_configs:
      - url: ${sdUrl}
        refresh_interval: 1s
    relabel_configs:
      - source_labels: [__meta_filepath]
        regex: '.*/([^/]+)'
        target_label: sd_file
      - source_labels: [__meta_url]
        regex: '.+'
        target_label: sd_http
        replacement: 'yes'
    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`);
  const profd = await startProfd({ storage: path.join(dir, 'data-sd'), config: cfg });
  const targets = async () => (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  const instances = async () => (await targets()).map((t) => t.labels.instance).sort();
  const upSeries = async () => {
    const r = await http(profd.base + '/metrics');
    return r.text.split('\n').filter((l) => l.startsWith('profd_target_up{'));
  };
  const want = (...ts) => ts.map((t) => t.addr).sort();
  await waitFor('the file and HTTP targets', async () =>
    JSON.stringify(await instances()) === JSON.stringify(want(t1, t3)), 30000, 250);
  let ts = await targets();
  const byInst = Object.fromEntries(ts.map((t) => [t.labels.instance, t]));
  assert.equal(byInst[t1.addr].labels.env, 'json');
  assert.equal(byInst[t1.addr].labels.sd_file, 'a.json');
  assert.equal(byInst[t1.addr].discoveredLabels.__meta_filepath, path.join(sdDir, 'a.json'));
  assert.equal(byInst[t3.addr].labels.sd_http, 'yes');
  assert.equal(byInst[t3.addr].discoveredLabels.__meta_url, sdUrl);
  await waitFor('both scraped and up in /metrics', async () => {
    const s = await upSeries();
    return s.filter((l) => l.endsWith(' 1')).length === 2;
  }, 30000, 250);

  // the file is rewritten (inotify; refresh_interval is 1h): t1 goes, t2 comes, in YAML too
  writeSd('a.json', JSON.stringify([{ targets: [t2.addr], labels: { env: 'json2' } }]));
  writeSd('b.yml', `- targets: ['${t1.addr}']\n  labels: {env: yaml}\n`);
  await waitFor('the rewritten file\'s targets', async () =>
    JSON.stringify(await instances()) === JSON.stringify(want(t1, t2, t3)), 30000, 250);
  ts = await targets();
  assert.equal(ts.find((t) => t.labels.instance === t1.addr).labels.env, 'yaml');
  assert.equal(ts.find((t) => t.labels.instance === t2.addr).labels.env, 'json2');

  // a malformed file keeps its previous targets and is counted
  writeSd('b.yml', '- targets: [unclosed\n');
  await waitFor('the failure counted', async () => {
    const r = await http(profd.base + '/metrics');
    return /profd_sd_refresh_failures_total\{mechanism="file"\} [1-9]/.test(r.text);
  }, 30000, 250);
  assert.deepEqual(await instances(), want(t1, t2, t3));

  // the HTTP SD answers an error (targets kept), then an empty list (its target goes)
  httpStatus = 500;
  await waitFor('the HTTP failure counted', async () => {
    const r = await http(profd.base + '/metrics');
    return /profd_sd_refresh_failures_total\{mechanism="http"\} [1-9]/.test(r.text);
  }, 30000, 250);
  assert.deepEqual(await instances(), want(t1, t2, t3));
  httpStatus = 200;
  httpGroups = [];
  fs.unlinkSync(path.join(sdDir, 'b.yml'));
  await waitFor('t1 and t3 gone', async () =>
    JSON.stringify(await instances()) === JSON.stringify(want(t2)), 30000, 250);
  // their series left /metrics
  await waitFor('only t2 in profd_target_up', async () => {
    const s = await upSeries();
    return s.length === 1 && s[0].includes(`instance="${t2.addr}"`) ? true : null;
  }, 30000, 250);
  await profd.stop();
  srv.close();
  for (const t of [t1, t2, t3]) await t.stop();
});

test('dns_sd: SRV records served by dnsmasq on loopback; a record removed takes its target away', async () => {
  const t1 = await startTarget('dns1');
  const t2 = await startTarget('dns2');
  const dnsPort = await freePort();
  const dnsmasq = (records) => new Proc('dnsmasq', 'dnsmasq', ['--no-daemon', '--conf-file=/dev/null',
    `--port=${dnsPort}`, '--listen-address=127.0.0.1', '--bind-interfaces', '--no-resolv', '--no-hosts',
    '--local=/profd.test/', // answers NXDOMAIN for names it has no record of
    `--pid-file=${path.join(dir, 'dnsmasq.pid')}`,
    ...records.map((t) => `--srv-host=_pprof._tcp.profd.test,localhost,${t.port}`),
    '--host-record=app.profd.test,127.0.0.1']);
  let dns = dnsmasq([t1, t2]);
  const cfg = write('dns.yml', `global:
  scrape_interval: 2s
scrape_configs:
  - job_name: dns
    dns_sd_configs:
      - names: ['_pprof._tcp.profd.test']
        refresh_interval: 1s
      - names: ['app.profd.test', 'missing.profd.test']
        type: A
        port: ${t2.port}
        refresh_interval: 1s
    relabel_configs:
      - source_labels: [__meta_dns_srv_record_port]
        target_label: srv_port
      - source_labels: [__meta_dns_name]
        target_label: dns_name
    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`);
  process.env.PROFD_DNS_SERVER = `127.0.0.1:${dnsPort}`; // inherited by the spawned profd
  const profd = await startProfd({ storage: path.join(dir, 'data-dns'), config: cfg });
  delete process.env.PROFD_DNS_SERVER;
  const targets = async () => (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  const key = (ts) => ts.map((t) => `${t.labels.instance} ${t.labels.dns_name} ${t.labels.srv_port || ''}`).sort();
  const want = [`127.0.0.1:${t2.port} app.profd.test `,
    `localhost:${t1.port} _pprof._tcp.profd.test ${t1.port}`,
    `localhost:${t2.port} _pprof._tcp.profd.test ${t2.port}`].sort();
  await waitFor('the SRV and A targets', async () =>
    JSON.stringify(key(await targets())) === JSON.stringify(want), 30000, 250);
  await waitFor('the SRV targets scraped', async () => {
    const ts = await targets();
    return ts.length === 3 && ts.every((t) => t.health === 'up') ? true : null;
  }, 30000, 250);
  const srvT = (await targets()).find((t) => t.labels.srv_port === String(t1.port));
  assert.equal(srvT.discoveredLabels.__meta_dns_srv_record_target, 'localhost');
  // dnsmasq restarted without t1's record: its target goes
  await dns.stop();
  dns = dnsmasq([t2]);
  await waitFor('t1 gone', async () =>
    JSON.stringify(key(await targets())) === JSON.stringify(want.filter((w) => !w.includes(`:${t1.port} `))),
  30000, 250);
  await profd.stop();
  await dns.stop();
  for (const t of [t1, t2]) await t.stop();
});

test('profd check config: Debian\'s prometheus.yml loads; a bad file exits 2 naming the line', async (t) => {
  if (fs.existsSync('/etc/prometheus/prometheus.yml')) {
    const r = await run(profdBin(), ['check', 'config', '/etc/prometheus/prometheus.yml']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /dialect prometheus/);
    assert.match(r.stdout, /WARNING: .*"alerting" ignored: profd sends no alerts/);
    assert.match(r.stdout, /WARNING: .*"evaluation_interval" ignored/);
  }
  const bad = write('bad.yml', 'scrape_configs:\n  - job_name: a\n    relabel_configs:\n      - action: hashmod\n        target_label: x\n');
  const r = await run(profdBin(), ['check', 'config', bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.yml:4:9: relabel configuration for hashmod requires non-zero modulus/);
});
