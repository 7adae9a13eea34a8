// A well-behaved health prober in a process of its own (hostile.test.mjs):
// GET /-/healthy on a fresh connection every INTERVAL ms for DURATION ms and
// print one JSON line {ms: [...], bad: [...]}. Apart from the attackers'
// process so its latencies are profd's, not a shared event loop's.
//   node health_probe.mjs PORT DURATION_MS INTERVAL_MS
import http from 'node:http';

const [port, duration, interval] = process.argv.slice(2).map(Number);
const ms = [], bad = [];
const until = performance.now() + duration;
const probe = () => new Promise((resolve) => {
  const t0 = performance.now();
  const req = http.get({ host: '127.0.0.1', port, path: '/-/healthy', agent: false }, (res) => {
    res.resume();
    res.on('end', () => { ms.push(performance.now() - t0); if (res.statusCode !== 200) bad.push(res.statusCode); resolve(); });
  });
  req.setTimeout(60000, () => req.destroy(new Error('client timeout'))); // a hang guard only
  req.on('error', (e) => { ms.push(performance.now() - t0); bad.push(e.message); resolve(); });
});
while (performance.now() < until) {
  const t = performance.now();
  await probe();
  const wait = interval - (performance.now() - t);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
process.stdout.write(JSON.stringify({ ms, bad }) + '\n');
