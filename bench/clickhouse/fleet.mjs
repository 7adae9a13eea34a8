// A fleet pushing on a timer (issue 35 item 4): CPU per ingested profile,
// ClickHouse backend vs the embedded TSDB, run by hand (not in ctest):
//
//   PROFD_BIN=build/profd node bench/clickhouse/fleet.mjs
//     env: AGENTS=1000 PERIOD_S=10 (each agent pushes one real heap profile
//          every PERIOD_S seconds at its own phase: AGENTS/PERIOD_S pushes/s,
//          sent on schedule whether or not earlier ones were answered — an
//          open loop, as a fleet of profefe agents or Pyroscope SDKs is)
//          ROUNDS=6 (measured periods, after one warm-up period in which
//          every series and stack is new)
//          FLUSH="100ms,1s" (--clickhouse.flush-interval of each ClickHouse
//          run: how long the writer gathers pushes into one INSERT; an
//          acknowledgement still waits for ClickHouse's)
//          WEB_THREADS=128 (--web.threads of both profds: a push holds a
//          worker until its batch is acknowledged, so the workers bound the
//          pushes a batch can gather)
//          CH_EXTRA="--clickhouse.agg-flush-idle=0" (more flags of the
//          ClickHouse-backed profd, space-separated)
//          EMB_EXTRA="--storage.block-duration=20s" (more flags of the embedded
//          profd, space-separated: with short blocks the head is cut into
//          blocks, and compacted, within the run) EMB_SETTLE_S=0 (then wait
//          this long after the last period before reading the embedded
//          profd's CPU: its cuts of the measured pushes counted too)
//          PREFILL_H=0 (ClickHouse runs: before the measured periods, fill
//          the tables with the fleet's rows of this many past hours — the
//          warm-up period's profiles and stack_samples_v1 rows copied under
//          other series' fingerprints, copy k at the warm-up's times minus k
//          periods, then OPTIMIZE ... FINAL — as a store that has run that
//          long holds them; see below) PREFILL_OPTIMIZE=1 (0: no OPTIMIZE
//          ... FINAL: the copies' parts, 20 copies each, are left to
//          ClickHouse's own merges, and the run starts once none is left —
//          a state a running store can be in, where FINAL's single part
//          is not)
//          BREAKDOWN=1 (also print ClickHouse's CPU per profile by statement,
//          from system.query_log's ProfileEvents, and its merges' by table,
//          from system.part_log)
//
// bench.mjs's steady state drives N closed-loop pushers (each waits for its
// answer), so a batch never holds more than N pushes. A fleet does not wait:
// the pushes in a batch are the fleet's rate x the flush interval, and
// ClickHouse 18.16 costs ~6-12 ms of CPU per batch (bench/clickhouse/RESULTS.md).
// Measured per run: CPU (user + system, /proc/PID/stat) of profd and of
// clickhouse-server over the measured periods plus, after profd stopped
// (its close writes aggs_v1's pending sums, --clickhouse.agg-flush-idle),
// ClickHouse's CPU until its background merges are done; push latency p50/p99; parts written per profile
// (system.part_log: one per table per INSERT). The answers are compared: query_range totals of every
// series equal on both backends.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TESTDATA, http, killAll, qs, startProfd, tempDir } from '../../tests/e2e/lib.mjs';
import { CH_BIN, chPorts, chQuery, startClickHouse } from '../../tests/e2e/ch.mjs';

const AGENTS = Number(process.env.AGENTS || 1000);
const PERIOD = Number(process.env.PERIOD_S || 10) * 1000;
const ROUNDS = Number(process.env.ROUNDS || 6);
const FLUSH = (process.env.FLUSH ?? '100ms,1s').split(',').filter(Boolean);
const WT = `--web.threads=${Number(process.env.WEB_THREADS || 128)}`;
const BREAKDOWN = process.env.BREAKDOWN === '1';
const CH_EXTRA = (process.env.CH_EXTRA || '').split(' ').filter(Boolean);
const EMB_EXTRA = (process.env.EMB_EXTRA || '').split(' ').filter(Boolean);
const EMB_SETTLE = Number(process.env.EMB_SETTLE_S || 0) * 1000;
const PREFILL_H = Number(process.env.PREFILL_H || 0);
const PREFILL_OPTIMIZE = process.env.PREFILL_OPTIMIZE !== '0';
if (!CH_BIN) throw new Error('clickhouse-server is not installed (scripts/install-deps.sh --test)');
const dir = tempDir('pd-chfleet-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

const gd = path.join(TESTDATA, 'pprof', 'go-demo-series');
const bodies = fs.readdirSync(gd).filter((f) => f.startsWith('heap-')).sort().map((f) => fs.readFileSync(path.join(gd, f)));
const phase = Array.from({ length: AGENTS }, (_, k) => Math.floor((k * PERIOD) / AGENTS));

function cpuSec(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}
const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
let resent = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Pushes period j of every agent on schedule (open loop); resolves when all
// are answered. Each push is agent k's heap profile dated at its slot.
async function period(profd, j, t0, lat) {
  const sent = [];
  for (let k = 0; k < AGENTS; k++) {
    const at = t0 + j * PERIOD + phase[k];
    const wait = at - Date.now();
    if (wait > 0) await sleep(wait);
    const url = `${profd.base}/api/0/profiles?` + qs({ service: 'fleet', type: 'heap', instance_id: `a${String(k).padStart(5, '0')}`, created_at: new Date(at).toISOString() });
    const s = performance.now();
    sent.push((async () => {
      // a kept-alive connection profd closed as idle just as this push was
      // sent on it (profd keeps 64 idle at most) is sent again, as an agent
      // would; counted
      for (let a = 0; ; a++) {
        const r = await http(url, { method: 'POST', body: bodies[(k + j) % bodies.length], timeoutMs: 120000 })
          .catch((e) => { if (e.cause?.code !== 'UND_ERR_SOCKET' || a >= 5) throw e; return null; });
        if (!r) { resent++; continue; }
        assert.equal(r.status, 200, r.text);
        lat.push(performance.now() - s);
        return;
      }
    })());
  }
  await Promise.all(sent);
}

// Why PREFILL_H: a fresh database is not what a store that has run since
// midnight looks like to ClickHouse's merges. Measured (RESULTS.md): with
// an hour of this fleet in the day's partitions, ClickHouse 18.16 merged
// each INSERT's new profiles_v3 part with the partition's big one (1.8 MiB:
// its rows are ~5 B on disk), 118 merges for 123 INSERTs; stack_samples_v1,
// 12-13 MiB, had its big part left alone. The likely reason is the merge
// selector's fixed cost per part (a few MiB), which makes merging more
// parts look cheaper while all are small; 18.16 has no setting for it.
// The copies are under fingerprints no series has (fingerprint xor k), so
// no selection finds them and the answers compared stay the fleet's; copy k
// is k periods older than the warm-up, so each lands in the partition the
// fleet's rows of that time would (the day's, or since schema 8 a 10-minute
// partition of profiles_v4), as they would after PREFILL_H hours of running.

// The table profiles rows are written to: profiles_v4 since schema 8, profiles_v3 before.
async function profilesTable(ch, db) {
  return Number(await chQuery(ch, `SELECT count() FROM system.tables WHERE database = '${db}' AND name = 'profiles_v4'`)) ? 'profiles_v4' : 'profiles_v3';
}

async function prefill(ch, db) {
  const PROFILES = await profilesTable(ch, db);
  const k = Math.round(PREFILL_H * 3600000 / PERIOD);
  const t = Date.now();
  for (const [table, cols] of [
    [PROFILES, `day, ts - (k + 1) * ${PERIOD}, bitXor(fingerprint, k + 1), write_id, types_hash, sample_types, sample_units, totals, period_type, period_unit, period, time_nanos, duration_nanos, comments, drop_frames, keep_frames, default_sample_type, doc_url, body`],
    ['stack_samples_v1', `day, ts - (k + 1) * ${PERIOD}, bitXor(fingerprint, k + 1), write_id, types_hash, stack_hash, values`],
  ]) {
    // 20 copies a statement (the server's 2 GB query limit); each copies
    // only the warm-up's rows (fingerprints of the fleet's series)
    const sqls = [];
    for (let i = 0; i < k; i += 20)
      sqls.push(`INSERT INTO ${db}.${table} SELECT ${cols.replaceAll('k + 1', `k + ${i + 1}`)} FROM ${db}.${table} ARRAY JOIN range(${Math.min(20, k - i)}) AS k WHERE fingerprint IN (SELECT fingerprint FROM ${db}.series_v3)`);
    for (const sql of [...sqls, ...(PREFILL_OPTIMIZE ? [`OPTIMIZE TABLE ${db}.${table} FINAL`] : [])]) {
      const r = await http(`${ch.url}/`, { method: 'POST', body: sql, timeoutMs: 1800000 });
      assert.equal(r.status, 200, `${sql}: ${r.text}`);
    }
  }
  // ClickHouse's own merges of the copies' parts: scheduled a moment after
  // the INSERTs; settled once none has run for two checks 2 s apart
  for (let idle = 0; idle < (PREFILL_OPTIMIZE ? 1 : 2);) {
    if (!PREFILL_OPTIMIZE) await sleep(2000);
    idle = Number(await chQuery(ch, 'SELECT count() FROM system.merges')) > 0 ? 0 : idle + 1;
    if (!idle) await sleep(500);
  }
  const sz = await chQuery(ch, `SELECT table, sum(rows), round(sum(bytes_on_disk) / 1048576, 1), count() FROM system.parts WHERE active AND database = '${db}' AND table IN ('${PROFILES}', 'stack_samples_v1') GROUP BY table ORDER BY table FORMAT TSV`);
  console.error(`prefilled ${PREFILL_H} h (${k} copies of the warm-up) in ${((Date.now() - t) / 1000).toFixed(0)} s: table, rows, MiB, parts\n${sz.trim()}`);
}

async function run(profd, ch, db) {
  let t0 = Date.now() + 1000;
  await period(profd, 0, t0, []); // warm-up: every series and stack new
  if (ch && PREFILL_H > 0) {
    await prefill(ch, db);
    t0 = Date.now() + 1000 - PERIOD; // period 1 starts in a second
  }
  const pids = [profd.child.pid, ch?.child.pid].filter(Boolean);
  const chT1 = ch ? await chQuery(ch, 'SELECT toString(now())') : null;
  const c0 = pids.map(cpuSec);
  const lat = [];
  resent = 0;
  for (let j = 1; j <= ROUNDS; j++) await period(profd, j, t0, lat);
  if (!ch && EMB_SETTLE) await sleep(EMB_SETTLE);
  const n = AGENTS * ROUNDS;
  if (!ch) {
    const m = (await http(profd.base + '/metrics')).text;
    const g = (name) => (m.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1];
    console.error(`embedded: head cuts ${g('profd_storage_head_cuts_total')}, compactions ${g('profd_storage_compactions_total')}, blocks ${g('profd_storage_blocks')}`);
  }
  const res = { profd: (cpuSec(pids[0]) - c0[0]) / n * 1000, p50: pct(lat, 0.5), p99: pct(lat, 0.99), resent };
  // the answers (before profd stops; ClickHouse's CPU for this query is
  // taken out of its figure below)
  const cq0 = ch ? cpuSec(pids[1]) : 0;
  if (ch) res.ch = (cq0 - c0[1]) / n * 1000;
  const q = await http(profd.base + '/api/v1/query_range?' + qs({ query: 'heap{service="fleet"}', from: (t0 - 60000) / 1000, to: (Date.now() + 60000) / 1000 }));
  assert.equal(q.status, 200, q.text.slice(0, 300));
  res.totals = q.json.data.map((s) => `${JSON.stringify(s.metric)} ${s.totals[0]}`).sort();
  assert.equal(res.totals.length, AGENTS);
  if (ch) {
    const m = await http(profd.base + '/metrics');
    const g = (name) => (m.text.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1];
    res.pending = g('profd_clickhouse_agg_pending_buckets') ? `${g('profd_clickhouse_agg_pending_buckets')} / ${(Number(g('profd_clickhouse_agg_pending_bytes')) / 1048576).toFixed(1)} MiB` : '—';
    const cq = cpuSec(pids[1]) - cq0;
    // profd stopped before ClickHouse's CPU is read: a profd that keeps
    // aggs_v1's sums in memory (--clickhouse.agg-flush-idle) writes them at
    // close, and that INSERT and its merges are part of the cost. (profd's
    // own CPU for encoding them at close is not in its figure: read above.)
    await profd.stop();
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline && Number(await chQuery(ch, 'SELECT count() FROM system.merges')) > 0) await sleep(500);
    res.chMerges = (cpuSec(pids[1]) - c0[1] - cq) / n * 1000;
    await chQuery(ch, 'SYSTEM FLUSH LOGS');
    res.parts = Number(await chQuery(ch, `SELECT count() FROM system.part_log WHERE event_type = 1 AND event_time >= '${chT1}' AND database = '${db}'`)) / n;
    res.aggRows = Number(await chQuery(ch, `SELECT count() FROM ${db}.aggs_v1`));
    res.recon = `${await chQuery(ch, `SELECT sum(n) FROM ${db}.aggs_v1 WHERE types_hash = 0 AND stack_hash = 0`)} of ${await chQuery(ch, `SELECT count() FROM ${db}.${await profilesTable(ch, db)}`)}`;
    if (BREAKDOWN) {
      const cpu = "(ProfileEvents.Values[indexOf(ProfileEvents.Names, 'UserTimeMicroseconds')] + ProfileEvents.Values[indexOf(ProfileEvents.Names, 'SystemTimeMicroseconds')])";
      res.stmts = await chQuery(ch, `SELECT concat(substring(query, 1, 6), ' ', extract(query, '(?:INTO|FROM) ([a-zA-Z_0-9.]+)')) AS kind, count(), round(sum(${cpu}) / 1000 / ${n}, 3) AS cpu_ms_per_profile, round(sum(query_duration_ms) / count(), 1), sum(written_rows) FROM system.query_log WHERE type = 2 AND event_time >= '${chT1}' AND query NOT LIKE '%system.%' GROUP BY kind ORDER BY cpu_ms_per_profile DESC FORMAT TSV`);
      res.merges = await chQuery(ch, `SELECT table, count(), round(sum(duration_ms) / ${n}, 3) AS wall_ms_per_profile, sum(rows) FROM system.part_log WHERE event_type = 2 AND event_time >= '${chT1}' AND database = '${db}' GROUP BY table ORDER BY wall_ms_per_profile DESC FORMAT TSV`);
    }
  }
  return res;
}

const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');
console.error(`load before: ${load()}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
const out = [];
const e = await startProfd({ storage: path.join(dir, 'tsdb'), name: 'profd-tsdb', extraArgs: [WT, ...EMB_EXTRA] });
const emb = await run(e, null);
await e.stop();
const ch = await startClickHouse(dir, 'ch', await chPorts(), {
  config: '<part_log><database>system</database><table>part_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></part_log>' +
    (BREAKDOWN ? '<query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></query_log>' : ''),
  profile: BREAKDOWN ? '<log_queries>1</log_queries>' : '' });
await chQuery(ch, 'SELECT 1');
for (const fl of FLUSH) {
  const db = `fleet_${fl.replace(/\W/g, '')}`;
  const p = await startProfd({ storage: path.join(dir, `x-${fl}`), name: 'profd-ch',
    extraArgs: [WT, '--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, `--clickhouse.database=${db}`, `--clickhouse.flush-interval=${fl}`, ...CH_EXTRA] });
  const r = await run(p, ch, db); // stops p
  out.push({ fl, r, load: load() });
}
await killAll();
console.error(`load after: ${load()}`);

// Totals are per series, but the two backends' runs push different slots
// (each run has its own t0): compare the per-series totals' multiset.
const tot = (r) => r.totals.map((t) => t.split(' ').pop()).sort().join(',');
for (const o of out) assert.equal(tot(o.r), tot(emb), `query_range totals equal (flush ${o.fl})`);

const f = (x, d = 2) => x.toFixed(d);
console.log(`\n${AGENTS} agents x one real heap profile every ${PERIOD / 1000} s (${f(AGENTS * 1000 / PERIOD, 0)} pushes/s, open loop), ${ROUNDS} periods measured after a warm-up, ${WT}${PREFILL_H ? `, ClickHouse's day partitions prefilled with ${PREFILL_H} h` : ''}\n`);
console.log('| backend | flush interval | CPU ms/profile: profd + ClickHouse (+ its merges, after profd stopped) | ratio to embedded | parts written per profile | aggs_v1 rows | profiles reconciled in aggs_v1 | pending before stop (series-buckets / memory) | push p50 / p99 ms | sent again | load after |');
console.log('|---|---|---|---:|---:|---:|---|---|---|---:|---|');
console.log(`| embedded | — | ${f(emb.profd)} | 1 | — | — | — | — | ${f(emb.p50, 1)} / ${f(emb.p99, 1)} | ${emb.resent} | |`);
for (const { fl, r, load: l } of out) {
  const all = r.profd + r.chMerges;
  console.log(`| ClickHouse | ${fl} | ${f(r.profd)} + ${f(r.ch)} (${f(r.chMerges)}) = ${f(all)} | ${f(all / emb.profd, 1)}x | ${f(r.parts, 3)} | ${r.aggRows} | ${r.recon} | ${r.pending} | ${f(r.p50, 1)} / ${f(r.p99, 1)} | ${r.resent} | ${l} |`);
}
if (BREAKDOWN) {
  for (const { fl, r } of out) {
    console.log(`\nClickHouse, flush ${fl}: statements (kind, count, CPU ms per profile, mean ms, rows written)\n${r.stmts}`);
    console.log(`merges (table, count, wall ms per profile, rows)\n${r.merges}`);
  }
}
