// bench/ingest_under_query/load.mjs — the load of issue 20's "Must show":
// PUSHERS clients each pushing real heap profiles (testdata go-demo-series,
// or the heap-*.pb.gz of $PD_IUQ_PROFILES, cycled) to profefe's API at RATE pushes/s, while MERGERS clients merge
// every heap profile stored since the start (mode=merge over the whole run),
// back to back, for SECONDS. Reports per 10 s window the push latency
// (p50/p99/max), the longest gap between two acknowledgements (any pusher),
// merge latencies, and profd's RSS (sampled each second from /proc).
//
//   node load.mjs BASE_URL PROFD_PID [SECONDS] [PUSHERS] [MERGERS] [RATE]
// Exit 0 when push p99 < 250 ms in every window, no ack gap > 1 s, every
// push acknowledged (2xx); else 1.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const [base, pidArg, secArg = '120', pushArg = '20', mergeArg = '4', rateArg = '5'] = process.argv.slice(2);
if (!base || !pidArg) {
  console.error('usage: node load.mjs BASE_URL PROFD_PID [SECONDS] [PUSHERS] [MERGERS] [RATE]');
  process.exit(2);
}
const url = new URL(base);
const SECONDS = Number(secArg), PUSHERS = Number(pushArg), MERGERS = Number(mergeArg), RATE = Number(rateArg);
const TESTDATA = process.env.PD_TESTDATA || '/work/shared/testdata';
// PD_IUQ_PROFILES: another directory of heap-*.pb.gz (e.g. bigger profiles
// collected from a real Go program: bench/ingest_under_query/biggo/)
const dir = process.env.PD_IUQ_PROFILES || path.join(TESTDATA, 'pprof', 'go-demo-series');
const bodies = fs.readdirSync(dir).filter((f) => f.startsWith('heap-')).sort().map((f) => fs.readFileSync(path.join(dir, f)));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => { if (!xs.length) return NaN; const v = [...xs].sort((a, b) => a - b); return v[Math.min(v.length - 1, Math.floor(v.length * p))]; };
const rss = () => { try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pidArg}/status`, 'utf8'))[1]) / 1024; } catch { return NaN; } };

function request(agent, method, p, body, timeoutMs) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request({ host: url.hostname, port: url.port, method, path: p, agent,
      headers: body ? { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length } : {} }, (res) => {
      let n = 0;
      res.on('data', (c) => { n += c.length; });
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0, end: performance.now(), bytes: n }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, ms: performance.now() - t0, end: performance.now(), err: e.message }));
    if (body) req.write(body);
    req.end();
  });
}

const start = performance.now();
const startMs = Date.now();
const until = start + SECONDS * 1000;
const pushes = [], merges = [], rssSamples = [];
let stop = false;

const pusher = async (i) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let k = i;
  while (performance.now() < until) {
    const t = performance.now();
    const r = await request(agent, 'POST', `/api/0/profiles?service=bench${i}&type=heap&instance_id=pod-${i}&created_at=${new Date().toISOString()}`,
      bodies[k++ % bodies.length], 30000);
    pushes.push({ ...r, t: t - start });
    const wait = 1000 / RATE - (performance.now() - t);
    if (wait > 0) await sleep(wait);
  }
  agent.destroy();
};
const merger = async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  while (!stop) {
    const t = performance.now();
    const q = `/api/v1/query?mode=merge&query=${encodeURIComponent('heap')}&from=${(startMs - 60000) / 1000}&to=${Date.now() / 1000 + 60}&report=top&limit=20`;
    const r = await request(agent, 'GET', q, null, 300000);
    merges.push({ ...r, t: t - start });
    if (r.status !== 200) await sleep(200);
  }
  agent.destroy();
};
const sampler = setInterval(() => rssSamples.push({ t: performance.now() - start, mb: rss() }), 1000);

const all = [...Array.from({ length: PUSHERS }, (_, i) => pusher(i))];
const ms = Array.from({ length: MERGERS }, () => merger());
await Promise.all(all);
stop = true;
await Promise.all(ms);
clearInterval(sampler);

// per 10 s window
let ok = true;
console.log(`window   pushes  p50 ms  p99 ms  max ms  merges done  merge p50 s  RSS MiB`);
for (let w = 0; w * 10 < SECONDS; w++) {
  const ps = pushes.filter((p) => p.t >= w * 10000 && p.t < (w + 1) * 10000);
  const mg = merges.filter((m) => m.end - start >= w * 10000 && m.end - start < (w + 1) * 10000 && m.status === 200);
  const rs = rssSamples.filter((s) => s.t >= w * 10000 && s.t < (w + 1) * 10000);
  const p99 = pct(ps.map((p) => p.ms), 0.99);
  if (!(p99 < 250)) ok = false;
  console.log(`${String(w * 10).padStart(3)}-${String(w * 10 + 10).padEnd(4)} ${String(ps.length).padStart(7)} ${pct(ps.map((p) => p.ms), 0.5).toFixed(1).padStart(7)} ${p99.toFixed(1).padStart(7)} ${Math.max(0, ...ps.map((p) => p.ms)).toFixed(1).padStart(7)} ${String(mg.length).padStart(12)} ${(pct(mg.map((m) => m.ms), 0.5) / 1000).toFixed(2).padStart(12)} ${Math.max(0, ...rs.map((s) => s.mb)).toFixed(0).padStart(8)}`);
}
const acks = pushes.filter((p) => p.status >= 200 && p.status < 300).map((p) => p.end).sort((a, b) => a - b);
let gap = 0;
for (let i = 1; i < acks.length; i++) gap = Math.max(gap, acks[i] - acks[i - 1]);
const failed = pushes.filter((p) => !(p.status >= 200 && p.status < 300));
const okMerges = merges.filter((m) => m.status === 200);
const bytes = pushes.reduce((s, p, i) => s + bodies[i % bodies.length].length, 0);
console.log(`pushes: ${pushes.length} (${(pushes.length / SECONDS).toFixed(1)}/s, ${(bytes / SECONDS / 1e6).toFixed(2)} MB/s), failed ${failed.length}` +
  `${failed.length ? ' e.g. ' + JSON.stringify(failed[0]) : ''}; latency p50 ${pct(pushes.map((p) => p.ms), 0.5).toFixed(1)} ms, ` +
  `p99 ${pct(pushes.map((p) => p.ms), 0.99).toFixed(1)} ms, max ${Math.max(...pushes.map((p) => p.ms)).toFixed(1)} ms`);
console.log(`longest gap between two acknowledgements: ${gap.toFixed(1)} ms`);
console.log(`merges: ${merges.length} (${okMerges.length} ok, statuses ${JSON.stringify(merges.reduce((o, m) => (o[m.status] = (o[m.status] || 0) + 1, o), {}))}); ` +
  `latency p50 ${(pct(okMerges.map((m) => m.ms), 0.5) / 1000).toFixed(2)} s, p99 ${(pct(okMerges.map((m) => m.ms), 0.99) / 1000).toFixed(2)} s, ` +
  `max ${(Math.max(0, ...okMerges.map((m) => m.ms)) / 1000).toFixed(2)} s`);
console.log(`RSS: ${Math.min(...rssSamples.map((s) => s.mb)).toFixed(0)} -> max ${Math.max(...rssSamples.map((s) => s.mb)).toFixed(0)} MiB, last ${rssSamples.at(-1).mb.toFixed(0)} MiB`);
if (gap > 1000 || failed.length) ok = false;
console.log(ok ? 'PASS: push p99 < 250 ms in every window, no ack gap > 1 s, every push acknowledged'
  : 'FAIL: see the figures above (push p99 < 250 ms per window, ack gap <= 1 s, every push 2xx)');
process.exit(ok ? 0 : 1);
