// A real Pyroscope client for profd's e2e test (pyroscope_node.test.mjs):
// this program runs the Pyroscope Node.js SDK (@pyroscope/nodejs from npm,
// pinned in package.json) unchanged, pointed at profd's /ingest, with its
// wall (CPU time collected too) and heap profilers. It does busy work in a
// distinctively named function and keeps allocations alive in another
// until the SDK has uploaded at least FLUSHES wall and FLUSHES heap profiles
// (at most 120 s: a loaded machine delays the SDK's timers), then stops the
// SDK (which uploads the last profiles). Every upload the SDK makes goes through fetch, which is wrapped
// here only to record each reply's status: one JSON line {url, status, body}
// per upload on stdout.
//
//   PROFD_URL=http://127.0.0.1:PORT FLUSHES=3 node producer.mjs
const base = process.env.PROFD_URL;
if (!base) {
  console.error('PROFD_URL is not set');
  process.exit(2);
}
const flushes = Number(process.env.FLUSHES || 3);
const flushMs = Number(process.env.FLUSH_MS || 2500);

const realFetch = globalThis.fetch;
const pending = [];
let wallN = 0, heapN = 0;
globalThis.fetch = async (url, opts) => {
  // the SDK sends sampleRate with wall profiles only
  if (/[?&]sampleRate=/.test(String(url))) wallN++;
  else heapN++;
  const p = (async () => {
    const r = await realFetch(url, opts);
    const body = await r.clone().text();
    console.log(JSON.stringify({ url: String(url), status: r.status, body }));
    return r;
  })();
  pending.push(p.catch((e) => console.log(JSON.stringify({ url: String(url), status: 0, body: String(e) }))));
  return p;
};

const Pyroscope = (await import('@pyroscope/nodejs')).default;

// Replicas (issue 26, replicas_labels.test.mjs): START_AT (Unix ms) makes
// two producers start their SDKs at the same instant, so their first
// uploads carry the same whole-second `from`; REPLICA=a|b adds busy work in
// a function of that replica's own name (the merged profile must show
// both); LABELS=1 runs part of the work under the SDK's
// wrapWithLabels({endpoint: '/checkout'}).
const startAt = Number(process.env.START_AT || 0);
if (startAt) await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now())));
// (each its own loop: a wrapper around profdPyroBusyWork could be inlined away)
function profdReplicaWorkA(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 1; i < 100000; i++) x = (x + Math.sqrt(i) * 17) % 1000003;
  return x;
}
function profdReplicaWorkB(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 1; i < 100000; i++) x = (x + Math.sqrt(i) * 19) % 1000033;
  return x;
}
function profdPyroCheckout(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 1; i < 100000; i++) x = (x + Math.sqrt(i) * 23) % 1000037;
  return x;
}
const replicaWork = { a: profdReplicaWorkA, b: profdReplicaWorkB }[process.env.REPLICA || ''];
const labelled = process.env.LABELS === '1';

// The busy function the test looks for on top of the merged wall profile.
function profdPyroBusyWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 1; i < 200000; i++) x = (x + Math.sqrt(i) * 31) % 1000003;
  }
  return x;
}

const kept = [];
function profdPyroAllocator(n) {
  for (let i = 0; i < n; i++) kept.push({ s: 'x'.repeat(256) + i, n: [i, i + 1, i + 2] });
}

Pyroscope.init({
  serverAddress: base,
  appName: process.env.APP_NAME || 'pyro-node-e2e',
  flushIntervalMs: flushMs,
  tags: { region: 'eu-1' },
  wall: { samplingDurationMs: flushMs, collectCpuTime: true },
  heap: { samplingIntervalBytes: 16 * 1024 },
});
Pyroscope.start();

const deadline = Date.now() + 120000;
while ((wallN < flushes || heapN < flushes) && Date.now() < deadline) {
  profdPyroAllocator(1000);
  profdPyroBusyWork(100);
  if (replicaWork) replicaWork(60);
  if (labelled) Pyroscope.wrapWithLabels({ endpoint: '/checkout' }, () => profdPyroCheckout(60));
  await new Promise((r) => setTimeout(r, 20)); // let the SDK's timers run
}
await Pyroscope.stop();
await new Promise((r) => setTimeout(r, 500));
await Promise.all(pending);
console.error(`kept ${kept.length}`);
