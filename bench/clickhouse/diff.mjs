// A diff on ClickHouse in one pass (pd_storage_aggregate_diff) vs the two
// aggregations before it, side by side on the same data (issue 16). Run by
// hand (not in ctest):
//
//   PROFD_BIN=build/profd PROFD_BIN_BASE=/path/to/older-profd \
//     node bench/clickhouse/diff.mjs
//   env: SERIES=1000 CLIENTS=16 RUNS=7 PORT0=19480 (ports PORT0..PORT0+9)
//
// One clickhouse-server; SERIES series heap{service="bench",
// instance_id="sNNNN"} with 4 real heap profiles each (shared testdata
// go-demo-series, cycled), pushed through profefe's API by the base profd
// (PROFD_BIN_BASE, schema v1). The same diff queries — one selection over two
// overlapping ranges, and two halves of the series over one range — are
// timed (median of RUNS, report=top) through the base profd, then through
// PROFD_BIN on the same database (which migrates it to v2: no row is
// rewritten, both read the same rows). The answers must be equal.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Proc, TESTDATA, http, killAll, qs, startProfd, tempDir, waitFor } from '../../tests/e2e/lib.mjs';

const SERIES = Number(process.env.SERIES || 1000);
const CLIENTS = Number(process.env.CLIENTS || 16);
const RUNS = Number(process.env.RUNS || 7);
const PORT0 = Number(process.env.PORT0 || 19480);
const BASE = process.env.PROFD_BIN_BASE;
assert.ok(BASE && process.env.PROFD_BIN, 'PROFD_BIN and PROFD_BIN_BASE are required');
const dir = tempDir('pd-chdiff-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

const files = fs.readdirSync(path.join(TESTDATA, 'pprof', 'go-demo-series')).filter((f) => f.startsWith('heap-')).sort()
  .map((f) => fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-series', f)));
const NOW = Date.now();
const T0 = NOW - 1800 * 1000;
const items = [];
for (let k = 0; k < SERIES; k++)
  for (let j = 0; j < 4; j++)
    items.push({ body: files[(k * 4 + j) % files.length], instance: `s${String(k).padStart(4, '0')}`, at: T0 + j * 60000 + k });

const d = path.join(dir, 'ch');
fs.mkdirSync(d, { recursive: true });
const P = (i) => PORT0 + i;
fs.writeFileSync(path.join(d, 'config.xml'), `<?xml version="1.0"?><yandex>
<logger><level>warning</level><log>${d}/server.log</log><errorlog>${d}/err.log</errorlog><size>10M</size><count>1</count></logger>
<http_port>${P(1)}</http_port><tcp_port>${P(2)}</tcp_port><interserver_http_port>${P(3)}</interserver_http_port>
<listen_host>127.0.0.1</listen_host><path>${d}/data/</path><tmp_path>${d}/tmp/</tmp_path>
<user_files_path>${d}/uf/</user_files_path><format_schema_path>${d}/fs/</format_schema_path>
<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</uncompressed_cache_size>
<users_config>${d}/users.xml</users_config><default_profile>default</default_profile><default_database>default</default_database>
<timezone>UTC</timezone></yandex>`);
fs.writeFileSync(path.join(d, 'users.xml'), `<?xml version="1.0"?><yandex><profiles><default/></profiles><users><default>
<password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default/></quotas></yandex>`);
const ch = new Proc('ch', 'nice', ['/usr/sbin/clickhouse-server', `--config-file=${d}/config.xml`], { cwd: d });
ch.url = `http://127.0.0.1:${P(1)}`;
await waitFor('ch', async () => (await http(`${ch.url}/?query=SELECT%201`, { timeoutMs: 2000 }).catch(() => ({}))).status === 200, 60000);

async function start(bin, name) {
  process.env.PROFD_BIN_SAVED = process.env.PROFD_BIN_SAVED || process.env.PROFD_BIN;
  process.env.PROFD_BIN = bin;
  const p = await startProfd({ storage: path.join(dir, name), port: P(4), name,
    extraArgs: ['--web.threads=32', '--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=diff'] });
  process.env.PROFD_BIN = process.env.PROFD_BIN_SAVED;
  return p;
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const FROM = (T0 - 1000) / 1000, TO = (NOW + 1000) / 1000;
const QUERIES = {
  'one selection, two overlapping ranges': { query_a: 'heap{service="bench"}', query_b: 'heap{service="bench"}',
    from_a: FROM, to_a: (T0 + 150000) / 1000, from_b: (T0 + 50000) / 1000, to_b: TO },
  'two halves of the series, one range': { query_a: 'heap{service="bench", instance_id=~"s..[0-4].*"}', query_b: 'heap{service="bench", instance_id!~"s..[0-4].*"}',
    from_a: FROM, to_a: TO, from_b: FROM, to_b: TO },
};
async function timeAll(p) {
  const out = {};
  for (const [name, q] of Object.entries(QUERIES)) {
    const ms = [];
    let last;
    for (let i = 0; i < RUNS; i++) {
      const s = performance.now();
      last = await http(`${p.base}/api/v1/query?` + qs({ mode: 'diff', mode_a: 'merge', mode_b: 'merge', ...q, report: 'top', limit: 20 }), { timeoutMs: 600000 });
      assert.equal(last.status, 200, last.text.slice(0, 300));
      ms.push(performance.now() - s);
    }
    out[name] = { ms: median(ms), answer: last.json.data };
  }
  return out;
}

console.error(`load before: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
const base = await start(BASE, 'profd-base');
let next = 0;
await Promise.all(Array.from({ length: CLIENTS }, async () => {
  while (next < items.length) {
    const it = items[next++];
    const r = await http(`${base.base}/api/0/profiles?` + qs({ service: 'bench', type: 'heap', instance_id: it.instance, created_at: new Date(it.at).toISOString() }),
      { method: 'POST', body: it.body, timeoutMs: 120000 });
    assert.equal(r.status, 200, r.text);
  }
}));
const tb = await timeAll(base);
await base.stop();
const cur = await start(process.env.PROFD_BIN, 'profd-cur');
const tc = await timeAll(cur);
await cur.stop();
console.error(`load after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
await killAll();
for (const k of Object.keys(QUERIES)) assert.deepEqual(tc[k].answer, tb[k].answer, `${k}: the same answer`);
console.log(`\n${SERIES} series x 4 real heap profiles on one clickhouse-server 18.16, diff report=top, median of ${RUNS} (ms)\n`);
console.log('| diff | two aggregations (base profd) | one pass (this profd) |');
console.log('|---|---:|---:|');
for (const k of Object.keys(QUERIES)) console.log(`| ${k} | ${tb[k].ms.toFixed(0)} | ${tc[k].ms.toFixed(0)} |`);
