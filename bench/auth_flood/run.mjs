// Bench (issue 28): a logged-in user's query latency while 8 clients send
// wrong passwords (each a new one: a bcrypt every time), against the same
// user alone. profd runs with --web.config.file holding one bcrypt cost-10
// user. Prints p50/p99 of the valid user's GET /api/v1/labels (its
// credentials cached after the first request) without and with the flood,
// the ratio of the p99s, and the flooders' answers by status (401, 429).
//
//   PROFD_BIN=build/profd node bench/auth_flood/run.mjs [seconds=10]
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const secs = Number(process.argv[2] || 10);
const bin = process.env.PROFD_BIN || 'build/profd';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pd-authflood-'));
const hash = execFileSync('python3', ['-c',
  "import crypt; print(crypt.crypt('pw', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))"]).toString().trim();
fs.writeFileSync(path.join(dir, 'web.yml'), `basic_auth_users:\n  alice: '${hash}'\n`);
const port = await new Promise((r) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)); }); });
const profd = spawn(bin, ['serve', `--storage.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`,
  `--web.config.file=${dir}/web.yml`], { stdio: 'ignore' });
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const req = (auth) => new Promise((resolve) => {
  const t0 = process.hrtime.bigint();
  const r = http.get({ host: '127.0.0.1', port, path: '/api/v1/labels', agent,
    headers: { Authorization: 'Basic ' + Buffer.from(auth).toString('base64') } }, (res) => {
    res.resume();
    res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
  });
  r.on('error', () => resolve({ status: 0, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
});
for (let i = 0; i < 100; i++) { if ((await req('alice:pw')).status === 200) break; await new Promise((r) => setTimeout(r, 100)); }
const pct = (v, p) => v.slice().sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(v.length * p))];
async function user(ms) {
  const lat = [];
  const end = Date.now() + ms;
  while (Date.now() < end) { const r = await req('alice:pw'); if (r.status === 200) lat.push(r.ms); }
  return lat;
}
const alone = await user(secs * 1000);
let stop = false, n = 0;
const statuses = {};
const flooder = async (k) => {
  while (!stop) {
    const r = await req(`alice:wrong-${k}-${n++}`);
    statuses[r.status] = (statuses[r.status] || 0) + 1;
    if (r.status === 429) await new Promise((res) => setTimeout(res, 1)); // a client hammering
  }
};
const floods = Array.from({ length: 8 }, (_, k) => flooder(k));
const flooded = await user(secs * 1000);
stop = true;
await Promise.all(floods);
profd.kill('SIGTERM');
agent.destroy();
const f = (v) => `p50 ${pct(v, 0.5).toFixed(2)} ms, p99 ${pct(v, 0.99).toFixed(2)} ms (${v.length} requests)`;
console.log(`alone:          ${f(alone)}`);
console.log(`8 flooders:     ${f(flooded)}`);
console.log(`p99 ratio:      ${(pct(flooded, 0.99) / pct(alone, 0.99)).toFixed(2)}`);
console.log(`flooders' answers: ${JSON.stringify(statuses)}; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
fs.rmSync(dir, { recursive: true, force: true });
