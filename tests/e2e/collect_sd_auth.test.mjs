// End-to-end tests of kubernetes_sd_configs and of discovery and scrape
// auth (oauth2, http_sd basic auth) (issue 14). No live cluster is
// available here: a local HTTP server plays the API server, answering the
// list and watch requests of pods, services, endpoints and nodes with JSON
// written for this test in the Kubernetes API's shape (v1 PodList, watch
// events one per line), and requiring the bearer token given by
// authorization.credentials_file. The pods point at real Go targets
// (tests/e2e/collect/target) on loopback, so their profiles are scraped.
//  - roles pod (namespaces.names, a label selector), service, endpoints,
//    endpointslice, node and ingress: each target's __meta_kubernetes_* labels as Prometheus'
//    discovery/kubernetes sets them (Debian's Prometheus 2.42 is built
//    without Kubernetes discovery, so no side-by-side run);
//  - a watch event adding a pod and one deleting a pod: targets appear and
//    go in /api/v1/targets without a reload, and the deleted pod's series
//    leave /metrics;
//  - a watch ERROR (410 Gone) makes profd list again; a wrong token is
//    counted and the file is re-read;
//  - kubeconfig_file (current context, relative tokenFile, its namespace
//    for own_namespace) and in-cluster (KUBERNETES_SERVICE_HOST/PORT over
//    TLS with a CA made by openssl, the service account's token, ca.crt and
//    namespace from PROFD_K8S_SERVICEACCOUNT_DIR);
//  - oauth2 client credentials against a token server written here (one
//    token for many scrapes, a new one near expiry, a wrong secret's 401),
//    and http_sd behind basic auth.
//
//   PROFD_BIN=build/profd node --test tests/e2e/collect_sd_auth.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import nodeHttp from 'node:http';
import nodeHttps from 'node:https';
import path from 'node:path';
import {
  SRC, Proc, apiData, profdBin, freePort, goEnv, http, killAll, run, startProfd, tempDir, waitFor,
} from './lib.mjs';

let dir, targetBin;
const apis = [];
const TOKEN = 'k8s-test-token-1';

before(async () => {
  dir = tempDir('profd-k8s-');
  targetBin = path.join(dir, 'target');
  const r = await run('go', ['build', '-o', targetBin, '.'],
    { cwd: path.join(SRC, 'tests', 'e2e', 'collect', 'target'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of the test target failed\n${r.stdout}${r.stderr}`);
});

after(async () => {
  for (const a of apis) a.close();
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// Stops profd and checks it exited 0: under ASan a leak or error at exit fails here.
async function stopClean(p) {
  const ex = await p.stop();
  assert.equal(ex.code, 0, `profd exited ${JSON.stringify(ex)}\n${p.tail()}`);
}

async function startTarget(name) {
  const port = await freePort();
  const p = new Proc(name, targetBin, [`-listen=127.0.0.1:${port}`]);
  p.port = port;
  await waitFor(`${name} to listen`, async () => {
    if (p.exited) throw new Error(`${name} exited\n${p.tail()}`);
    const r = await http(`http://127.0.0.1:${port}/metrics`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 30000, 200);
  return p;
}

// ---- a pretend API server ----
class FakeApi {
  constructor(tls = null) {
    this.tls = tls;
    this.rv = 100;
    this.objs = { pods: new Map(), services: new Map(), endpoints: new Map(), nodes: new Map(),
      endpointslices: new Map(), ingresses: new Map() };
    this.watchers = { pods: [], services: [], endpoints: [], nodes: [], endpointslices: [], ingresses: [] };
    this.requests = [];
    this.srv = tls ? nodeHttps.createServer(tls, (req, res) => this.handle(req, res))
      : nodeHttp.createServer((req, res) => this.handle(req, res));
    apis.push(this);
  }
  async listen() {
    await new Promise((r) => this.srv.listen(0, '127.0.0.1', r));
    this.url = `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.srv.address().port}`;
  }
  close() {
    if (this.closed) return;
    this.closed = true;
    for (const ws of Object.values(this.watchers)) for (const w of ws) w.res.destroy();
    this.srv.close();
  }
  key(o) { return `${o.metadata.namespace || ''}/${o.metadata.name}`; }
  put(res, o) {
    o.metadata.resourceVersion = String(++this.rv);
    this.objs[res].set(this.key(o), o);
  }
  // a watch event to every watcher of res whose namespace matches
  event(res, type, o) {
    if (type === 'DELETED') this.objs[res].delete(this.key(o));
    else this.put(res, o);
    if (type === 'DELETED') o.metadata.resourceVersion = String(++this.rv);
    for (const w of this.watchers[res]) {
      if (w.ns && w.ns !== o.metadata.namespace) continue;
      w.res.write(JSON.stringify({ type, object: o }) + '\n');
    }
  }
  // an ERROR event (410 Gone: the version is too old) ends every watch of res
  gone(res) {
    for (const w of this.watchers[res]) {
      w.res.write(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1',
        status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 } }) + '\n');
      w.res.end();
    }
    this.watchers[res] = [];
  }
  handle(req, res) {
    const u = new URL(req.url, 'http://x');
    this.requests.push({ path: u.pathname, query: Object.fromEntries(u.searchParams), ua: req.headers['user-agent'] || '' });
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 }));
      return;
    }
    const m = u.pathname.match(/^\/api\/v1\/(?:namespaces\/([^/]+)\/)?(pods|services|endpoints|nodes)$/) ||
      u.pathname.match(/^\/apis\/discovery\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?(endpointslices)$/) ||
      u.pathname.match(/^\/apis\/networking\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?(ingresses)$/);
    if (!m) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
      return;
    }
    const [, ns, kind] = m;
    const sel = u.searchParams.get('labelSelector');
    const match = (o) => (!ns || o.metadata.namespace === ns) &&
      (!sel || sel.split(',').every((kv) => { const [k, v] = kv.split('='); return (o.metadata.labels || {})[k] === v; }));
    const w = u.searchParams.get('watch');
    if (w === '1' || w === 'true') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      res.flushHeaders();
      const entry = { ns, res };
      const origWrite = res.write.bind(res);
      // the selector applies to watch events too
      entry.res = { write: (line) => { const ev = JSON.parse(line); if (ev.type === 'ERROR' || match(ev.object)) origWrite(line); },
        end: () => res.end(), destroy: () => res.destroy() };
      this.watchers[kind].push(entry);
      req.on('close', () => { this.watchers[kind] = this.watchers[kind].filter((x) => x !== entry); });
      return;
    }
    const kinds = { pods: 'PodList', services: 'ServiceList', endpoints: 'EndpointsList', nodes: 'NodeList',
      endpointslices: 'EndpointSliceList', ingresses: 'IngressList' };
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: kinds[kind], apiVersion: 'v1', metadata: { resourceVersion: String(this.rv) },
      items: [...this.objs[kind].values()].filter(match) }));
  }
}

function pod(name, port, extra = {}) {
  return {
    kind: 'Pod', apiVersion: 'v1',
    metadata: {
      name, namespace: 'demo', uid: `uid-${name}`,
      labels: { app: 'demo', 'app.kubernetes.io/version': '1.2' },
      annotations: { 'profiles.grafana.com/cpu.scrape': 'true' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'demo-7f9c', uid: 'rs-1', controller: true }],
      ...extra.metadata,
    },
    spec: {
      nodeName: 'node-1',
      containers: [
        { name: 'app', image: 'example/demo:1.2', ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }] },
        { name: 'sidecar', image: 'example/sidecar:3' },
      ],
    },
    status: {
      phase: 'Running', podIP: '127.0.0.1', hostIP: '10.0.0.5',
      conditions: [{ type: 'Initialized', status: 'True' }, { type: 'Ready', status: 'True' }],
    },
  };
}

test('kubernetes_sd: pods listed and watched; an added pod appears, a deleted one goes with its series; 410 Gone lists again', async () => {
  const t1 = await startTarget('pod-a');
  const t2 = await startTarget('pod-b');
  const t3 = await startTarget('kubelet');
  const api = new FakeApi();
  await api.listen();
  api.put('pods', pod('demo-a', t1.port));
  api.put('pods', { ...pod('other', t1.port), metadata: { ...pod('other', t1.port).metadata, labels: { app: 'other' } } });
  api.put('services', {
    kind: 'Service', apiVersion: 'v1',
    metadata: { name: 'demo', namespace: 'demo', labels: { app: 'demo' }, annotations: { note: 'x' } },
    spec: { type: 'ClusterIP', clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 8080, protocol: 'TCP', targetPort: 6060 }] },
  });
  api.put('endpoints', {
    kind: 'Endpoints', apiVersion: 'v1',
    metadata: { name: 'demo', namespace: 'demo', labels: { app: 'demo' } },
    subsets: [{
      addresses: [{ ip: '127.0.0.1', nodeName: 'node-1', targetRef: { kind: 'Pod', name: 'demo-a', namespace: 'demo', uid: 'uid-demo-a' } }],
      notReadyAddresses: [{ ip: '127.0.0.2', hostname: 'h2' }],
      ports: [{ name: 'http', port: t1.port, protocol: 'TCP' }],
    }],
  });
  api.put('nodes', {
    kind: 'Node', apiVersion: 'v1',
    metadata: { name: 'node-1', labels: { 'kubernetes.io/hostname': 'node-1', 'topology.kubernetes.io/zone': 'z1' }, annotations: { 'node.alpha.kubernetes.io/ttl': '0' } },
    spec: { providerID: 'kind://docker/kind/node-1' },
    status: {
      addresses: [{ type: 'Hostname', address: 'node-1' }, { type: 'InternalIP', address: '127.0.0.1' }],
      daemonEndpoints: { kubeletEndpoint: { Port: t3.port } },
    },
  });
  // discovery.k8s.io/v1: one ready endpoint backed by demo-a, one terminating
  api.put('endpointslices', {
    kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', addressType: 'IPv4',
    metadata: { name: 'demo-x1', namespace: 'demo', labels: { 'kubernetes.io/service-name': 'demo' }, annotations: { 'a.b/c': 'd' } },
    endpoints: [
      { addresses: ['127.0.0.1'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-1', zone: 'z1',
        targetRef: { kind: 'Pod', name: 'demo-a', namespace: 'demo', uid: 'uid-demo-a' } },
      { addresses: ['127.0.0.3'], conditions: { ready: false, terminating: true }, hostname: 'h3' },
    ],
    ports: [{ name: 'http', port: t1.port, protocol: 'TCP', appProtocol: 'http' }],
  });
  // networking.k8s.io/v1: two rules, one under TLS by a wildcard, one with two paths
  api.put('ingresses', {
    kind: 'Ingress', apiVersion: 'networking.k8s.io/v1',
    metadata: { name: 'web', namespace: 'demo', labels: { app: 'web' } },
    spec: {
      ingressClassName: 'nginx',
      tls: [{ hosts: ['*.example.com'] }],
      rules: [
        { host: 'a.example.com', http: { paths: [{ path: '/debug', pathType: 'Prefix' }] } },
        { host: 'plain.test', http: { paths: [{ path: '', pathType: 'Prefix' }, { path: '/x', pathType: 'Exact' }] } },
      ],
    },
  });
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, TOKEN + '\n');
  const k8s = (role, more = '') => `    kubernetes_sd_configs:
      - role: ${role}
        api_server: ${api.url}
        authorization: {credentials_file: ${tokenFile}}
${more}`;
  const cfgText = `global:
  scrape_interval: 2s
scrape_configs:
  - job_name: pods
${k8s('pod', `        namespaces: {names: [demo]}
        selectors: [{role: pod, label: app=demo}]
`)}    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: http
        action: keep
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
  - job_name: services
${k8s('service')}  - job_name: endpoints
${k8s('endpoints', '        namespaces: {names: [demo]}\n')}  - job_name: nodes
${k8s('node')}  - job_name: slices
${k8s('endpointslice', '        namespaces: {names: [demo]}\n')}  - job_name: ingresses
${k8s('ingress')}`;
  const cfg = path.join(dir, 'k8s.yml');
  fs.writeFileSync(cfg, cfgText);
  const profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg });
  const targets = async () => (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  // one type is enough to compare label sets; profd lists a target per profile type
  const ofJob = async (job) => (await targets()).filter((t) => t.scrapePool === job && t.labels.__name__ === 'heap');
  const pods = async () => (await ofJob('pods')).map((t) => t.labels.pod).sort();

  await waitFor('the listed pod', async () => JSON.stringify(await pods()) === '["demo-a"]', 30000, 250);
  const [a] = await ofJob('pods');
  const d = a.discoveredLabels;
  const want = {
    __address__: `127.0.0.1:${t1.port}`,
    __meta_kubernetes_namespace: 'demo',
    __meta_kubernetes_pod_name: 'demo-a',
    __meta_kubernetes_pod_ip: '127.0.0.1',
    __meta_kubernetes_pod_ready: 'true',
    __meta_kubernetes_pod_phase: 'Running',
    __meta_kubernetes_pod_node_name: 'node-1',
    __meta_kubernetes_pod_host_ip: '10.0.0.5',
    __meta_kubernetes_pod_uid: 'uid-demo-a',
    __meta_kubernetes_pod_controller_kind: 'ReplicaSet',
    __meta_kubernetes_pod_controller_name: 'demo-7f9c',
    __meta_kubernetes_pod_label_app: 'demo',
    __meta_kubernetes_pod_labelpresent_app: 'true',
    __meta_kubernetes_pod_label_app_kubernetes_io_version: '1.2',
    __meta_kubernetes_pod_labelpresent_app_kubernetes_io_version: 'true',
    __meta_kubernetes_pod_annotation_profiles_grafana_com_cpu_scrape: 'true',
    __meta_kubernetes_pod_annotationpresent_profiles_grafana_com_cpu_scrape: 'true',
    __meta_kubernetes_pod_container_name: 'app',
    __meta_kubernetes_pod_container_image: 'example/demo:1.2',
    __meta_kubernetes_pod_container_init: 'false',
    __meta_kubernetes_pod_container_port_name: 'http',
    __meta_kubernetes_pod_container_port_number: String(t1.port),
    __meta_kubernetes_pod_container_port_protocol: 'TCP',
  };
  for (const [k, v] of Object.entries(want)) assert.equal(d[k], v, k);
  // the list asked the namespace with the selector, the watch followed
  assert.ok(api.requests.some((r) => r.path === '/api/v1/namespaces/demo/pods' && r.query.labelSelector === 'app=demo' && !r.query.watch));
  await waitFor('a pod watch', async () => api.watchers.pods.some((w) => w.ns === 'demo'), 30000, 100);
  await waitFor('pod a up', async () => (await ofJob('pods')).every((t) => t.health === 'up'), 30000, 250);

  // the other roles
  const [svc] = await ofJob('services');
  assert.equal(svc.discoveredLabels.__address__, 'demo.demo.svc:8080');
  assert.equal(svc.discoveredLabels.__meta_kubernetes_service_cluster_ip, '10.96.0.10');
  assert.equal(svc.discoveredLabels.__meta_kubernetes_service_port_name, 'http');
  assert.equal(svc.discoveredLabels.__meta_kubernetes_service_annotation_note, 'x');
  const eps = await ofJob('endpoints');
  const byAddr = Object.fromEntries(eps.map((t) => [t.discoveredLabels.__address__, t.discoveredLabels]));
  const e1 = byAddr[`127.0.0.1:${t1.port}`];
  assert.ok(e1, `endpoints targets: ${Object.keys(byAddr)}`);
  assert.equal(e1.__meta_kubernetes_endpoint_ready, 'true');
  assert.equal(e1.__meta_kubernetes_endpoint_address_target_kind, 'Pod');
  assert.equal(e1.__meta_kubernetes_pod_container_name, 'app');
  assert.equal(e1.__meta_kubernetes_service_name, 'demo');
  assert.equal(byAddr[`127.0.0.2:${t1.port}`].__meta_kubernetes_endpoint_ready, 'false');
  const [node] = await ofJob('nodes');
  assert.equal(node.discoveredLabels.__address__, `127.0.0.1:${t3.port}`);
  assert.equal(node.labels.instance, 'node-1');
  assert.equal(node.discoveredLabels.__meta_kubernetes_node_address_InternalIP, '127.0.0.1');
  assert.equal(node.discoveredLabels.__meta_kubernetes_node_label_topology_kubernetes_io_zone, 'z1');

  // endpointslice: the labels of discovery/kubernetes/endpointslice.go
  const sl = Object.fromEntries((await ofJob('slices')).map((t) => [t.discoveredLabels.__address__, t.discoveredLabels]));
  const s1 = sl[`127.0.0.1:${t1.port}`], s3 = sl[`127.0.0.3:${t1.port}`];
  assert.ok(s1 && s3, `endpointslice targets: ${Object.keys(sl)}`);
  const wantSlice = {
    __meta_kubernetes_namespace: 'demo',
    __meta_kubernetes_endpointslice_name: 'demo-x1',
    __meta_kubernetes_endpointslice_address_type: 'IPv4',
    __meta_kubernetes_endpointslice_label_kubernetes_io_service_name: 'demo',
    __meta_kubernetes_endpointslice_annotation_a_b_c: 'd',
    __meta_kubernetes_endpointslice_port_name: 'http',
    __meta_kubernetes_endpointslice_port: String(t1.port),
    __meta_kubernetes_endpointslice_port_protocol: 'TCP',
    __meta_kubernetes_endpointslice_port_app_protocol: 'http',
    __meta_kubernetes_endpointslice_endpoint_conditions_ready: 'true',
    __meta_kubernetes_endpointslice_endpoint_conditions_serving: 'true',
    __meta_kubernetes_endpointslice_endpoint_conditions_terminating: 'false',
    __meta_kubernetes_endpointslice_endpoint_node_name: 'node-1',
    __meta_kubernetes_endpointslice_endpoint_zone: 'z1',
    __meta_kubernetes_endpointslice_address_target_kind: 'Pod',
    __meta_kubernetes_endpointslice_address_target_name: 'demo-a',
    __meta_kubernetes_service_name: 'demo',
    __meta_kubernetes_pod_name: 'demo-a',
    __meta_kubernetes_pod_container_name: 'app',
  };
  for (const [k, v] of Object.entries(wantSlice)) assert.equal(s1[k], v, k);
  assert.equal(s3.__meta_kubernetes_endpointslice_endpoint_conditions_ready, 'false');
  assert.equal(s3.__meta_kubernetes_endpointslice_endpoint_hostname, 'h3');
  assert.equal(s3.__meta_kubernetes_endpointslice_endpoint_conditions_serving, undefined, 'unset condition, no label');
  assert.equal(s3.__meta_kubernetes_pod_name, undefined);
  assert.ok(api.requests.some((r) => r.path === '/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices'));
  // ingress: a target per rule x path, https where a TLS host matches
  const ing = (await ofJob('ingresses')).map((t) => t.discoveredLabels)
    .map((d) => `${d.__address__} ${d.__meta_kubernetes_ingress_scheme} ${d.__meta_kubernetes_ingress_host} ${d.__meta_kubernetes_ingress_path}`).sort();
  // plain.test's two paths give one target: same labels after relabeling (as
  // Prometheus, which keys its targets by their labels' hash)
  assert.deepEqual(ing, ['a.example.com https a.example.com /debug', 'plain.test http plain.test /']);
  const [i0] = await ofJob('ingresses');
  assert.equal(i0.discoveredLabels.__meta_kubernetes_ingress_name, 'web');
  assert.equal(i0.discoveredLabels.__meta_kubernetes_ingress_class_name, 'nginx');
  assert.equal(i0.discoveredLabels.__meta_kubernetes_ingress_label_app, 'web');
  assert.equal(i0.discoveredLabels.__meta_kubernetes_namespace, 'demo');

  // No comparison with Prometheus here: Debian's prometheus 2.42 is built
  // without Kubernetes discovery (it refuses the file: "field
  // kubernetes_sd_configs not found in type config.ScrapeConfig"); the
  // labels above follow discovery/kubernetes/{pod,service,endpoints,node}.go.

  // a watch event adds a pod: it appears without a reload
  api.event('pods', 'ADDED', pod('demo-b', t2.port));
  await waitFor('the added pod', async () => JSON.stringify(await pods()) === '["demo-a","demo-b"]', 30000, 250);
  const upOf = async (p) => (await http(profd.base + '/metrics')).text.split('\n')
    .filter((l) => l.startsWith('profd_target_up{') && l.includes(`pod="${p}"`));
  await waitFor('demo-b scraped', async () => (await upOf('demo-b')).some((l) => l.endsWith(' 1')), 30000, 250);
  assert.ok((await upOf('demo-a')).length > 0);
  // a watch event deletes demo-a: it goes, and its series leave /metrics
  api.event('pods', 'DELETED', pod('demo-a', t1.port));
  await waitFor('the deleted pod gone', async () => JSON.stringify(await pods()) === '["demo-b"]', 30000, 250);
  await waitFor('demo-a\'s series gone', async () => (await upOf('demo-a')).length === 0, 30000, 250);
  // a pod outside the selector added by an event stays out
  api.event('pods', 'ADDED', { ...pod('other2', t2.port), metadata: { ...pod('other2', t2.port).metadata, labels: { app: 'other' } } });

  // 410 Gone: profd lists again and sees a pod added meanwhile
  const lists = () => api.requests.filter((r) => r.path === '/api/v1/namespaces/demo/pods' && !r.query.watch).length;
  const before = lists();
  api.objs.pods.set('demo/demo-c', pod('demo-c', t1.port));
  api.gone('pods');
  await waitFor('a new list after 410', async () => lists() > before, 30000, 100);
  await waitFor('the pod of the new list', async () => JSON.stringify(await pods()) === '["demo-b","demo-c"]', 30000, 250);

  // no reload happened: one configuration load in the log
  await stopClean(profd);
  api.close();
  for (const t of [t1, t2, t3]) await t.stop();
});

test('kubernetes_sd: a wrong token is refused by the API server; the failure is counted and nothing is discovered', async () => {
  const api = new FakeApi();
  await api.listen();
  api.put('pods', pod('demo-a', 1));
  const tokenFile = path.join(dir, 'bad-token');
  fs.writeFileSync(tokenFile, 'wrong\n');
  const cfg = path.join(dir, 'k8s-bad.yml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        api_server: ${api.url}
        bearer_token_file: ${tokenFile}
`);
  const profd = await startProfd({ storage: path.join(dir, 'data-bad'), config: cfg });
  await waitFor('the failure counted', async () =>
    /profd_sd_refresh_failures_total\{mechanism="kubernetes"\} [1-9]/.test((await http(profd.base + '/metrics')).text), 30000, 250);
  assert.equal((await apiData(profd.base, '/api/v1/targets')).activeTargets.length, 0);
  // the right token written to the file is used at the next try (read per request)
  fs.writeFileSync(tokenFile, TOKEN);
  await waitFor('the pod once the token is right', async () =>
    (await apiData(profd.base, '/api/v1/targets')).activeTargets.length > 0, 30000, 250);
  await stopClean(profd);
  api.close();
});

test('oauth2 client credentials for scrapes (token cached until expiry), http_sd behind basic auth; a wrong secret shows in /api/v1/targets', async () => {
  const TOK = 'oauth-token-7';
  const t1 = await startTarget('oauth-target');
  // the Go target wants the token the token server hands out
  await t1.stop();
  const p = new Proc('oauth-target2', targetBin, [`-listen=127.0.0.1:${t1.port}`, `-bearer=${TOK}`]);
  await waitFor('the bearer target', async () => {
    const r = await http(`http://127.0.0.1:${t1.port}/metrics`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 401;
  }, 30000, 200);
  // token server: client "profd" with secret "s3cret"; "short" gets tokens of 11 s
  const tokenReqs = [];
  const tokSrv = nodeHttp.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const auth = Buffer.from((req.headers.authorization || '').replace(/^Basic /, ''), 'base64').toString();
      const [id, secret] = auth.split(':').map(decodeURIComponent);
      const form = Object.fromEntries(new URLSearchParams(body));
      tokenReqs.push({ id, form, method: req.method, ctype: req.headers['content-type'] });
      if (secret !== 's3cret') {
        res.writeHead(401, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ error: 'invalid_client' }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ access_token: TOK, token_type: 'bearer', expires_in: id === 'short' ? 11 : 3600 }));
    });
  });
  await new Promise((r) => tokSrv.listen(0, '127.0.0.1', r));
  const tokenUrl = `http://127.0.0.1:${tokSrv.address().port}/oauth/token`;
  // http_sd behind basic auth
  const sdReqs = [];
  const sdSrv = nodeHttp.createServer((req, res) => {
    sdReqs.push(req.headers.authorization || '');
    if (req.headers.authorization !== 'Basic ' + Buffer.from('sd:pw').toString('base64')) {
      res.writeHead(401); res.end(); return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify([{ targets: [`127.0.0.1:${t1.port}`], labels: { from: 'http_sd' } }]));
  });
  await new Promise((r) => sdSrv.listen(0, '127.0.0.1', r));
  const secretFile = path.join(dir, 'oauth-secret');
  fs.writeFileSync(secretFile, 's3cret\n');
  const only = `    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`;
  const cfg = path.join(dir, 'oauth.yml');
  fs.writeFileSync(cfg, `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: oauth
    oauth2:
      client_id: profd
      client_secret_file: ${secretFile}
      token_url: ${tokenUrl}
      scopes: [profiles.read, profiles.write]
      endpoint_params: {audience: profd-test}
    http_sd_configs:
      - url: http://127.0.0.1:${sdSrv.address().port}/targets
        refresh_interval: 1s
        basic_auth: {username: sd, password: pw}
${only}  - job_name: short
    oauth2: {client_id: short, client_secret: s3cret, token_url: '${tokenUrl}'}
    static_configs: [{targets: ['127.0.0.1:${t1.port}']}]
${only}  - job_name: wrong
    oauth2: {client_id: profd, client_secret: nope, token_url: '${tokenUrl}'}
    static_configs: [{targets: ['127.0.0.1:${t1.port}']}]
${only}`);
  const profd = await startProfd({ storage: path.join(dir, 'data-oauth'), config: cfg });
  const byJob = async () => Object.fromEntries((await apiData(profd.base, '/api/v1/targets')).activeTargets.map((t) => [t.scrapePool, t]));
  const successes = async (job) => {
    const r = await http(profd.base + '/metrics');
    return r.text.split('\n').filter((l) => l.startsWith('profd_scrapes_total{') && l.includes(`job="${job}"`) && l.includes('outcome="success"'))
      .reduce((a, l) => a + Number(l.split(' ').pop()), 0);
  };
  await waitFor('the http_sd target (basic auth) scraped with the oauth2 token 4 times', async () => (await successes('oauth')) >= 4, 60000, 250);
  const ts = await byJob();
  assert.equal(ts.oauth.labels.from, 'http_sd');
  assert.equal(ts.oauth.health, 'up');
  assert.ok(sdReqs.length > 0 && sdReqs.every((a) => a.startsWith('Basic ')));
  // one token for 4 scrapes: cached (expires_in 3600)
  const mine = tokenReqs.filter((r) => r.id === 'profd' && r.form.audience === 'profd-test');
  assert.equal(mine.length, 1, JSON.stringify(tokenReqs));
  assert.equal(mine[0].method, 'POST');
  assert.match(mine[0].ctype, /application\/x-www-form-urlencoded/);
  assert.deepEqual(mine[0].form, { grant_type: 'client_credentials', scope: 'profiles.read profiles.write', audience: 'profd-test' });
  // expires_in 11 s: the token is fetched again once within 10 s of its expiry
  await waitFor('"short" fetched a second token', async () => tokenReqs.filter((r) => r.id === 'short').length >= 2, 30000, 250);
  assert.ok((await successes('short')) >= 1);
  // a wrong secret: the scrape fails naming oauth2 and the token server's answer
  await waitFor('the wrong secret\'s error', async () => {
    const w = (await byJob()).wrong;
    return w && w.health === 'down' && /oauth2.*401.*invalid_client/.test(w.lastError) ? w : null;
  }, 30000, 250);
  await stopClean(profd);
  tokSrv.close();
  sdSrv.close();
  await p.stop();
});

test('kubernetes_sd: kubeconfig_file (current context, tokenFile relative to it); own_namespace with it refused as Prometheus', async () => {
  const api = new FakeApi();
  await api.listen();
  api.put('pods', pod('demo-a', 6060));
  api.put('pods', { ...pod('elsewhere', 6060), metadata: { ...pod('elsewhere', 6060).metadata, namespace: 'other' } });
  const kdir = path.join(dir, 'kube');
  fs.mkdirSync(kdir, { recursive: true });
  fs.writeFileSync(path.join(kdir, 'token'), TOKEN + '\n');
  // two contexts: the current one is used
  fs.writeFileSync(path.join(kdir, 'config'), `apiVersion: v1
kind: Config
current-context: test
clusters:
  - name: wrong
    cluster: {server: 'http://127.0.0.1:1'}
  - name: fake
    cluster: {server: '${api.url}/'}
users:
  - name: me
    user: {tokenFile: token}
contexts:
  - name: other
    context: {cluster: wrong, user: me, namespace: other}
  - name: test
    context: {cluster: fake, user: me, namespace: demo}
`);
  const cfg = path.join(dir, 'k8s-kubeconfig.yml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: kube/config
        namespaces: {names: [demo]}
`);
  // Prometheus (and profd since issue 32): own_namespace is the in-cluster pod's
  // namespace, so it is refused with kubeconfig_file
  const bad = path.join(dir, 'k8s-kubeconfig-own.yml');
  fs.writeFileSync(bad, fs.readFileSync(cfg, 'utf8').replace('{names: [demo]}', '{own_namespace: true}'));
  const chk = await run(path.resolve(profdBin()), ['check', 'config', bad]);
  assert.notEqual(chk.code, 0, chk.stdout + chk.stderr);
  assert.match(chk.stdout + chk.stderr, /cannot use 'kubeconfig_file' and 'namespaces.own_namespace' simultaneously/);
  const profd = await startProfd({ storage: path.join(dir, 'data-kubeconfig'), config: cfg });
  const pods = async () => [...new Set((await apiData(profd.base, '/api/v1/targets')).activeTargets
    .map((t) => t.discoveredLabels.__meta_kubernetes_pod_name))].sort();
  await waitFor('the pod of the context\'s namespace', async () => JSON.stringify(await pods()) === '["demo-a"]', 30000, 250);
  assert.ok(api.requests.some((r) => r.path === '/api/v1/namespaces/demo/pods'), JSON.stringify(api.requests.map((r) => r.path)));
  assert.ok(!api.requests.some((r) => r.path.includes('/namespaces/other/') || r.path === '/api/v1/pods'));
  await stopClean(profd);
  api.close();
});

test('kubernetes_sd in-cluster: KUBERNETES_SERVICE_HOST/PORT over TLS, the service account token, CA and namespace', async () => {
  const sa = path.join(dir, 'serviceaccount');
  fs.mkdirSync(sa, { recursive: true });
  const ssl = async (args) => {
    const r = await run('openssl', args, { cwd: dir });
    assert.equal(r.code, 0, `openssl ${args.join(' ')}\n${r.stderr}`);
  };
  const ca = path.join(dir, 'k8s-ca'), srv = path.join(dir, 'k8s-srv');
  await ssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=profd k8s test CA',
    '-keyout', `${ca}.key`, '-out', `${ca}.pem`]);
  await ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', `${srv}.key`, '-out', `${srv}.csr`]);
  fs.writeFileSync(path.join(dir, 'k8s-san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await ssl(['x509', '-req', '-in', `${srv}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial',
    '-days', '2', '-extfile', path.join(dir, 'k8s-san.ext'), '-out', `${srv}.pem`]);
  fs.copyFileSync(`${ca}.pem`, path.join(sa, 'ca.crt'));
  fs.writeFileSync(path.join(sa, 'token'), TOKEN);
  fs.writeFileSync(path.join(sa, 'namespace'), 'demo');
  const api = new FakeApi({ key: fs.readFileSync(`${srv}.key`), cert: fs.readFileSync(`${srv}.pem`) });
  await api.listen();
  api.put('pods', pod('demo-a', 6060));
  api.put('pods', { ...pod('elsewhere', 6060), metadata: { ...pod('elsewhere', 6060).metadata, namespace: 'other' } });
  const cfg = path.join(dir, 'k8s-incluster.yml');
  fs.writeFileSync(cfg, `scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        namespaces: {own_namespace: true}
`);
  const saved = { ...process.env };
  Object.assign(process.env, { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(api.srv.address().port),
    PROFD_K8S_SERVICEACCOUNT_DIR: sa });
  let profd;
  try {
    profd = await startProfd({ storage: path.join(dir, 'data-incluster'), config: cfg });
  } finally {
    for (const k of ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT', 'PROFD_K8S_SERVICEACCOUNT_DIR']) {
      if (k in saved) process.env[k] = saved[k]; else delete process.env[k];
    }
  }
  const pods = async () => [...new Set((await apiData(profd.base, '/api/v1/targets')).activeTargets
    .map((t) => t.discoveredLabels.__meta_kubernetes_pod_name))].sort();
  await waitFor('the pod of the service account\'s namespace', async () => JSON.stringify(await pods()) === '["demo-a"]', 30000, 250);
  assert.ok(!api.requests.some((r) => r.path.includes('/namespaces/other/') || r.path === '/api/v1/pods'));
  await stopClean(profd);
  api.close();
});
