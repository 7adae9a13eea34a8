// Read latency on ClickHouse of two profd binaries over the same data (issue
// 35: schema 4 adds a round trip — a stack's locations — to every merge and
// single-profile read; this says what that costs). Run by hand (not in ctest):
//
//   PROFD_BIN=build/profd PROFD_BIN_BASE=/path/to/older/profd \
//     node bench/clickhouse/read.mjs DATA_DIR
//
// DATA_DIR/<type>/NNNNNN.pb.gz as bench/storage_size/collect.sh writes them.
// env: N (profiles per type; default all), RUNS=7, STEP_MS=1000 (the
// profiles' spacing in time; 60000 spreads 150 over 2.5 h, so the merges
// cover whole aggs_v1 buckets), CH_ZSTD=1 (ClickHouse's
// server-wide <compression> zstd). One clickhouse-server (free loopback
// ports), a database per binary, each type one series pushed in order
// through profefe's API, every table OPTIMIZE FINAL'd; then, RUNS rounds
// alternating the binaries: per type the merge of all its profiles
// (report=proto) and 5 single-profile GETs (/api/0/profiles/ID). Medians
// in ms; the merges' totals (report=top) of both binaries are asserted equal.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chPorts, chQuery, startClickHouse } from '../../tests/e2e/ch.mjs';
import { http, killAll, qs, startProfd, tempDir } from '../../tests/e2e/lib.mjs';

const DATA = process.argv[2];
if (!DATA || !process.env.PROFD_BIN || !process.env.PROFD_BIN_BASE) {
  console.error('usage: PROFD_BIN=... PROFD_BIN_BASE=... node bench/clickhouse/read.mjs DATA_DIR');
  process.exit(2);
}
const N = Number(process.env.N || 0);
const RUNS = Number(process.env.RUNS || 7);
const dir = tempDir('pd-chread-');
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const TYPES = { heap: 'heap', allocs: 'heap', goroutine: 'goroutine', cpu: 'cpu' };
const sets = {};
for (const t of Object.keys(TYPES)) {
  const d = path.join(DATA, t);
  if (!fs.existsSync(d)) continue;
  let files = fs.readdirSync(d).filter((f) => f.endsWith('.pb.gz')).sort().map((f) => path.join(d, f));
  if (N) files = files.slice(0, N);
  sets[t] = files;
}
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
console.error(`load before: ${load()}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
const ch = await startClickHouse(dir, 'ch', await chPorts(), {
  config: process.env.CH_ZSTD ? '<compression><case><method>zstd</method></case></compression>' : '',
});
const STEP = Number(process.env.STEP_MS || 1000);
const T0 = Date.now() - 3 * 3600 * 1000;
const bins = { new: process.env.PROFD_BIN, base: process.env.PROFD_BIN_BASE };
const profd = {};
const ids = {};
for (const [label, bin] of Object.entries(bins)) {
  process.env.PROFD_BIN = bin;
  const p = await startProfd({ storage: path.join(dir, `x-${label}`), name: `profd-${label}`,
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, `--clickhouse.database=read_${label}`] });
  ids[label] = {};
  for (const [t, files] of Object.entries(sets)) {
    ids[label][t] = [];
    for (let k = 0; k < files.length; k++) {
      const r = await http(`${p.base}/api/0/profiles?` + qs({ service: 'size', type: TYPES[t], instance_id: t, created_at: new Date(T0 + k * STEP).toISOString() }),
        { method: 'POST', body: fs.readFileSync(files[k]), timeoutMs: 120000 });
      assert.equal(r.status, 200, `${label} ${files[k]}: ${r.text}`);
      ids[label][t].push(r.json.body.id);
    }
  }
  for (const tb of (await chQuery(ch, `SELECT name FROM system.tables WHERE database='read_${label}' AND engine LIKE '%MergeTree'`)).split('\n'))
    await chQuery(ch, `OPTIMIZE TABLE read_${label}.${tb} FINAL`);
  profd[label] = p;
}
const FROM = (T0 - 60000) / 1000;
const TO = (T0 + Math.max(3600 * 1000, Math.max(...Object.values(sets).map((f) => f.length)) * STEP + 1000)) / 1000;
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const ms = {};
for (let run = 0; run < RUNS; run++) {
  for (const label of run % 2 ? ['base', 'new'] : ['new', 'base']) {
    const p = profd[label];
    for (const t of Object.keys(sets)) {
      const q = { mode: 'merge', query: `${TYPES[t]}{service="size",instance_id="${t}"}`, from: FROM, to: TO };
      let t0 = performance.now();
      const r = await http(`${p.base}/api/v1/query?` + qs({ ...q, report: 'proto' }), { timeoutMs: 300000 });
      assert.equal(r.status, 200, `${label} merge ${t}: ${r.text}`);
      ((ms[`${t} merge`] ||= {})[label] ||= []).push(performance.now() - t0);
      if (run === 0) {
        const top = await http(`${p.base}/api/v1/query?` + qs({ ...q, report: 'top', limit: 5 }), { timeoutMs: 300000 });
        ((ms[`${t} merge`].total ||= {})[label] = top.json.data.total);
      }
      const some = ids[label][t].filter((_, i) => i % Math.ceil(ids[label][t].length / 5) === 0).slice(0, 5);
      t0 = performance.now();
      for (const id of some) {
        const g = await http(`${p.base}/api/0/profiles/${id}`, { timeoutMs: 60000 });
        assert.equal(g.status, 200, `${label} GET ${t} ${id}: ${g.text}`);
      }
      ((ms[`${t} single`] ||= {})[label] ||= []).push((performance.now() - t0) / some.length);
    }
  }
}
console.error(`load after: ${load()}`);
await killAll();
for (const t of Object.keys(sets))
  assert.equal(JSON.stringify(ms[`${t} merge`].total.new), JSON.stringify(ms[`${t} merge`].total.base), `${t}: merge totals equal`);
console.log(`\n| read (${RUNS} runs, median ms)${process.env.CH_ZSTD ? ', server zstd' : ''} | PROFD_BIN_BASE | PROFD_BIN |\n|---|---:|---:|`);
for (const [k, v] of Object.entries(ms))
  console.log(`| ${k}${k.endsWith('merge') ? ` of ${sets[k.split(' ')[0]].length}` : ' profile GET'} | ${med(v.base).toFixed(0)} | ${med(v.new).toFixed(0)} |`);
