// Issue 35 item 4: group commit on ClickHouse — concurrent pushes gather
// into one batch (one INSERT per table), and pushes newer than their
// series' last one send no duplicate check, while duplicates are still
// found (also by a restarted profd, which knows nothing yet).
//
// One real clickhouse-server (Debian's 18.16, loopback, free ports), real
// Go heap profiles (shared testdata) pushed through profefe's API by
// concurrent HTTP clients. Asserted on profd's /metrics counters and the
// stored data, never on time: the gathering window is 1 minute and the
// batch goes when it holds the rows of the 8 pushes (--clickhouse.batch-rows),
// so it is one batch however slow the machine.
// Skipped (exit 77) where clickhouse-server is not installed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TESTDATA, http, killAll, qs, startProfd, tempDir } from './lib.mjs';
import { CH_BIN, chPorts, startClickHouse } from './ch.mjs';

if (!CH_BIN) {
  console.log('SKIP: clickhouse-server is not installed (Debian 12: apt-get install clickhouse-server)');
  process.exit(77);
}

const dir = tempDir('pd-chbatch-');
after(async () => {
  await killAll();
  if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true });
});

const ch = await startClickHouse(dir, 'ch', await chPorts());
const file = path.join(TESTDATA, 'pprof', 'go-demo-series',
  fs.readdirSync(path.join(TESTDATA, 'pprof', 'go-demo-series')).filter((f) => f.startsWith('heap-')).sort()[0]);
const body = fs.readFileSync(file);
const T0 = Date.now() - 600000;

function chProfd(name, extra = []) {
  return startProfd({ storage: path.join(dir, name), name,
    extraArgs: ['--web.threads=32', '--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=batch', ...extra] });
}

async function metric(p, name) {
  const r = await http(`${p.base}/metrics`);
  assert.equal(r.status, 200);
  const m = r.text.match(new RegExp(`^${name} ([0-9.e+]+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

async function push(p, inst, at) {
  const r = await http(`${p.base}/api/0/profiles?` + qs({ service: 'b', type: 'heap', instance_id: inst, created_at: new Date(at).toISOString() }),
    { method: 'POST', body, timeoutMs: 120000 });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

async function profilesOf(p) {
  const r = await http(`${p.base}/api/v1/query_range?` + qs({ query: 'heap{service="b"}', from: (T0 - 60000) / 1000, to: (Date.now() + 1000) / 1000 }));
  assert.equal(r.status, 200, r.text);
  const out = {};
  for (const s of r.json.data) out[s.labels.instance_id] = new Set(s.timestamps).size;
  return out;
}

test('concurrent pushes gather into one batch; newer pushes need no duplicate check', async () => {
  // the rows of one profile (samples rows = its samples), from a first push
  let p = await chProfd('p0');
  await push(p, 'warm', T0);
  const rowsPer = await metric(p, 'profd_clickhouse_inserted_rows_total');
  assert.ok(rowsPer > 10, `rows of one profile: ${rowsPer}`);
  await p.stop();

  p = await chProfd('p1', ['--clickhouse.flush-interval=1m', `--clickhouse.batch-rows=${8 * rowsPer}`]);
  await push(p, 'warm', T0 + 1000); // the first batch goes at once; the next waits
  const b0 = await metric(p, 'profd_clickhouse_batches_total');
  const c0 = await metric(p, 'profd_clickhouse_exist_checks_total');
  await Promise.all(Array.from({ length: 8 }, (_, i) => push(p, `i${i}`, T0 + 2000)));
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 1, '8 concurrent pushes, one batch');
  assert.equal(await metric(p, 'profd_clickhouse_inserted_profiles_total'), 1 + 8);
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), c0 + 1, 'new series are checked');

  // the same 8 series, each pushed again later: known and newer, no check
  await Promise.all(Array.from({ length: 8 }, (_, i) => push(p, `i${i}`, T0 + 12000)));
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 2);
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), c0 + 1, 'no check for newer pushes');

  await p.stop();

  // a push at a time already stored is still found (then moved to the next
  // ms, the push rule): by a restarted profd, which knows no series yet
  // (the taken ms checked, then the next one), and for a series it knows
  p = await chProfd('p2', ['--clickhouse.flush-interval=0']);
  await push(p, 'i0', T0 + 12000);
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), 2);
  await push(p, 'i1', T0 + 22000); // a series new to this profd: checked
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), 3);
  await push(p, 'i1', T0 + 22000); // not newer than its last: checked, found
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), 4);

  // every acknowledged push is stored, once
  const got = await profilesOf(p);
  const want = { warm: 2, i0: 3, i1: 4 };
  for (let i = 2; i < 8; i++) want[`i${i}`] = 2;
  assert.deepEqual(got, want);
  await p.stop();
});

test('without --web.threads a ClickHouse-backed profd has workers for a fleet\'s batch (64)', async () => {
  // a push holds its worker until its batch is acknowledged: with the
  // embedded store's 4 workers a batch could never hold more than 4 pushes
  const p = await startProfd({ storage: path.join(dir, 'p3'), name: 'p3',
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=batch3'] });
  const f = await http(`${p.base}/api/v1/status/flags`);
  assert.equal(f.json.data['web.threads'], '64');
  await push(p, 'warm', T0);
  const rowsPer = await metric(p, 'profd_clickhouse_inserted_rows_total');
  await p.stop();
  const q = await startProfd({ storage: path.join(dir, 'p4'), name: 'p4',
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=batch3',
      '--clickhouse.flush-interval=1m', `--clickhouse.batch-rows=${32 * rowsPer}`] });
  await push(q, 'warm', T0 + 1000); // the first batch goes at once; the next waits
  const b0 = await metric(q, 'profd_clickhouse_batches_total');
  await Promise.all(Array.from({ length: 32 }, (_, i) => push(q, `f${i}`, T0 + 2000)));
  assert.equal(await metric(q, 'profd_clickhouse_batches_total'), b0 + 1, '32 concurrent pushes, one batch');
  await q.stop();
});

test('bad batch flags are refused naming the flag', async () => {
  for (const [flag, name] of [['--clickhouse.flush-interval=-1s', 'flush-interval'], ['--clickhouse.batch-rows=0', 'batch-rows'], ['--clickhouse.batch-rows=x', 'batch-rows']]) {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.env.PROFD_BIN, ['serve', flag, '--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 2, `${flag}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`--clickhouse.${name}`));
  }
});
