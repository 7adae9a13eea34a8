// Issue 35 item 4: group commit on ClickHouse — a lone push goes at once
// (no gathering window after a batch of one), concurrent pushes gather into
// one batch (one INSERT per table) and, after a batch of several, wait for
// each other (the window) until the batch is full; pushes newer than their
// series' last one send no duplicate check, while duplicates are still
// found (also by a restarted profd, which knows nothing yet).
//
// One real clickhouse-server (Debian's 18.16, loopback, free ports), real
// Go heap profiles (shared testdata) pushed through profefe's API by
// concurrent HTTP clients. Asserted on profd's /metrics counters and the
// stored data, never on time: the window is a minute, so a lone push that
// waited for it would fail its request's 30 s timeout, and a batch held in flight by a
// gate between profd and ClickHouse (chGate) lets the next one gather a
// known set of pushes (profd_clickhouse_queued_profiles counts them).
// Skipped (exit 77) where clickhouse-server is not installed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TESTDATA, http, killAll, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { CH_BIN, chGate, chPorts, startClickHouse } from './ch.mjs';

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

function chProfd(name, extra = [], url = ch.url) {
  return startProfd({ storage: path.join(dir, name), name,
    extraArgs: ['--web.threads=32', '--storage.backend=clickhouse', `--clickhouse.url=${url}`, '--clickhouse.database=batch', ...extra] });
}

async function metric(p, name) {
  const r = await http(`${p.base}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} in /metrics`);
  const m = r.text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : 0; // a family with no sample yet is 0
}

async function push(p, inst, at, timeoutMs = 120000) {
  const r = await http(`${p.base}/api/0/profiles?` + qs({ service: 'b', type: 'heap', instance_id: inst, created_at: new Date(at).toISOString() }),
    { method: 'POST', body, timeoutMs });
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

// Holds the batch of one push in flight (the gate shut once it carries
// the INSERT), queues `n` concurrent pushes of instances prefix0.. at `at`
// behind it, opens the gate; resolves when all are acknowledged.
async function behindHeldBatch(p, gate, n, prefix, at) {
  gate.shut();
  const held = push(p, `${prefix}-held`, at - 500);
  await waitFor('the held batch to reach the gate', async () => gate.held() > 0, 60000, 50);
  const q0 = await metric(p, 'profd_clickhouse_queued_profiles');
  const all = Array.from({ length: n }, (_, i) => push(p, `${prefix}${i}`, at));
  await waitFor(`${n} pushes queued behind it`, async () =>
    (await metric(p, 'profd_clickhouse_queued_profiles')) === q0 + n, 60000, 50);
  gate.open();
  await Promise.all([held, ...all]);
}

test('a lone push goes at once; concurrent pushes gather into one batch; newer pushes need no duplicate check', async () => {
  // the rows of one profile (samples rows = its samples), from a first push
  let p = await chProfd('p0');
  await push(p, 'warm', T0);
  const rowsPer = await metric(p, 'profd_clickhouse_inserted_rows_total');
  assert.ok(rowsPer > 10, `rows of one profile: ${rowsPer}`);
  await p.stop();

  const gate = await chGate(ch);
  p = await chProfd('p1', ['--clickhouse.flush-interval=1m', `--clickhouse.batch-rows=${8 * rowsPer}`], gate.url);
  // pushes one after another, each alone in its batch: none waits for the
  // minute (each would fail its 30 s timeout)
  let b0 = await metric(p, 'profd_clickhouse_batches_total');
  for (let i = 0; i < 3; i++) await push(p, 'warm', T0 + 1000 + i, 30000);
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 3, 'three lone pushes, three batches');

  // 8 pushes queued behind a batch in flight: one batch, at once (full at
  // 8 profiles' rows, before the window of a minute)
  b0 = await metric(p, 'profd_clickhouse_batches_total');
  const c0 = await metric(p, 'profd_clickhouse_exist_checks_total');
  await behindHeldBatch(p, gate, 8, 'i', T0 + 2000);
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 2, 'the held push, then 8 queued pushes in one batch');
  assert.equal(await metric(p, 'profd_clickhouse_inserted_profiles_total'), 3 + 1 + 8);
  assert.equal(await metric(p, 'profd_clickhouse_queued_profiles'), 0);
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), c0 + 2, 'new series are checked');

  // after that batch of 8 the window is on: the same 8 series pushed again
  // later, concurrently, wait for each other (not one batch each) until
  // their batch is full — and, known and newer, need no check
  await Promise.all(Array.from({ length: 8 }, (_, i) => push(p, `i${i}`, T0 + 12000)));
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 3, '8 concurrent pushes after a batch of 8: one batch');
  assert.equal(await metric(p, 'profd_clickhouse_exist_checks_total'), c0 + 2, 'no check for newer pushes');

  await p.stop();
  gate.close();

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
  const want = { warm: 4, 'i-held': 1, i0: 3, i1: 4 };
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
  assert.equal(f.json.data['clickhouse.flush-interval'], '1000ms', 'the default window: about one INSERT per second');
  await push(p, 'warm', T0);
  const rowsPer = await metric(p, 'profd_clickhouse_inserted_rows_total');
  await p.stop();
  // 62 pushes queued behind a held batch (a 64th worker stays free for
  // /metrics), then two more: the 64th profile fills the batch (every push
  // worker is waiting on it) and it goes at once, window or not (a minute
  // here, and far below batch-rows)
  const gate = await chGate(ch);
  const q = await startProfd({ storage: path.join(dir, 'p4'), name: 'p4',
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${gate.url}`, '--clickhouse.database=batch3',
      '--clickhouse.flush-interval=1m', `--clickhouse.batch-rows=${1000 * rowsPer}`] });
  const b0 = await metric(q, 'profd_clickhouse_batches_total');
  gate.shut();
  const held = push(q, 'warm', T0 + 1000);
  await waitFor('the held batch to reach the gate', async () => gate.held() > 0, 60000, 50);
  // 45 s timeouts: a batch that waited out the minute would fail them
  const first = Array.from({ length: 62 }, (_, i) => push(q, `f${i}`, T0 + 2000, 45000));
  await waitFor('62 pushes queued behind it', async () =>
    (await metric(q, 'profd_clickhouse_queued_profiles')) === 62, 60000, 50);
  gate.open();
  await held;
  assert.equal(await metric(q, 'profd_clickhouse_queued_profiles'), 62, 'the 62 wait for the window');
  await Promise.all([push(q, 'f62', T0 + 2000, 45000), push(q, 'f63', T0 + 2000, 45000), ...first]);
  assert.equal(await metric(q, 'profd_clickhouse_batches_total'), b0 + 2, 'the held push, then 64 pushes in one batch');
  await q.stop();
  gate.close();
});

// A fleet of few pushes per interval sends a batch per push (the window
// after a batch of one is none); --clickhouse.batch-wait makes every batch
// gather that long. Three pushes arrive one at a time, each seen queued
// alone first: with a wait of a minute they share one batch, sent when it
// is full (batch-rows = three profiles' rows), never by the clock.
test('--clickhouse.batch-wait: pushes arriving one at a time share a batch', async () => {
  let p = await chProfd('bw0');
  await push(p, 'bw-warm', T0 + 30000);
  const rowsPer = await metric(p, 'profd_clickhouse_inserted_rows_total');
  await p.stop();
  p = await chProfd('bw1', ['--clickhouse.flush-interval=1m', '--clickhouse.batch-wait=1m', `--clickhouse.batch-rows=${3 * rowsPer}`]);
  const f = await http(`${p.base}/api/v1/status/flags`);
  assert.equal(f.json.data['clickhouse.batch-wait'], '60000ms');
  await push(p, 'bw-first', T0 + 31000); // the first batch goes at once
  const b0 = await metric(p, 'profd_clickhouse_batches_total');
  const q0 = await metric(p, 'profd_clickhouse_queued_profiles');
  const acks = [];
  for (let i = 0; i < 3; i++) {
    acks.push(push(p, `bw${i}`, T0 + 32000));
    if (i < 2) {
      await waitFor(`push ${i} queued, waiting for company`, async () =>
        (await metric(p, 'profd_clickhouse_queued_profiles')) === q0 + i + 1, 60000, 50);
      assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0, 'nothing sent yet');
    }
  }
  await Promise.all(acks);
  assert.equal(await metric(p, 'profd_clickhouse_batches_total'), b0 + 1, 'three pushes, one batch');
  const got = await profilesOf(p);
  for (const i of ['bw-warm', 'bw-first', 'bw0', 'bw1', 'bw2']) assert.equal(got[i], 1, `${i} stored once`);
  await p.stop();
});

test('bad batch flags are refused naming the flag', async () => {
  for (const [flag, name] of [['--clickhouse.flush-interval=-1s', 'flush-interval'], ['--clickhouse.batch-rows=0', 'batch-rows'], ['--clickhouse.batch-rows=x', 'batch-rows'],
    ['--clickhouse.batch-wait=x', 'batch-wait'], ['--clickhouse.batch-wait=2s', 'batch-wait'],
    ['--clickhouse.cache-size=-1', 'cache-size'], ['--clickhouse.cache-size=1x', 'cache-size'], ['--clickhouse.cache-size=65G', 'cache-size']]) {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.env.PROFD_BIN, ['serve', flag, '--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 2, `${flag}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`--clickhouse.${name}`));
  }
});
