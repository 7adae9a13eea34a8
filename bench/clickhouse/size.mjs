// Bytes per profile in ClickHouse (PROFD_BIN's schema: 6 since issue 35's
// samples by stack; optionally PROFD_BIN_BASE's, e.g. an older schema) vs the
// embedded blocks vs conprof's zstd groups, on the same real consecutive
// profiles (issues 16 and 35, item "Size").
// Run by hand (not in ctest):
//
//   PROFD_BIN=build/profd [PROFD_BIN_BASE=/path/to/profd-of-schema-v1] \
//     node bench/clickhouse/size.mjs DATA_DIR
//
// DATA_DIR/<type>/NNNNNN.pb.gz as bench/storage_size/collect.sh writes them
// (consecutive profiles of one real Go process per type). env: PORT0=19470
// (ports PORT0..PORT0+9, loopback), N (profiles per type; default all),
// CH_ZSTD=1 (ClickHouse's server-wide <compression> set to zstd for every part),
// STEP_MS=1000 (the spacing of a series' profiles in time: aggs_v1 and, since
// schema 6, the samples rows are laid out per 10-minute bucket, so 10000 — a
// scrape every 10 s — is the realistic figure, 1000 puts all 150 in one bucket),
// T0_PHASE_MS (the first profile's offset in its 10-minute bucket: 150 profiles
// 10 s apart span 3 or 4 buckets by it, ±10 B/p; default: wherever now - 3 h falls).
//
// Each type is one series, its profiles pushed in order through profefe's
// API STEP_MS apart to profd on a fresh ClickHouse database (one per profd
// binary), then every MergeTree table (aggs_v1 since schema 5;
// stack_samples_v1 since 6, counted as "samples"; locations_v1 since 7,
// counted as "stacks") is OPTIMIZE FINAL'd and
// measured, also apart per table: bytes on disk of its active parts (system.parts), per
// column (system.columns: compressed, uncompressed, marks) and, for profiles, the
// compressed bytes of the body column apart. Beside it: the embedded block
// `profd tsdb import` writes from the same files (du of the block dirs),
// conprof (the gunzipped profiles in consecutive groups of 12, `zstd -3`
// each), and what a zstd-compressed body would add per profile (each
// gunzipped profile alone through `zstd -3`: the v2 + zstd-body option).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { Proc, http, killAll, qs, startProfd, tempDir, waitFor } from '../../tests/e2e/lib.mjs';

const DATA = process.argv[2];
if (!DATA) {
  console.error('usage: node bench/clickhouse/size.mjs DATA_DIR  (DATA_DIR/<type>/*.pb.gz)');
  process.exit(2);
}
const PORT0 = Number(process.env.PORT0 || 19470);
const N = Number(process.env.N || 0);
const STEP_MS = Number(process.env.STEP_MS || 1000); // between a series' profiles
const CH_BIN = '/usr/sbin/clickhouse-server';
const dir = tempDir('pd-chsize-');
process.on('exit', () => { if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true }); });

// profefe type names for the push (allocs is pushed as heap, as net/http/pprof serves it)
const TYPES = { heap: 'heap', allocs: 'heap', goroutine: 'goroutine', cpu: 'cpu' };
const sets = {};
for (const t of Object.keys(TYPES)) {
  const d = path.join(DATA, t);
  if (!fs.existsSync(d)) continue;
  let files = fs.readdirSync(d).filter((f) => f.endsWith('.pb.gz')).sort().map((f) => path.join(d, f));
  if (N) files = files.slice(0, N);
  sets[t] = files;
}
assert.ok(Object.keys(sets).length, `no profiles under ${DATA}/{heap,allocs,goroutine,cpu}`);

async function startCH(name, http_, tcp, inter) {
  const d = path.join(dir, name);
  fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(d, 'config.xml'), `<?xml version="1.0"?><yandex>
<logger><level>warning</level><log>${d}/server.log</log><errorlog>${d}/err.log</errorlog><size>10M</size><count>1</count></logger>
<http_port>${http_}</http_port><tcp_port>${tcp}</tcp_port><interserver_http_port>${inter}</interserver_http_port>
<listen_host>127.0.0.1</listen_host><path>${d}/data/</path><tmp_path>${d}/tmp/</tmp_path>
<user_files_path>${d}/uf/</user_files_path><format_schema_path>${d}/fs/</format_schema_path>
<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0</uncompressed_cache_size>
<users_config>${d}/users.xml</users_config><default_profile>default</default_profile><default_database>default</default_database>
<timezone>UTC</timezone>${process.env.CH_ZSTD ? '<compression><case><method>zstd</method></case></compression>' : ''}</yandex>`);
  fs.writeFileSync(path.join(d, 'users.xml'), `<?xml version="1.0"?><yandex><profiles><default/></profiles><users><default>
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

const P = (i) => PORT0 + i;
console.error(`load before: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; nproc ${os.cpus().length}; ${os.cpus()[0].model}`);
const ch = await startCH('ch', P(1), P(2), P(3));
// T0_PHASE_MS: where the first profile falls in its 10-minute bucket (default: wherever
// now - 3 h does); 150 profiles 10 s apart span 3 or 4 buckets by it (±10 B/p)
const T0r = Date.now() - 3 * 3600 * 1000;
const T0 = process.env.T0_PHASE_MS !== undefined ? T0r - (T0r % 600000) + Number(process.env.T0_PHASE_MS) - 600000 : T0r;
{
  const n = Math.max(...Object.values(sets).map((f) => f.length));
  console.error(`first profile at ${T0 % 600000} ms into its 10-minute bucket; a series spans ${Math.floor((T0 + (n - 1) * STEP_MS) / 600000) - Math.floor(T0 / 600000) + 1} buckets`);
}

// One database per (profd binary, type): bytes per type apart.
async function clickhouseBytes(bin, label, port) {
  const out = {};
  process.env.PROFD_BIN_SAVED = process.env.PROFD_BIN_SAVED || process.env.PROFD_BIN;
  process.env.PROFD_BIN = bin;
  for (const [t, files] of Object.entries(sets)) {
    const db = `size_${label}_${t}`;
    const p = await startProfd({ storage: path.join(dir, `x-${db}`), port, name: `profd-${db}`,
      extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, `--clickhouse.database=${db}`] });
    for (let k = 0; k < files.length; k++) {
      const r = await http(`${p.base}/api/0/profiles?` + qs({ service: 'size', type: TYPES[t], instance_id: t, created_at: new Date(T0 + k * STEP_MS).toISOString() }),
        { method: 'POST', body: fs.readFileSync(files[k]), timeoutMs: 120000 });
      assert.equal(r.status, 200, `${label} ${files[k]}: ${r.text}`);
    }
    await p.stop();
    const tables = {};
    const cols = {};
    // schema v3 (issue 35) writes *_v3 tables; older profds the plain names
    const sfx = Number(await chq(ch, `SELECT count() FROM system.tables WHERE database='${db}' AND name='profiles_v3'`)) ? '_v3' : '';
    // every MergeTree table of the database (aggs_v1 since schema 5, ...):
    // the classic five by their short names, the others by their own
    const names = (await chq(ch, `SELECT name FROM system.tables WHERE database='${db}' AND engine LIKE '%MergeTree' AND name != 'schema_version' AND name != 'retention'`)).split('\n').filter(Boolean);
    const short = (nm) => (sfx && nm.endsWith(sfx) && ['profiles', 'samples', 'stacks', 'series', 'series_index'].includes(nm.slice(0, -sfx.length)) ? nm.slice(0, -sfx.length) : nm);
    for (const full of names) {
      const tb = short(full);
      // OPTIMIZE is a no-op while a background merge holds the parts: again
      // until each partition is one part (else a run measures unmerged parts)
      for (let k = 0; k < 60; k++) {
        await chq(ch, `OPTIMIZE TABLE ${db}.${full} FINAL`);
        const [parts, parts1] = (await chq(ch, `SELECT count(), uniqExact(partition) FROM system.parts WHERE active AND database='${db}' AND table='${full}'`)).split('\t').map(Number);
        if (parts === parts1) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      tables[tb] = Number(await chq(ch, `SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database='${db}' AND table='${full}'`));
      // per column: compressed / uncompressed / marks bytes (system.columns)
      for (const line of (await chq(ch, `SELECT name, data_compressed_bytes, data_uncompressed_bytes, marks_bytes FROM system.columns WHERE database='${db}' AND table='${full}'`)).split('\n').filter(Boolean)) {
        const [cn, cb, ub, mb] = line.split('\t');
        cols[`${full}.${cn}`] = [Number(cb), Number(ub), Number(mb)];
      }
      const [pk, pb] = (await chq(ch, `SELECT sum(primary_key_bytes_in_memory), sum(bytes_on_disk) - sum(data_compressed_bytes) FROM system.parts WHERE active AND database='${db}' AND table='${full}'`)).split('\t').map(Number);
      cols[`${full}.(primary.idx, marks, checksums…)`] = [pb, pk, 0];
    }
    // schema 6 writes the samples rows into stack_samples_v1 (samples_v3 stays, empty)
    if (tables.stack_samples_v1 !== undefined) {
      tables.samples = (tables.samples || 0) + tables.stack_samples_v1;
      delete tables.stack_samples_v1;
    }
    // schema 7 writes the location rows into locations_v1 (stacks_v3 keeps the stack rows)
    if (tables.locations_v1 !== undefined) {
      tables.stacks = (tables.stacks || 0) + tables.locations_v1;
      delete tables.locations_v1;
    }
    // schema 8 writes the profiles rows into profiles_v4 (profiles_v3 stays, empty)
    const v4 = names.includes('profiles_v4');
    if (v4) {
      tables.profiles = (tables.profiles || 0) + tables.profiles_v4;
      delete tables.profiles_v4;
    }
    const body = Number(await chq(ch, `SELECT sum(data_compressed_bytes) FROM system.columns WHERE database='${db}' AND table='${v4 ? 'profiles_v4' : `profiles${sfx}`}' AND name='body'`));
    const rows = Number(await chq(ch, `SELECT count() FROM ${db}.samples${sfx}`)) +
      (names.includes('stack_samples_v1') ? Number(await chq(ch, `SELECT count() FROM ${db}.stack_samples_v1`)) : 0);
    const n = Number(await chq(ch, `SELECT count() FROM ${db}.${v4 ? 'profiles_all' : `profiles${sfx}`}`));
    assert.equal(n, files.length, `${label} ${t}: every profile stored`);
    // stacks_v3 rows by kind: schema-4 stacks (80 00 01), locations (80 00 02; since
    // schema 7 locations_v1's rows, 80 00 03), schema-3 stacks
    const kinds = sfx ? await chq(ch, `SELECT countIf(substring(stack, 1, 3) = unhex('800001')), countIf(substring(stack, 1, 3) = unhex('800002')) + ${names.includes('locations_v1') ? `(SELECT uniqExact(loc_key) FROM ${db}.locations_v1)` : 0}, count() FROM (SELECT stack_hash, any(stack) AS stack FROM ${db}.stacks${sfx} GROUP BY stack_hash)`) : '';
    out[t] = { tables, cols, body, rows, n, kinds };
  }
  process.env.PROFD_BIN = process.env.PROFD_BIN_SAVED;
  return out;
}

const v2 = await clickhouseBytes(process.env.PROFD_BIN, 'v2', P(4));
const v1 = process.env.PROFD_BIN_BASE ? await clickhouseBytes(process.env.PROFD_BIN_BASE, 'v1', P(5)) : null;

// the embedded block, conprof's groups and a zstd body, per type
const other = {};
for (const [t, files] of Object.entries(sets)) {
  const imp = path.join(dir, `imp-${t}`);
  const blk = path.join(dir, `blk-${t}`);
  fs.mkdirSync(imp);
  files.forEach((f, i) => fs.copyFileSync(f, path.join(imp, `p${String(i).padStart(6, '0')}.pb.gz`)));
  execFileSync(process.env.PROFD_BIN, ['tsdb', 'import', '--storage.path', blk, '--storage.retention.time=10000d', '--label', 'job=size', imp], { stdio: 'ignore' });
  let block = 0;
  for (const e of fs.readdirSync(blk, { withFileTypes: true })) {
    if (e.isDirectory() && /^[0-9A-Z]{26}$/.test(e.name)) block += Number(execFileSync('du', ['-sb', path.join(blk, e.name)]).toString().split('\t')[0]);
  }
  const raws = files.map((f) => zlib.gunzipSync(fs.readFileSync(f)));
  let conprof = 0;
  for (let i = 0; i < raws.length; i += 12) conprof += execFileSync('zstd', ['-3', '-c', '-q'], { input: Buffer.concat(raws.slice(i, i + 12)), maxBuffer: 1 << 30 }).length;
  let zbody = 0;
  for (const r of raws) zbody += execFileSync('zstd', ['-3', '-c', '-q'], { input: r, maxBuffer: 1 << 30 }).length;
  const gz = files.reduce((s, f) => s + fs.statSync(f).size, 0);
  other[t] = { n: files.length, gz, block, conprof, zbody, samples: 0 };
}
console.error(`load after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
await killAll();

const f = (x) => Math.round(x).toLocaleString('en-US');
const tot = (o) => Object.values(o.tables).reduce((a, b) => a + b, 0);
console.log('\nBytes per profile (B/p), the same files per row:\n');
console.log('| type | n | gzip as served | conprof (zstd -3, groups of 12) | embedded block | ClickHouse, PROFD_BIN | of which profiles / samples / stacks / series+index | samples rows/p |' +
  (v1 ? ' ClickHouse, PROFD_BIN_BASE | of which body |' : '') + ' PROFD_BIN + zstd body |');
console.log('|---|---:|---:|---:|---:|---:|---|---:|' + (v1 ? '---:|---:|' : '') + '---:|');
const sum = { n: 0, gz: 0, block: 0, conprof: 0, zbody: 0, v2: 0, v1: 0, v1body: 0, rows: 0, tb: {} };
for (const t of Object.keys(sets)) {
  const o = other[t];
  const a = v2[t];
  const n = o.n;
  const tb = a.tables;
  sum.n += n; sum.gz += o.gz; sum.block += o.block; sum.conprof += o.conprof; sum.zbody += o.zbody; sum.v2 += tot(a); sum.rows += a.rows;
  for (const [k, v] of Object.entries(tb)) sum.tb[k] = (sum.tb[k] || 0) + v;
  if (v1) { sum.v1 += tot(v1[t]); sum.v1body += v1[t].body; }
  console.log(`| ${t} | ${n} | ${f(o.gz / n)} | ${f(o.conprof / n)} | ${(o.block / n).toFixed(1)} | **${f(tot(a) / n)}** | ${f(tb.profiles / n)} / ${f(tb.samples / n)} / ${f(tb.stacks / n)} / ${f((tb.series + tb.series_index) / n)} | ${(a.rows / n).toFixed(0)} |` +
    (v1 ? ` ${f(tot(v1[t]) / n)} | ${f(v1[t].body / n)} |` : '') + ` ${f((tot(a) + o.zbody) / n)} |`);
}
const n = sum.n;
console.log(`| ALL | ${n} | ${f(sum.gz / n)} | ${f(sum.conprof / n)} | ${(sum.block / n).toFixed(1)} | **${f(sum.v2 / n)}** | ${f(sum.tb.profiles / n)} / ${f(sum.tb.samples / n)} / ${f(sum.tb.stacks / n)} / ${f((sum.tb.series + sum.tb.series_index) / n)} | ${(sum.rows / n).toFixed(0)} |` +
  (v1 ? ` ${f(sum.v1 / n)} | ${f(sum.v1body / n)} |` : '') + ` ${f((sum.v2 + sum.zbody) / n)} |`);
for (const [lab, r] of [['PROFD_BIN', v2], ['PROFD_BIN_BASE', v1]]) {
  if (!r) continue;
  const names = [...new Set(Object.values(r).flatMap((o) => Object.keys(o.tables)))].sort();
  console.log(`\n${lab}, B/p per table:\n\n| type | ${names.join(' | ')} | total |\n|---|${names.map(() => '---:|').join('')}---:|`);
  const all = {};
  let nn = 0;
  for (const t of Object.keys(sets)) {
    const o = r[t];
    nn += o.n;
    for (const k of names) all[k] = (all[k] || 0) + (o.tables[k] || 0);
    console.log(`| ${t} | ${names.map((k) => f((o.tables[k] || 0) / o.n)).join(' | ')} | ${f(tot(o) / o.n)} |`);
  }
  console.log(`| ALL | ${names.map((k) => f(all[k] / nn)).join(' | ')} | ${f(Object.values(all).reduce((a, b) => a + b, 0) / nn)} |`);
}
console.log('\nstacks rows per type (schema-4 stacks, locations (stacks_v3 + locations_v1), distinct keys of stacks_v3): ' +
  Object.keys(sets).map((t) => `${t} ${v2[t].kinds.split('\t').join(' / ')}`).join('; '));

// per column, all types together: compressed B/p (uncompressed B/p)
for (const [lab, r] of [['PROFD_BIN', v2], ['PROFD_BIN_BASE', v1]]) {
  if (!r) continue;
  const all = {};
  let nn = 0;
  for (const o of Object.values(r)) {
    nn += o.n;
    for (const [k, v] of Object.entries(o.cols)) {
      const a = (all[k] = all[k] || [0, 0, 0, {}]);
      a[0] += v[0]; a[1] += v[1]; a[2] += v[2];
    }
  }
  for (const [t, o] of Object.entries(r)) for (const [k, v] of Object.entries(o.cols)) all[k][3][t] = v[0] / o.n;
  const types = Object.keys(r);
  console.log(`\n${lab}, per column (system.columns after OPTIMIZE FINAL; the last row of a table: bytes on disk outside column data = marks, primary index, checksums):\n`);
  console.log(`| table.column | compressed B/p | uncompressed B/p | marks B/p | ${types.join(' | ')} |\n|---|---:|---:|---:|${types.map(() => '---:|').join('')}`);
  for (const [k, a] of Object.entries(all).sort((x, y) => y[1][0] - x[1][0])) {
    if (!a[0] && !a[1]) continue;
    const isx = k.includes('(primary');
    console.log(`| ${k} | ${(a[0] / nn).toFixed(1)} | ${isx ? '' : (a[1] / nn).toFixed(1)} | ${isx ? '' : (a[2] / nn).toFixed(1)} | ${types.map((t) => (a[3][t] || 0).toFixed(1)).join(' | ')} |`);
  }
}
