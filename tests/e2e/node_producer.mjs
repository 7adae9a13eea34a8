// A real Node.js producer for profd's e2e test (node_push.test.mjs): it is
// profiled by @datadog/pprof (wall-time and heap, as dd-trace does), does
// busy work in a distinctively named function, and pushes each profile to
// profefe's API exactly as a profefe agent would:
//   POST $PROFD_URL/api/0/profiles?service=&type=&instance_id=&labels=&created_at=
// with the gzip pprof as the body. Wall-time profiles go as profefe type
// "other" (profefe has no wall type; it is not CPU time), heap as "heap".
//
//   PROFD_URL=http://127.0.0.1:PORT ROUNDS=2 node node_producer.mjs
//
// Prints one JSON line per push ({type, status, body}); exits 1 when a push
// is refused.
import * as pprof from '@datadog/pprof';
import crypto from 'node:crypto';

const base = process.env.PROFD_URL;
if (!base) {
  console.error('PROFD_URL is not set');
  process.exit(2);
}
const rounds = Number(process.env.ROUNDS || 2);
const busyMs = Number(process.env.BUSY_MS || 1500);

// The busy function the test looks for in `go tool pprof -top`. Pure JS
// arithmetic in a loop, so the samples land on this frame itself.
function profdNodeBusyWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 1; i < 200000; i++) x = (x + Math.sqrt(i) * 31) % 1000003;
  }
  return x;
}

// Keeps memory alive so the heap profile has something to show.
const kept = [];
function profdNodeAllocator(n) {
  for (let i = 0; i < n; i++) kept.push(crypto.randomBytes(64).toString('hex') + String(i));
}

function profefeTime(ms) {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, ''); // 2006-01-02T15:04:05 (UTC)
}

async function push(type, buf, createdMs, round) {
  const q = new URLSearchParams({
    service: 'node-e2e', type, instance_id: `pid-${process.pid}`,
    labels: `runtime=node,round=r${round}`, created_at: profefeTime(createdMs),
  });
  const r = await fetch(`${base}/api/0/profiles?${q}`, {
    method: 'POST', body: buf, headers: { 'Content-Type': 'application/octet-stream' },
  });
  const body = await r.text();
  console.log(JSON.stringify({ type, status: r.status, body }));
  if (r.status !== 200) process.exitCode = 1;
}

pprof.heap.start(4 * 1024, 64);
const t0 = Math.floor(Date.now() / 1000) * 1000 - rounds * 10000;
for (let round = 0; round < rounds; round++) {
  pprof.time.start({ durationMillis: busyMs + 5000, intervalMicros: 1000 });
  profdNodeAllocator(20000);
  profdNodeBusyWork(busyMs);
  const wall = await pprof.encode(pprof.time.stop());
  const heap = await pprof.encode(pprof.heap.profile());
  await push('other', wall, t0 + round * 10000, round);
  await push('heap', heap, t0 + round * 10000, round);
}
pprof.heap.stop();
