// ClickHouse backend vs the embedded TSDB, side by side (issue 16), run by
// hand (not in ctest):
//
//   PROFD_BIN=build/profd node bench/clickhouse/bench.mjs
//     env: SERIES=1000 CLIENTS=8 RUNS=5 PORT0=19440 (ports PORT0..PORT0+9,
//          loopback; the two ClickHouse servers and three profd processes)
//          WEB_THREADS=32 (--web.threads of every profd: the pushes in
//          flight, hence the largest insert batch)
//          STEADY="16,64,256" (the steady-state curve's concurrent pushers;
//          "" skips it), STEADY_SERIES=256 STEADY_K=8 (S series x K profiles
//          each, pushed round by round 10 s apart; round 0 warms up — every
//          series and stack new — and is not counted)
//          STEADY_STEP_MS=10000 (the rounds' spacing in the profiles'
//          timestamps; 60000 with K=64 spreads them over an hour, so the
//          merges cover whole aggs_v1 buckets: issue 35 item 4)
//          CLUSTER=1 (also the 2-shard Distributed run of the one-shot shape)
//          PROFD_ARGS="..." (extra flags of the ClickHouse profd, e.g.
//          --clickhouse.batch-wait=5ms)
//
// Data: SERIES series heap{job="bench", instance="sNNNN"} with one real heap
// profile each (the 30 of shared testdata go-demo-series cycled), pushed
// through profefe's API by CLIENTS concurrent clients. Measured, each on
// (a) profd on the embedded TSDB, (b) profd on one ClickHouse server,
// (c) profd on a Distributed table over two ClickHouse shards (ingest only):
//   - ingest: profiles/s and push latency p50/p99 (each push acknowledged);
//   - merge of all SERIES profiles (report=proto over HTTP), median of RUNS;
//   - query_range over all SERIES series, median of RUNS;
//   - bytes per profile: ClickHouse = its tables' active parts after
//     OPTIMIZE FINAL (system.parts.bytes_on_disk), by table; embedded = the
//     block `profd tsdb import` writes for the same files; conprof = the raw
//     (gunzipped) profiles in consecutive groups of 12, each `zstd -3`.
// The answers of (a) and (b) are compared (query_range totals equal, merge
// totals equal) so a fast wrong answer does not count.
//
// Steady state (STEADY): what a fleet does — each series pushes every 10-60 s,
// so after the first round its series and most stacks are known. For each
// concurrency C in STEADY: a fresh embedded profd and a fresh ClickHouse
// database; round 0 of all S series (warm-up), then rounds 1..K-1 measured:
// CPU per profile of profd and of clickhouse-server (/proc/PID/stat) over the
// measured rounds plus ClickHouse's background merges they caused (until
// system.merges is empty, at most 60 s); per statement kind, from
// system.query_log: count, summed query_duration_ms, rows read/written; from
// system.part_log: parts written (NewPart) and merges (MergeParts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Proc, TESTDATA, http, killAll, qs, startProfd, tempDir, waitFor } from '../../tests/e2e/lib.mjs';

const SERIES = Number(process.env.SERIES || 1000);
const CLIENTS = Number(process.env.CLIENTS || 8);
const RUNS = Number(process.env.RUNS || 5);
const PORT0 = Number(process.env.PORT0 || 19440);
const WT = `--web.threads=${Number(process.env.WEB_THREADS || 32)}`;
const STEADY = (process.env.STEADY ?? '16,64,256').split(',').filter(Boolean).map(Number);
const S = Number(process.env.STEADY_SERIES || 256);
const K = Number(process.env.STEADY_K || 8);
const PROFD_ARGS = (process.env.PROFD_ARGS || '').split(' ').filter(Boolean);
const CH_BIN = '/usr/sbin/clickhouse-server';
const dir = tempDir('pd-chbench-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

const files = fs.readdirSync(path.join(TESTDATA, 'pprof', 'go-demo-series')).filter((f) => f.startsWith('heap-')).sort()
  .map((f) => path.join(TESTDATA, 'pprof', 'go-demo-series', f));
const bodies = files.map((f) => fs.readFileSync(f));
const NOW = Date.now();
const T0 = NOW - 1800 * 1000;
const items = Array.from({ length: SERIES }, (_, k) => ({
  k, body: bodies[k % bodies.length], file: files[k % files.length],
  instance: `s${String(k).padStart(4, '0')}`, at: T0 + k * 1000,
}));

async function startCH(name, http_, tcp, inter, shards) {
  const d = path.join(dir, name);
  fs.mkdirSync(d, { recursive: true });
  const remote = shards.map((p) => `<shard><replica><host>127.0.0.1</host><port>${p}</port></replica></shard>`).join('');
  fs.writeFileSync(path.join(d, 'config.xml'), `<?xml version="1.0"?><yandex>
<logger><level>warning</level><log>${d}/server.log</log><errorlog>${d}/err.log</errorlog><size>10M</size><count>1</count></logger>
<http_port>${http_}</http_port><tcp_port>${tcp}</tcp_port><interserver_http_port>${inter}</interserver_http_port>
<listen_host>127.0.0.1</listen_host><path>${d}/data/</path><tmp_path>${d}/tmp/</tmp_path>
<user_files_path>${d}/uf/</user_files_path><format_schema_path>${d}/fs/</format_schema_path>
<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</uncompressed_cache_size>
<users_config>${d}/users.xml</users_config><default_profile>default</default_profile><default_database>default</default_database>
<timezone>UTC</timezone>
<query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></query_log>
<part_log><database>system</database><table>part_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></part_log>
<remote_servers><pd2>${remote}</pd2></remote_servers></yandex>`);
  fs.writeFileSync(path.join(d, 'users.xml'), `<?xml version="1.0"?><yandex><profiles><default><log_queries>1</log_queries></default></profiles><users><default>
<password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default/></quotas></yandex>`);
  const p = new Proc(name, 'nice', [CH_BIN, `--config-file=${d}/config.xml`], { cwd: d });
  p.url = `http://127.0.0.1:${http_}`;
  await waitFor(name, async () => (await http(`${p.url}/?query=SELECT%201`, { timeoutMs: 2000 }).catch(() => ({}))).status === 200, 60000);
  return p;
}

async function chq(server, sql) {
  const r = await http(`${server.url}/`, { method: 'POST', body: sql, timeoutMs: 600000 });
  if (r.status !== 200) throw new Error(`${sql}: ${r.text}`);
  return r.text.trim();
}

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const median = (v) => pct(v, 0.5);

// CPU seconds (user + system) a process has used so far (/proc/PID/stat, clock ticks of 1/100 s)
function cpuSec(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function ingest(profd, servers = [], list = items, clients = CLIENTS) {
  const pids = { profd: profd.child.pid, ch: servers.map((s) => s.child.pid) };
  const cpu0 = { profd: cpuSec(pids.profd), ch: pids.ch.map(cpuSec) };
  const lat = [];
  let next = 0, retries = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < list.length) {
      const it = list[next++];
      const s = performance.now();
      const url = `${profd.base}/api/0/profiles?` + qs({ service: it.service || 'bench', type: 'heap', instance_id: it.instance, created_at: new Date(it.at).toISOString() });
      // a kept-alive connection closed by profd, or a 503 (too many request
      // bodies at once: 256 pushers), is not stored: sent again (counted)
      let r;
      for (let a = 0; ; a++) {
        r = await http(url, { method: 'POST', body: it.body, timeoutMs: 120000 })
          .catch((e) => { if (e.cause?.code !== 'UND_ERR_SOCKET' || a >= 20) throw e; return { status: 0 }; });
        if ((r.status !== 0 && r.status !== 503) || a >= 20) break;
        retries++;
        await new Promise((res) => setTimeout(res, 20));
      }
      assert.equal(r.status, 200, r.text);
      lat.push(performance.now() - s);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const cpuP = (cpuSec(pids.profd) - cpu0.profd) / list.length * 1000;
  const cpuC = pids.ch.reduce((a, pid, i) => a + cpuSec(pid) - cpu0.ch[i], 0) / list.length * 1000;
  return { rate: list.length / wall, p50: pct(lat, 0.5), p99: pct(lat, 0.99), wall, cpuP, cpuC, retries };
}

const FROM = (T0 - 60000) / 1000;
const TO = (NOW + 1000) / 1000;
async function timed(profd, q) {
  const ms = [];
  let last;
  for (let i = 0; i < RUNS; i++) {
    const s = performance.now();
    last = await http(profd.base + q, { timeoutMs: 600000 });
    assert.equal(last.status, 200, last.text.slice(0, 300));
    ms.push(performance.now() - s);
  }
  return { ms: median(ms), last };
}

async function queries(profd) {
  const merge = await timed(profd, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="bench"}', from: FROM, to: TO, report: 'top', limit: 5 }));
  const mergeProto = await timed(profd, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="bench"}', from: FROM, to: TO, report: 'proto' }));
  const range = await timed(profd, '/api/v1/query_range?' + qs({ query: 'heap{service="bench"}', from: FROM, to: TO }));
  const series = range.last.json.data.length;
  const totals = range.last.json.data.map((s) => s.totals[0]);
  return { merge: merge.ms, mergeTotal: merge.last.json.data.total, mergeProto: mergeProto.ms, range: range.ms, series, totals };
}

const P = (i) => PORT0 + i;
const out = {};
console.error(`load before: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);

// (a) embedded
const tsdb = await startProfd({ storage: path.join(dir, 'tsdb'), port: P(0), name: 'profd-tsdb', extraArgs: [WT] });
out.tsdb = { ingest: await ingest(tsdb), ...(await queries(tsdb)) };
await tsdb.stop();

// (b) one ClickHouse server
const ch1 = await startCH('ch1', P(1), P(2), P(3), [P(2), P(6)]);
const chp = await startProfd({ storage: path.join(dir, 'x'), port: P(4), name: 'profd-ch',
  extraArgs: [WT, '--storage.backend=clickhouse', `--clickhouse.url=${ch1.url}`, '--clickhouse.database=bench', ...PROFD_ARGS] });
out.ch = { ingest: await ingest(chp, [ch1]), ...(await queries(chp)) };
assert.deepEqual(out.ch.totals, out.tsdb.totals, 'query_range totals equal');
assert.equal(out.ch.mergeTotal, out.tsdb.mergeTotal, 'merge totals equal');
await chp.stop();
const tables = {};
// schema v3 (issue 35) writes *_v3 tables; an older profd the plain names
const sfx = Number(await chq(ch1, "SELECT count() FROM system.tables WHERE database='bench' AND name='profiles_v3'")) ? '_v3' : '';
for (const t of ['profiles', 'samples', 'stacks', 'series', 'series_index']) {
  await chq(ch1, `OPTIMIZE TABLE bench.${t}${sfx} FINAL`);
  tables[t] = Number(await chq(ch1, `SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database='bench' AND table='${t}${sfx}'`));
}
const body = Number(await chq(ch1, `SELECT sum(length(body)) FROM bench.profiles${sfx}`));
out.chBytes = { tables, body };

// (c) two shards, Distributed: ingest
if (process.env.CLUSTER) {
  const ch2 = await startCH('ch2', P(5), P(6), P(7), [P(2), P(6)]);
  const clu = await startProfd({ storage: path.join(dir, 'y'), port: P(8), name: 'profd-clu',
    extraArgs: [WT, '--storage.backend=clickhouse', `--clickhouse.url=${ch1.url}`, `--clickhouse.url=${ch2.url}`, '--clickhouse.database=benchclu', '--clickhouse.cluster=pd2', ...PROFD_ARGS] });
  out.cluster = { ingest: await ingest(clu, [ch1, ch2]), ...(await queries(clu)) };
  assert.deepEqual(out.cluster.totals, out.tsdb.totals, 'query_range totals equal (cluster)');
  await clu.stop();
  await ch2.stop();
}


// Steady state: S series x K profiles, round by round, at each concurrency
const STEP = Number(process.env.STEADY_STEP_MS || 10000);
const ST0 = NOW - (K * STEP + 120 * 1000);
const rounds = Array.from({ length: K }, (_, j) => Array.from({ length: S }, (_, k) => ({
  k, service: 'steady', body: bodies[(k + j) % bodies.length], instance: `s${String(k).padStart(4, '0')}`, at: ST0 + j * STEP + k,
})));
const SFROM = (ST0 - 60000) / 1000;
async function steadyRun(profd, servers, clients) {
  const chNow = servers.length ? await chq(servers[0], 'SELECT toString(now())') : null;
  const pids = { profd: profd.child.pid, ch: servers.map((s) => s.child.pid) };
  await ingest(profd, servers, rounds[0], clients); // warm-up: every series new
  await new Promise((r) => setTimeout(r, 1100)); // query_log's event_time is in seconds
  const t1 = servers.length ? await chq(servers[0], 'SELECT toString(now())') : null;
  const cpu0 = { profd: cpuSec(pids.profd), ch: pids.ch.map(cpuSec) };
  const lat = [];
  let wall = 0, retries = 0;
  for (let j = 1; j < K; j++) {
    const r = await ingest(profd, servers, rounds[j], clients);
    wall += r.wall;
    retries += r.retries;
    lat.push(r.p50);
  }
  const n = S * (K - 1);
  const res = { retries, rate: n / wall, p50: median(lat), cpuP: (cpuSec(pids.profd) - cpu0.profd) / n * 1000 };
  if (!servers.length) return res;
  res.cpuC = pids.ch.reduce((a, pid, i) => a + cpuSec(pid) - cpu0.ch[i], 0) / n * 1000;
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline && Number(await chq(servers[0], 'SELECT count() FROM system.merges')) > 0) await new Promise((r) => setTimeout(r, 500));
  res.cpuCM = pids.ch.reduce((a, pid, i) => a + cpuSec(pid) - cpu0.ch[i], 0) / n * 1000;
  await chq(servers[0], 'SYSTEM FLUSH LOGS');
  res.stmts = await chq(servers[0], `SELECT concat(substring(query, 1, 6), ' ', extract(query, '(?:INTO|FROM) ([a-zA-Z_0-9.]+)')) AS kind, count(), sum(query_duration_ms), sum(read_rows), sum(written_rows) FROM system.query_log WHERE type = 2 AND event_time >= '${t1}' AND query NOT LIKE '%system.%' GROUP BY kind ORDER BY kind FORMAT TSV`);
  res.parts = await chq(servers[0], `SELECT table, countIf(event_type = 'NEW_PART'), countIf(event_type = 'MERGE_PARTS') FROM system.part_log WHERE event_time >= '${t1}' AND database = 'st${clients}' GROUP BY table ORDER BY table FORMAT TSV`);
  void chNow;
  return res;
}
out.steady = [];
for (const C of STEADY) {
  const wt = `--web.threads=${Math.min(256, Math.max(32, C))}`;
  const e = await startProfd({ storage: path.join(dir, `st-tsdb-${C}`), port: P(0), name: 'profd-st-tsdb', extraArgs: [wt] });
  const a = await steadyRun(e, [], C);
  const qa = C === STEADY[0] ? await steadyQueries(e) : null;
  await e.stop();
  const p = await startProfd({ storage: path.join(dir, `st-x-${C}`), port: P(4), name: 'profd-st-ch',
    extraArgs: [wt, '--storage.backend=clickhouse', `--clickhouse.url=${ch1.url}`, `--clickhouse.database=st${C}`, ...PROFD_ARGS] });
  const b = await steadyRun(p, [ch1], C);
  const qb = C === STEADY[0] ? await steadyQueries(p) : null;
  if (qa) {
    assert.deepEqual(qb.totals, qa.totals, 'steady: query_range totals equal');
    assert.equal(qb.mergeTotal, qa.mergeTotal, 'steady: merge totals equal');
  }
  await p.stop();
  out.steady.push({ C, tsdb: a, ch: b, qa, qb });
}
async function steadyQueries(profd) {
  const merge = await timed(profd, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="steady"}', from: SFROM, to: TO, report: 'top', limit: 5 }));
  const mergeProto = await timed(profd, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="steady"}', from: SFROM, to: TO, report: 'proto' }));
  const one = await timed(profd, '/api/v1/query?' + qs({ mode: 'merge', query: 'heap{service="steady",instance_id="s0000"}', from: SFROM, to: TO, report: 'top', limit: 5 }));
  const range = await timed(profd, '/api/v1/query_range?' + qs({ query: 'heap{service="steady"}', from: SFROM, to: TO }));
  return { merge: merge.ms, mergeTotal: merge.last.json.data.total, mergeProto: mergeProto.ms, one: one.ms, range: range.ms, totals: range.last.json.data.map((x) => x.totals[0]) };
}

// embedded block and conprof groups of the same files
const blk = path.join(dir, 'blk');
const imp = path.join(dir, 'imp');
fs.mkdirSync(imp);
items.forEach((it, i) => fs.copyFileSync(it.file, path.join(imp, `p${String(i).padStart(5, '0')}.pb.gz`)));
execFileSync(process.env.PROFD_BIN, ['tsdb', 'import', '--storage.path', blk, '--storage.retention.time=10000d', '--label', 'job=bench', imp], { stdio: 'ignore' });
let blockBytes = 0;
for (const e of fs.readdirSync(blk, { withFileTypes: true })) {
  if (e.isDirectory() && /^[0-9A-Z]{26}$/.test(e.name)) {
    blockBytes += Number(execFileSync('du', ['-sb', path.join(blk, e.name)]).toString().split('\t')[0]);
  }
}
let conprof = 0;
const zlib = await import('node:zlib');
for (let i = 0; i < items.length; i += 12) {
  const raw = Buffer.concat(items.slice(i, i + 12).map((it) => zlib.gunzipSync(it.body)));
  conprof += execFileSync('zstd', ['-3', '-c', '-q'], { input: raw, maxBuffer: 1 << 30 }).length;
}
const gz = items.reduce((s, it) => s + it.body.length, 0);
out.sizes = { gz: gz / SERIES, conprof: conprof / SERIES, block: blockBytes / SERIES };
console.error(`load after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);

const f = (x, d = 1) => x.toFixed(d);
console.log(`\n${SERIES} series x 1 real heap profile, ${CLIENTS} push clients, ${WT}, medians of ${RUNS}\n`);
if (!out.cluster) out.cluster = { ingest: { rate: NaN, cpuP: NaN, cpuC: NaN, p50: NaN, p99: NaN }, merge: NaN, mergeProto: NaN, range: NaN };
console.log('| | embedded TSDB | ClickHouse, 1 server | ClickHouse, 2 shards (Distributed) |');
console.log('|---|---:|---:|---:|');
console.log(`| ingest, profiles/s | ${f(out.tsdb.ingest.rate)} | ${f(out.ch.ingest.rate)} | ${f(out.cluster.ingest.rate)} |`);
console.log(`| CPU ms per ingested profile, profd + ClickHouse | ${f(out.tsdb.ingest.cpuP)} | ${f(out.ch.ingest.cpuP)} + ${f(out.ch.ingest.cpuC)} | ${f(out.cluster.ingest.cpuP)} + ${f(out.cluster.ingest.cpuC)} |`);
console.log(`| push latency p50 / p99, ms | ${f(out.tsdb.ingest.p50)} / ${f(out.tsdb.ingest.p99)} | ${f(out.ch.ingest.p50)} / ${f(out.ch.ingest.p99)} | ${f(out.cluster.ingest.p50)} / ${f(out.cluster.ingest.p99)} |`);
console.log(`| merge of ${SERIES} profiles, report=top, ms | ${f(out.tsdb.merge, 0)} | ${f(out.ch.merge, 0)} | ${f(out.cluster.merge, 0)} |`);
console.log(`| merge of ${SERIES} profiles, report=proto, ms | ${f(out.tsdb.mergeProto, 0)} | ${f(out.ch.mergeProto, 0)} | ${f(out.cluster.mergeProto, 0)} |`);
console.log(`| query_range over ${out.tsdb.series} series, ms | ${f(out.tsdb.range, 0)} | ${f(out.ch.range, 0)} | ${f(out.cluster.range, 0)} |`);
console.log('\nBytes per profile (same files):\n');
console.log('| gzip as served | conprof (zstd -3, groups of 12) | embedded block | ClickHouse total | of which: profiles (body + totals) | samples | stacks | series + index |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|');
const t = out.chBytes.tables;
const tot = Object.values(t).reduce((a, b) => a + b, 0);
console.log(`| ${f(out.sizes.gz, 0)} | ${f(out.sizes.conprof, 0)} | ${f(out.sizes.block)} | ${f(tot / SERIES, 0)} | ${f(t.profiles / SERIES, 0)} | ${f(t.samples / SERIES, 0)} | ${f(t.stacks / SERIES, 0)} | ${f((t.series + t.series_index) / SERIES, 0)} |`);
console.log(`\n(ClickHouse profiles.body holds ${f(out.chBytes.body / SERIES, 0)} B/p uncompressed: the producer's gzip bytes)`);

console.log(`\nSteady state: ${S} series x ${K} profiles (round 0 warm-up, ${K - 1} rounds measured), CPU ms per profile\n`);
console.log('| pushers | embedded: profd | ClickHouse: profd + server (ingest) | + background merges after | ratio (with merges) | ingest/s embedded / ClickHouse | push p50 ms embedded / ClickHouse |');
console.log('|---:|---:|---:|---:|---:|---:|---:|');
for (const r of out.steady) {
  const tot = r.ch.cpuP + r.ch.cpuCM;
  console.log(`| ${r.C} | ${f(r.tsdb.cpuP, 2)} | ${f(r.ch.cpuP, 2)} + ${f(r.ch.cpuC, 2)} = ${f(r.ch.cpuP + r.ch.cpuC, 2)} | ${f(tot, 2)} | ${f((r.ch.cpuP + r.ch.cpuC) / r.tsdb.cpuP, 1)}x (${f(tot / r.tsdb.cpuP, 1)}x) | ${f(r.tsdb.rate, 0)} / ${f(r.ch.rate, 0)} | ${f(r.tsdb.p50, 1)} / ${f(r.ch.p50, 1)} |`);
}
for (const r of out.steady) {
  console.log(`\n${r.C} pushers, ClickHouse statements over the measured rounds (kind, count, sum query_duration_ms, rows read, rows written):\n${r.ch.stmts}`);
  console.log(`parts (table, new, merges):\n${r.ch.parts}`);
  console.log(`pushes sent again (503 or closed connection): embedded ${r.tsdb.retries}, ClickHouse ${r.ch.retries}`);
}
for (const r of out.steady.filter((x) => x.qa)) {
  console.log(`\nSteady merges (${S * K} profiles, ${r.C}-pusher run), medians of ${RUNS}: embedded / ClickHouse ms`);
  console.log(`| merge report=top | ${f(r.qa.merge, 0)} | ${f(r.qb.merge, 0)} |`);
  console.log(`| merge report=proto | ${f(r.qa.mergeProto, 0)} | ${f(r.qb.mergeProto, 0)} |`);
  console.log(`| merge of one series (${K} profiles) | ${f(r.qa.one, 0)} | ${f(r.qb.one, 0)} |`);
  console.log(`| query_range over ${S} series | ${f(r.qa.range, 0)} | ${f(r.qb.range, 0)} |`);
}
await killAll();
