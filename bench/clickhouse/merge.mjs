// Merge latency, ClickHouse vs the embedded TSDB, and two profd binaries on
// the very same ClickHouse data (issue 35 item 4: "merge latency <= 2x
// embedded"), run by hand (not in ctest):
//
//   PROFD_BIN=build/profd BASE_BIN=/path/to/main/profd node bench/clickhouse/merge.mjs
//     env: S=256 K=96 STEP_MS=60000 (S series x K real heap profiles, one
//          every STEP_MS per series: 24,576 profiles over 96 minutes, the
//          shape of RESULTS.md's "where a merge's time goes")
//          RUNS=5 ROUNDS=2 (each binary's queries RUNS times, binaries
//          alternated ROUNDS times), CLIENTS=16 (pushers), FLUSH=50ms (the
//          pushing profd's --clickhouse.flush-interval), OPTIMIZE=1 (also
//          measure after OPTIMIZE ... FINAL of every table)
//
// One clickhouse-server and an embedded profd get the same pushes (profefe's
// API; PROFD_BIN pushes to ClickHouse). Then, for each binary in turn
// (PROFD_BIN, BASE_BIN, PROFD_BIN, ... on one database: the binaries must
// share its schema version), a fresh profd answers: a merge of every series
// over the whole range (report=top and proto), one series' merge, and
// query_range — medians of RUNS. The merges' totals must equal the embedded
// store's. Per statement, system.query_log over each binary's window: count,
// mean query_duration_ms, rows read, bytes out. The floor: `SELECT 1` over
// HTTP (median of 50, node's fetch, as profd's requests: one round trip).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Proc, TESTDATA, freePort, http, qs, startProfd, tempDir, waitFor } from '../../tests/e2e/lib.mjs';

const S = Number(process.env.S || 256);
const K = Number(process.env.K || 96);
const STEP = Number(process.env.STEP_MS || 60000);
const RUNS = Number(process.env.RUNS || 5);
const ROUNDS = Number(process.env.ROUNDS || 2);
const CLIENTS = Number(process.env.CLIENTS || 16);
// each binary a run of its own; NOCACHE=1 adds PROFD_BIN with its read cache
// off (--clickhouse.cache-size=0) as a third
const BINS = [
  process.env.PROFD_BIN && { bin: process.env.PROFD_BIN, args: [], name: 'PROFD_BIN' },
  process.env.BASE_BIN && { bin: process.env.BASE_BIN, args: [], name: 'BASE_BIN' },
  process.env.NOCACHE === '1' && { bin: process.env.PROFD_BIN, args: ['--clickhouse.cache-size=0'], name: 'PROFD_BIN, cache off' },
].filter(Boolean);
const CH_BIN = '/usr/sbin/clickhouse-server';
const dir = tempDir('pd-chmerge-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

const files = fs.readdirSync(path.join(TESTDATA, 'pprof', 'go-demo-series')).filter((f) => f.startsWith('heap-')).sort()
  .map((f) => path.join(TESTDATA, 'pprof', 'go-demo-series', f));
const bodies = files.map((f) => fs.readFileSync(f));
const NOW = Date.now();
const T0 = NOW - (K * STEP + 120 * 1000);
const list = [];
for (let j = 0; j < K; j++)
  for (let k = 0; k < S; k++)
    list.push({ body: bodies[(k + j) % bodies.length], instance: `s${String(k).padStart(4, '0')}`, at: T0 + j * STEP + k });
const FROM = (T0 - 60000) / 1000, TO = (NOW + 1000) / 1000;

const [hp, tp, ip] = [await freePort(), await freePort(), await freePort()];
const cd = path.join(dir, 'ch');
fs.mkdirSync(cd, { recursive: true });
fs.writeFileSync(path.join(cd, 'config.xml'), `<?xml version="1.0"?><yandex>
<logger><level>warning</level><log>${cd}/server.log</log><errorlog>${cd}/err.log</errorlog><size>10M</size><count>1</count></logger>
<http_port>${hp}</http_port><tcp_port>${tp}</tcp_port><interserver_http_port>${ip}</interserver_http_port>
<listen_host>127.0.0.1</listen_host><path>${cd}/data/</path><tmp_path>${cd}/tmp/</tmp_path>
<user_files_path>${cd}/uf/</user_files_path><format_schema_path>${cd}/fs/</format_schema_path>
<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</uncompressed_cache_size>
<users_config>${cd}/users.xml</users_config><default_profile>default</default_profile><default_database>default</default_database>
<timezone>UTC</timezone>
<query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></query_log></yandex>`);
fs.writeFileSync(path.join(cd, 'users.xml'), `<?xml version="1.0"?><yandex><profiles><default><log_queries>1</log_queries></default></profiles><users><default>
<password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default/></quotas></yandex>`);
const ch = new Proc('clickhouse', 'nice', [CH_BIN, `--config-file=${cd}/config.xml`], { cwd: cd });
const CH = `http://127.0.0.1:${hp}`;
await waitFor('clickhouse', async () => (await http(`${CH}/?query=SELECT%201`, { timeoutMs: 2000 }).catch(() => ({}))).status === 200, 60000);
const chq = async (sql) => {
  const r = await http(`${CH}/`, { method: 'POST', body: sql, timeoutMs: 600000 });
  if (r.status !== 200) throw new Error(`${sql}: ${r.text}`);
  return r.text.trim();
};
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const chArgs = ['--storage.backend=clickhouse', `--clickhouse.url=${CH}`, '--clickhouse.database=m', '--web.threads=64'];

async function push(profd) {
  let next = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < list.length) {
      const it = list[next++];
      const url = `${profd.base}/api/0/profiles?` + qs({ service: 'm', type: 'heap', instance_id: it.instance, created_at: new Date(it.at).toISOString() });
      const r = await http(url, { method: 'POST', body: it.body, timeoutMs: 120000 });
      assert.equal(r.status, 200, r.text);
    }
  }));
}

async function timed(profd, q, runs = RUNS) {
  const ms = [];
  let last;
  for (let i = 0; i < runs; i++) {
    const s = performance.now();
    last = await http(profd.base + q, { timeoutMs: 600000 });
    assert.equal(last.status, 200, last.text.slice(0, 300));
    ms.push(performance.now() - s);
  }
  return { ms: median(ms), last };
}

async function queries(profd) {
  const m = (extra) => '/api/v1/query?' + qs({ mode: 'merge', from: FROM, to: TO, ...extra });
  const top = await timed(profd, m({ query: 'heap{service="m"}', report: 'top', limit: 5 }));
  const proto = await timed(profd, m({ query: 'heap{service="m"}', report: 'proto' }));
  const one = await timed(profd, m({ query: 'heap{service="m",instance_id="s0000"}', report: 'top', limit: 5 }));
  const range = await timed(profd, '/api/v1/query_range?' + qs({ query: 'heap{service="m"}', from: FROM, to: TO }));
  return { top: top.ms, proto: proto.ms, one: one.ms, range: range.ms, total: top.last.json.data.total, oneTotal: one.last.json.data.total };
}

console.log(`load before: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
process.env.PROFD_BIN = BINS[0].bin;
const e = await startProfd({ storage: path.join(dir, 'tsdb'), name: 'profd-tsdb', extraArgs: ['--web.threads=64'] });
await push(e);
const emb = await queries(e);
await e.stop();
// the embedded store restarted (a clean stop writes its head out) and again
// with most of it cut into blocks (--storage.block-duration=30m: the head is
// cut while it spans more than 45 minutes): its other two states, each
// printed beside the one the ratios use (right after the pushes)
const e2 = await startProfd({ storage: path.join(dir, 'tsdb'), name: 'profd-tsdb-2', extraArgs: ['--web.threads=64'] });
const embRestart = await queries(e2);
await e2.stop();
const e3 = await startProfd({ storage: path.join(dir, 'tsdb'), name: 'profd-tsdb-3', extraArgs: ['--web.threads=64', '--storage.block-duration=30m'] });
let seen = '';
const metric = async (name) => Number(((await http(e3.base + '/metrics')).text.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
// cut (and compacted: the blocks may become one) once nothing changed for 5 s
await waitFor('the head cut into blocks', async () => {
  const now = `${await metric('profd_storage_blocks')} blocks, ${await metric('profd_storage_head_cuts_total')} head cuts, ${await metric('profd_storage_compactions_total')} compactions`;
  const done = now === seen && (await metric('profd_storage_head_cuts_total')) > 0;
  seen = now;
  return done;
}, 300000, 5000);
console.log(`embedded from blocks: ${seen}`);
const embBlocks = await queries(e3);
await e3.stop();
for (const o of [embRestart, embBlocks]) assert.equal(o.total, emb.total, 'the embedded store answers the same after a restart and a cut');
// the pushes go with a short gathering window: CLIENTS closed-loop pushers
// would wait the default adaptive window (up to 1 s) every round
const w = await startProfd({ storage: path.join(dir, 'x-w'), name: 'profd-ch-w', extraArgs: [...chArgs, `--clickhouse.flush-interval=${process.env.FLUSH || '50ms'}`] });
await push(w);
await w.stop();
console.log(`${list.length} profiles pushed (${S} series x ${K}, ${STEP / 1000} s apart); load ${os.loadavg()[0].toFixed(2)}`);

const sel1 = [];
for (let i = 0; i < 50; i++) {
  const s = performance.now();
  await http(`${CH}/`, { method: 'POST', body: 'SELECT 1' });
  sel1.push(performance.now() - s);
}
console.log(`SELECT 1 over HTTP: median ${median(sel1).toFixed(2)} ms, min ${Math.min(...sel1).toFixed(2)} ms`);

async function measure(label) {
  console.log(`\n### ${label}\n`);
  console.log('| binary | round | load | first proto ms | merge top ms | proto ms | one series ms | query_range ms | ClickHouse/embedded (top) |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  const stmts = {}, floors = {};
  for (let r = 0; r < ROUNDS; r++)
    for (const [bi, { bin, args, name }] of BINS.entries()) {
      process.env.PROFD_BIN = bin;
      const p = await startProfd({ storage: path.join(dir, `x-${bi}-${r}-${label.length}`), name: `profd-ch-${bi}`, extraArgs: [...chArgs, ...args] });
      // the first merge of a fresh profd: its read cache empty
      const first = (await timed(p, '/api/v1/query?' + qs({ mode: 'merge', from: FROM, to: TO, query: 'heap{service="m"}', report: 'proto' }), 1)).ms;
      await queries(p); // warm: ClickHouse's mark cache, profd's first connections
      await new Promise((res) => setTimeout(res, 1100));
      const t1 = await chq('SELECT toString(now())');
      const q = await queries(p);
      await new Promise((res) => setTimeout(res, 1100));
      const t2 = await chq('SELECT toString(now())');
      await p.stop();
      assert.equal(q.total, emb.total, 'merge totals equal the embedded store\'s');
      assert.equal(q.oneTotal, emb.oneTotal, 'one series\' merge totals equal');
      console.log(`| ${name} | ${r} | ${os.loadavg()[0].toFixed(2)} | ${first.toFixed(0)} | ${q.top.toFixed(0)} | ${q.proto.toFixed(0)} | ${q.one.toFixed(0)} | ${q.range.toFixed(0)} | ${(q.top / emb.top).toFixed(1)}x |`);
      if (r === ROUNDS - 1 && bi === 0) {
        // the floor: one top merge's statements, each sent alone (nothing
        // else running), and the least a merge of two dependent rounds
        // (the selection, then the headers and sums beside it) can take
        const p2 = await startProfd({ storage: path.join(dir, `x-floor-${label.length}`), name: 'profd-ch-floor', extraArgs: [...chArgs, ...args] });
        await queries(p2);
        await new Promise((res) => setTimeout(res, 1100));
        const f1 = await chq('SELECT toString(now())');
        await timed(p2, '/api/v1/query?' + qs({ mode: 'merge', from: FROM, to: TO, query: 'heap{service="m"}', report: 'top', limit: 5 }), 1);
        await new Promise((res) => setTimeout(res, 1100));
        const f2 = await chq('SELECT toString(now())');
        await p2.stop();
        await chq('SYSTEM FLUSH LOGS');
        const texts = (await chq(`SELECT query FROM system.query_log WHERE type = 2 AND event_time >= '${f1}' AND event_time <= '${f2}' AND query NOT LIKE '%system.%' AND query NOT LIKE 'SELECT toString%' FORMAT JSONEachRow`))
          .split('\n').filter(Boolean).map((l) => JSON.parse(l).query);
        const alone = [];
        for (const [k, sql] of texts.entries()) {
          const v = [];
          for (let i = 0; i < 15; i++) {
            const s = performance.now();
            const a = await http(`${CH}/?database=m&query_id=floor-${label.length}-${k}-${i}`, { method: 'POST', body: sql, timeoutMs: 60000 });
            assert.equal(a.status, 200, a.text.slice(0, 300));
            v.push(performance.now() - s);
          }
          alone.push({ ms: median(v), first: /^SELECT fingerprint, (count|any\(names)/.test(sql), kind: sql.slice(0, 60) });
        }
        // ClickHouse's own duration of each (system.query_log), beside the
        // round trip node measured (which adds the answer's transfer)
        await chq('SYSTEM FLUSH LOGS');
        for (const [k, x] of alone.entries())
          x.server = Number(await chq(`SELECT quantileExact(0.5)(query_duration_ms) FROM system.query_log WHERE type = 2 AND query_id LIKE 'floor-${label.length}-${k}-%'`));
        const round = (first, f) => Math.max(0, ...alone.filter((x) => x.first === first).map(f));
        floors[name] = { alone, floor: round(true, (x) => x.ms) + round(false, (x) => x.ms), server: round(true, (x) => x.server) + round(false, (x) => x.server) };
      }
      if (r === ROUNDS - 1) {
        await chq('SYSTEM FLUSH LOGS');
        stmts[name] = await chq(`SELECT substring(replaceRegexpAll(query, '[0-9]{4,}[0-9,]*', 'N'), 1, 90) AS kind, count(), round(avg(query_duration_ms), 1), round(avg(read_rows)), round(avg(result_bytes)) FROM system.query_log WHERE type = 2 AND event_time >= '${t1}' AND event_time <= '${t2}' AND query NOT LIKE '%system.%' AND query NOT LIKE 'SELECT toString%' GROUP BY kind ORDER BY kind FORMAT TSV`);
      }
    }
  console.log(`| embedded | | | | ${emb.top.toFixed(0)} | ${emb.proto.toFixed(0)} | ${emb.one.toFixed(0)} | ${emb.range.toFixed(0)} | |`);
  console.log(`| embedded, restarted | | | | ${embRestart.top.toFixed(0)} | ${embRestart.proto.toFixed(0)} | ${embRestart.one.toFixed(0)} | ${embRestart.range.toFixed(0)} | |`);
  console.log(`| embedded, from blocks | | | | ${embBlocks.top.toFixed(0)} | ${embBlocks.proto.toFixed(0)} | ${embBlocks.one.toFixed(0)} | ${embBlocks.range.toFixed(0)} | |`);
  for (const [name, f] of Object.entries(floors)) {
    console.log(`\n${name}: one top merge's statements, each alone, medians of 15 (ms: round trip from node, query_duration_ms in ClickHouse):`);
    for (const x of f.alone) console.log(`  ${x.first ? 'selection' : 'sums'}\t${x.ms.toFixed(1)}\t${x.server}\t${x.kind}`);
    console.log(`  floor of a merge (slowest selection statement + slowest sums statement, alone): ${f.floor.toFixed(1)} ms round trip = ${(f.floor / emb.top).toFixed(1)}x the embedded top merge (${emb.top.toFixed(1)} ms); ${f.server} ms in ClickHouse = ${(f.server / emb.top).toFixed(1)}x`);
  }
  for (const [name, t] of Object.entries(stmts))
    console.log(`\n${name} statements over its last round (${RUNS} x (2 merges, one series, query_range)): kind, count, mean ms, mean rows read, mean bytes out\n${t}`);
}

await measure('as written');
if (process.env.OPTIMIZE !== '0') {
  for (const t of (await chq("SELECT name FROM system.tables WHERE database = 'm' AND engine LIKE '%MergeTree%'")).split('\n'))
    await chq(`OPTIMIZE TABLE m.${t} FINAL`);
  await measure('after OPTIMIZE ... FINAL');
}
ch.kill();
