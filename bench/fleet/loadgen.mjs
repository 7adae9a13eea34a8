// bench/fleet/loadgen.mjs — the fleet of bench/fleet/run.sh: N pprof targets
// in one node process, each an HTTP listener on 127.0.0.1:BASE+i serving the
// real profiles of /work/shared/testdata/pprof/go-demo-once (recorded from
// Go's net/http/pprof) at Go's paths. /debug/pprof/profile?seconds=S answers
// after S seconds, as Go's CPU profiler does.
//
//   node loadgen.mjs TESTDATA_DIR BASE_PORT N CONTROL_PORT
//
// Every request's arrival time is recorded per (port, path). The control
// listener (127.0.0.1:CONTROL_PORT) answers GET /stats?from=MS&to=MS with
// the figures of run.sh over the arrivals in [from, to] (Date.now() ms):
//   series       (target, type) pairs that were asked at least once
//   scrapes      arrivals in the window
//   missed       slots with no arrival: per series, every gap between two
//                arrivals over 1.5 intervals counts round(gap/interval) - 1,
//                plus the slots after a series' last arrival and before its
//                first one in the window, plus series never asked at all
//                (expected N x types); missed_by_type splits them by path
//   late_p50/p99/max_ms  lateness against the schedule: per series the
//                schedule is phase + k*interval, the phase its earliest
//                arrival minus k*interval; lateness = arrival - slot
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const [dir, baseS, nS, ctlS, ivS] = process.argv.slice(2);
const BASE = Number(baseS), N = Number(nS), CTL = Number(ctlS);
const IV = Number(ivS || 10000);
const TYPES = ['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate', 'profile'];
const bodies = {};
for (const t of TYPES) bodies[`/debug/pprof/${t}`] = fs.readFileSync(path.join(dir, `${t}.pb.gz`));

const arrivals = new Map(); // "port path" -> [ms...]
function handler(port) {
  return (req, res) => {
    const now = Date.now();
    const u = new URL(req.url, 'http://x');
    const body = bodies[u.pathname];
    if (!body) { res.writeHead(404); res.end('404 page not found\n'); return; }
    const key = `${port} ${u.pathname}`;
    let a = arrivals.get(key);
    if (!a) arrivals.set(key, (a = []));
    a.push(now);
    const send = () => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream',
        'Content-Disposition': `attachment; filename="${u.pathname.slice(13)}"` });
      res.end(body);
    };
    const s = Number(u.searchParams.get('seconds') || 0);
    if (u.pathname === '/debug/pprof/profile' && s > 0) {
      const t = setTimeout(send, s * 1000);
      req.on('close', () => clearTimeout(t));
    } else send();
  };
}

let up = 0;
for (let i = 0; i < N; i++) {
  const port = BASE + i;
  const srv = http.createServer({ keepAlive: true }, handler(port));
  srv.keepAliveTimeout = 60000;
  srv.listen(port, '127.0.0.1', () => { if (++up === N) console.log(`loadgen: ${N} targets on 127.0.0.1:${BASE}-${BASE + N - 1}`); });
  srv.on('error', (e) => { console.error(`loadgen: port ${port}: ${e.message}`); process.exit(1); });
}

function pct(v, p) {
  if (!v.length) return 0;
  return v[Math.min(v.length - 1, Math.floor(p * v.length))];
}
function stats(from, to) {
  const late = [];
  let scrapes = 0, missed = 0, series = 0;
  const byType = {};
  for (const [key, a0] of arrivals) {
    const a = a0.filter((t) => t >= from && t <= to);
    const before = missed;
    const type = key.split('/').pop();
    if (!a.length) { missed += Math.floor((to - from) / IV); byType[type] = (byType[type] || 0) + missed - before; continue; }
    series++;
    scrapes += a.length;
    let phase = Infinity;
    for (let k = 0; k < a.length; k++) {
      const slots = Math.round((a[k] - a[0]) / IV);
      phase = Math.min(phase, a[k] - slots * IV);
    }
    for (let k = 0; k < a.length; k++) {
      const slot = Math.round((a[k] - phase) / IV);
      late.push(a[k] - phase - slot * IV);
      if (k > 0) {
        const gap = a[k] - a[k - 1];
        if (gap > 1.5 * IV) missed += Math.round(gap / IV) - 1;
      }
    }
    missed += Math.max(0, Math.floor((to - a[a.length - 1]) / IV - 0.5));
    missed += Math.max(0, Math.floor((a[0] - from) / IV - 0.5));
    if (missed > before) byType[type] = (byType[type] || 0) + missed - before;
  }
  missed += (N * TYPES.length - arrivals.size) * Math.floor((to - from) / IV);
  late.sort((x, y) => x - y);
  return { series, scrapes, missed, late_p50_ms: pct(late, 0.5), late_p99_ms: pct(late, 0.99),
    late_max_ms: late.length ? late[late.length - 1] : 0, missed_by_type: byType };
}

http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname !== '/stats') { res.writeHead(404); res.end(); return; }
  const s = stats(Number(u.searchParams.get('from') || 0), Number(u.searchParams.get('to') || Date.now()));
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(s) + '\n');
}).listen(CTL, '127.0.0.1');
