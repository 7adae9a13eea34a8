// Scraping a fleet into ClickHouse (issue 35, helper scrapebatch): how many
// scrapes a second profd stores against the rate its configuration asks
// for, embedded store vs ClickHouse, for one or more profd binaries (e.g.
// main and a branch) in one run. Run by hand (not in ctest):
//
//   PROFD_BINS="main=/tmp/main/build/profd,branch=build/profd" node bench/scrape_clickhouse/bench.mjs
//     env: TARGETS=200 INTERVAL_S=3 (200 heap targets every 3 s: 66.7
//          scrapes/s, the rate of 1,000 targets at 15 s)
//          WARM_S=10 MEASURE_S=60 (figures over MEASURE_S after WARM_S)
//          FLUSH=100ms (--clickhouse.flush-interval)
//          BACKENDS=embedded,clickhouse
//
// The targets: one node HTTP listener per target on a free loopback port,
// each serving at /debug/pprof/heap the real Go heap profiles of
// /work/shared/testdata/pprof/go-demo-series in turn (one per request).
// Each request's arrival is recorded: lateness = arrival minus the
// target's schedule (its phase: the earliest arrival - k x interval), as
// bench/fleet/loadgen.mjs measures it. From profd's /metrics over the
// measured window: profiles stored (profd_ingested_profiles_total{source=
// "scrape"}), outcomes, profd_scrape_duration_seconds_total (mean per
// scrape), slots missed, ClickHouse batches, and where the binary has them
// profd_scrape_store_batches_total / _seconds_total; profd's CPU (utime +
// stime) per stored profile.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { TESTDATA, http as get, killAll, startProfd, tempDir, sleep } from '../../tests/e2e/lib.mjs';
import { CH_BIN, chPorts, startClickHouse } from '../../tests/e2e/ch.mjs';

const N = Number(process.env.TARGETS || 200);
const IV = Number(process.env.INTERVAL_S || 3) * 1000;
const WARM = Number(process.env.WARM_S || 10) * 1000;
const MEASURE = Number(process.env.MEASURE_S || 60) * 1000;
const FLUSH = process.env.FLUSH || '100ms';
const BACKENDS = (process.env.BACKENDS || 'embedded,clickhouse').split(',');
const BINS = (process.env.PROFD_BINS || `branch=${process.env.PROFD_BIN || 'build/profd'}`)
  .split(',').map((kv) => { const [name, bin] = kv.split('='); return { name, bin: path.resolve(bin) }; });
const dir = tempDir('pd-chscrape-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

// ---- the targets
const gd = path.join(TESTDATA, 'pprof', 'go-demo-series');
const bodies = fs.readdirSync(gd).filter((f) => f.startsWith('heap-')).sort().map((f) => fs.readFileSync(path.join(gd, f)));
const arrivals = []; // per target: [ms...]
const servers = [];
for (let i = 0; i < N; i++) {
  const a = (arrivals[i] = []);
  let k = i;
  const srv = http.createServer({ keepAlive: true }, (req, res) => {
    if (req.url !== '/debug/pprof/heap') { res.writeHead(404); res.end(); return; }
    a.push(Date.now());
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    res.end(bodies[k++ % bodies.length]);
  });
  srv.keepAliveTimeout = 60000;
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
}
const ports = servers.map((s) => s.address().port);
const off = '{enabled: false}';
const cfg = path.join(dir, 'profd.yaml');
fs.writeFileSync(cfg, `global: {scrape_interval: ${IV / 1000}s, scrape_timeout: ${IV / 1000}s}
scrape_configs:
  - job_name: fleet
    profiling_config:
      pprof_config: {allocs: ${off}, block: ${off}, goroutine: ${off}, mutex: ${off}, threadcreate: ${off}, cpu: ${off}}
    static_configs:
      - targets: [${ports.map((p) => `'127.0.0.1:${p}'`).join(', ')}]
`);

// ---- figures
function cpuSec(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}
async function metrics(p) {
  const r = await get(`${p.base}/metrics`);
  assert.equal(r.status, 200);
  return r.text;
}
// sum of the family's samples whose labels contain every `has` string; NaN
// when the binary does not have the family
function sum(text, family, ...has) {
  let v = 0, seen = text.includes(`# TYPE ${family} `);
  for (const line of text.split('\n')) {
    if (!line.startsWith(family + '{') && !line.startsWith(family + ' ')) continue;
    if (!has.every((h) => line.includes(h))) continue;
    v += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return seen ? v : NaN;
}
const pct = (v, p) => (v.length ? v[Math.min(v.length - 1, Math.floor(p * v.length))] : NaN);
function lateness(from, to) {
  const late = [];
  for (const a0 of arrivals) {
    const a = a0.filter((t) => t >= from && t <= to);
    if (!a.length) continue;
    let phase = Infinity;
    for (const t of a) phase = Math.min(phase, t - Math.round((t - a[0]) / IV) * IV);
    for (const t of a) late.push(t - phase - Math.round((t - phase) / IV) * IV);
  }
  return late.sort((x, y) => x - y);
}
const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');

async function run(bin, backend, ch) {
  const name = `${bin.name}-${backend}`;
  process.env.PROFD_BIN = bin.bin;
  const extra = ['--log.level=warn'];
  if (backend === 'clickhouse') extra.push('--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`,
    `--clickhouse.database=scrape_${bin.name.replace(/\W/g, '')}`, `--clickhouse.flush-interval=${FLUSH}`);
  const p = await startProfd({ storage: path.join(dir, name), config: cfg, name, extraArgs: extra });
  await sleep(WARM);
  const m0 = await metrics(p), c0 = cpuSec(p.pid), t0 = Date.now(), l0 = load();
  await sleep(MEASURE);
  const m1 = await metrics(p), c1 = cpuSec(p.pid), t1 = Date.now(), l1 = load();
  await p.stop();
  const d = (f, ...h) => sum(m1, f, ...h) - sum(m0, f, ...h);
  const secs = (t1 - t0) / 1000;
  const stored = d('profd_ingested_profiles_total', 'source="scrape"');
  const scrapes = d('profd_scrapes_total');
  const late = lateness(t0, t1);
  return {
    name, backend, bin: bin.name, load: `${l0} → ${l1}`,
    stored_per_s: stored / secs, asked_per_s: (N * 1000) / IV,
    outcomes: Object.fromEntries(['success', 'duplicate', 'timeout', 'error', 'out_of_bounds']
      .map((o) => [o, d('profd_scrapes_total', `outcome="${o}"`)]).filter(([, v]) => v)),
    dur_ms: (d('profd_scrape_duration_seconds_total') / scrapes) * 1000,
    missed: d('profd_scrape_slots_missed_total'),
    late_p50: pct(late, 0.5), late_p99: pct(late, 0.99), late_max: late[late.length - 1],
    ch_batches: d('profd_clickhouse_batches_total'),
    store_calls: d('profd_scrape_store_batches_total'),
    store_s: d('profd_scrape_store_seconds_total'),
    cpu_ms: ((c1 - c0) * 1000) / stored,
  };
}

console.error(`load before: ${load()}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
let ch = null;
if (BACKENDS.includes('clickhouse')) {
  if (!CH_BIN) throw new Error('clickhouse-server is not installed (scripts/install-deps.sh --test)');
  ch = await startClickHouse(dir, 'ch', await chPorts());
}
const out = [];
for (const backend of BACKENDS) {
  for (const bin of BINS) {
    const r = await run(bin, backend, ch);
    console.error(JSON.stringify(r));
    out.push(r);
  }
}
await killAll();
for (const s of servers) s.close();
const f = (x, k = 1) => (Number.isFinite(x) ? x.toFixed(k) : '—');
console.log(`\n${N} targets x heap every ${IV / 1000} s (${f((N * 1000) / IV)} scrapes/s asked), ${MEASURE / 1000} s measured after ${WARM / 1000} s, ClickHouse flush interval ${FLUSH}\n`);
console.log('| profd | backend | stored/s (asked) | outcomes | mean scrape duration ms | slots missed | lateness p50 / p99 / max ms | ClickHouse batches | store calls (s in them) | profd CPU ms/profile | load 1/5/15 |');
console.log('|---|---|---|---|---:|---:|---|---:|---|---:|---|');
for (const r of out) {
  console.log(`| ${r.bin} | ${r.backend} | ${f(r.stored_per_s)} (${f(r.asked_per_s)}) | ${Object.entries(r.outcomes).map(([k, v]) => `${k} ${v}`).join(', ')} | ${f(r.dur_ms)} | ${f(r.missed, 0)} | ${f(r.late_p50, 0)} / ${f(r.late_p99, 0)} / ${f(r.late_max, 0)} | ${f(r.ch_batches, 0)} | ${f(r.store_calls, 0)} (${f(r.store_s)}) | ${f(r.cpu_ms, 2)} | ${r.load} |`);
}
process.exit(0);
