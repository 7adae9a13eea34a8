// Issue 35 item 3 "no slow window after a restart", on the real profd binary
// with real Go heap profiles pushed through profefe's API and the merged
// answer read by `go tool pprof -raw` (a real client):
//   - after a clean stop (SIGTERM) the head snapshot is written, and the next
//     start adopts it: at the moment /-/ready first answers 200 no head
//     profile is WAL-only (profd_storage_head_wal_only_profiles 0) and the
//     answers equal those before the restart;
//   - after a kill -9 (no snapshot), /-/ready answers 200 only once the
//     replayed profiles are decomposed (the gauge is 0 then too);
//   - a damaged or truncated snapshot is ignored (logged, counted in
//     profd_storage_head_snapshot_loads_total{result="damaged"}) and removed,
//     and the answers are still complete from the WAL;
//   - kill -9 while the snapshot is being written (SIGTERM, then SIGKILL as
//     soon as head.snapshot.tmp shows) loses nothing acknowledged.
// No duration is asserted: the speed is bench/startup/restart.sh's.
import { test, after } from 'node:test';
import crypto from 'node:crypto';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Proc, TESTDATA, apiData, freePort, goEnv, http, killAll, profdBin, qs, run, sleep, tempDir, waitFor } from './lib.mjs';

after(killAll);

const SERIES = 150;
const PER = 6;
const SERIES_DIR = path.join(TESTDATA, 'pprof', 'go-demo-series');
const bodies = Array.from({ length: 30 }, (_, i) =>
  fs.readFileSync(path.join(SERIES_DIR, `heap-${String(i + 1).padStart(4, '0')}.pb.gz`)));
const T0 = Math.floor(Date.now() / 1000) - PER * 60 - 120;
const SEL = '{service="restart",__name__="heap"}';

async function metric(base, name, labels = '') {
  const r = await http(base + '/metrics');
  const esc = labels.replace(/[{}"=]/g, (c) => '\\' + c);
  const m = r.text.match(new RegExp(`^${name}${labels ? esc : ''} ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : null;
}

// Starts profd and polls /-/ready every 20 ms; at its first 200 reads the
// WAL-only gauge (before anything else can decompose more: the reading is
// of the state /-/ready reported). Returns {proc, walOnlyAtReady, saw503}.
async function start(storage, port) {
  const proc = new Proc('profd', profdBin(), ['serve', `--storage.path=${storage}`,
    `--web.listen-address=127.0.0.1:${port}`, '--storage.block-duration=1000h',
    '--storage.retention.time=100y', '--log.level=info']);
  proc.base = `http://127.0.0.1:${port}`;
  let saw503 = false;
  await waitFor('/-/ready', async () => {
    if (proc.exited) throw new Error(`profd exited\n${proc.tail()}`);
    const r = await http(proc.base + '/-/ready', { timeoutMs: 30000 }).catch(() => null);
    if (r && r.status === 503) saw503 = true;
    return r && r.status === 200;
  }, 120000, 20);
  const walOnlyAtReady = await metric(proc.base, 'profd_storage_head_wal_only_profiles');
  return { proc, walOnlyAtReady, saw503 };
}

async function push(base, n0, n1) {
  let next = n0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < n1) {
      const i = next++;
      const s = Math.floor(i / PER), j = i % PER;
      const r = await http(`${base}/api/0/profiles?` + qs({
        service: 'restart', type: 'heap', instance_id: `i-${s}`, created_at: String(T0 + 30 + j * 60),
      }), { method: 'POST', body: bodies[i % bodies.length], headers: { 'Content-Type': 'application/octet-stream' } });
      assert.equal(r.status, 200, `push ${i}: HTTP ${r.status} ${r.text}`);
    }
  }));
}

// What a user sees: every stored point (series -> timestamps) and the merge
// of all of them as `go tool pprof -traces` prints it (samples by name, sorted).
async function answers(base, dir) {
  const range = await apiData(base, '/api/v1/query_range?' + qs({ query: SEL, from: String(T0), to: String(T0 + PER * 60 + 60) }));
  const points = range.map((s) => `${JSON.stringify(s.labels ?? s.metric ?? '')} ${s.timestamps.join(',')}`).sort();
  const url = `${base}/api/v1/query?` + qs({ mode: 'merge', query: SEL, from: String(T0), to: String(T0 + PER * 60 + 60), report: 'proto' });
  const r = await run('go', ['tool', 'pprof', '-traces', url], { env: goEnv(dir) });
  assert.equal(r.code, 0, `go tool pprof -traces: ${r.stderr}`);
  // one block per sample (values and its stack by name), in any order
  const blocks = r.stdout.split(/^-+\+-+$/m);
  const samples = blocks.slice(1).map((b) => b.trim()).filter((b) => b).sort();
  assert.ok(samples.length > 0, `go tool pprof -traces printed no samples:\n${r.stdout.slice(0, 500)}`);
  return { n: range.reduce((k, s) => k + s.timestamps.length, 0), points, samples };
}

test('restarts: the head snapshot after a clean stop, /-/ready after a kill -9, damaged snapshots ignored', { timeout: 580000 }, async () => {
  const dir = tempDir('profd-restart-');
  const storage = path.join(dir, 'data');
  const snap = path.join(storage, 'head.snapshot');
  const port = await freePort();
  let { proc } = await start(storage, port);
  await push(proc.base, 0, SERIES * PER);
  const want = await answers(proc.base, dir);
  assert.equal(want.n, SERIES * PER);
  assert.ok(want.samples.length > 0);

  // 1. clean stop: the snapshot is written; the next start adopts it
  assert.equal((await proc.stop()).code, 0, proc.tail());
  assert.ok(fs.existsSync(snap), `no ${snap} after a clean stop\n${proc.tail()}`);
  let r = await start(storage, port);
  proc = r.proc;
  assert.equal(r.walOnlyAtReady, 0, 'WAL-only head profiles when /-/ready turned 200 after a clean stop');
  assert.equal(await metric(proc.base, 'profd_storage_head_snapshot_loads_total', '{result="loaded"}'), 1);
  assert.ok(!fs.existsSync(snap), 'the snapshot is read once (removed at open)');
  sameAnswers(await answers(proc.base, dir), want, 'answers after a clean restart');

  // 2. kill -9: no snapshot; /-/ready waits for the decomposition
  proc.kill('SIGKILL');
  await proc.wait();
  assert.ok(!fs.existsSync(snap));
  r = await start(storage, port);
  proc = r.proc;
  assert.equal(r.walOnlyAtReady, 0, 'WAL-only head profiles when /-/ready turned 200 after kill -9');
  t_diag(`after kill -9: /-/ready answered 503 before 200: ${r.saw503}`);
  sameAnswers(await answers(proc.base, dir), want, 'answers after kill -9');

  // 3. a damaged snapshot (one flipped byte in the payload), then a truncated one
  for (const how of ['flip', 'truncate']) {
    assert.equal((await proc.stop()).code, 0, proc.tail());
    const buf = fs.readFileSync(snap);
    if (how === 'flip') {
      buf[Math.floor(buf.length / 2)] ^= 0x5a;
      fs.writeFileSync(snap, buf);
    } else {
      fs.writeFileSync(snap, buf.subarray(0, Math.floor(buf.length * 0.7)));
    }
    r = await start(storage, port);
    proc = r.proc;
    assert.equal(await metric(proc.base, 'profd_storage_head_snapshot_loads_total', '{result="damaged"}'), 1, `${how}: counted as damaged`);
    assert.equal(await metric(proc.base, 'profd_storage_head_snapshot_loads_total', '{result="loaded"}'), 0);
    assert.match(proc.out, /head snapshot ignored and removed.*reason=damaged/, `${how}: logged`);
    assert.ok(!fs.existsSync(snap), `${how}: the damaged snapshot is removed`);
    assert.equal(r.walOnlyAtReady, 0);
    sameAnswers(await answers(proc.base, dir), want, `${how}: answers complete from the WAL`);
  }

  // 4. more profiles, then kill -9 while the snapshot is written: nothing
  // acknowledged is lost (the WAL is the truth; a .tmp left is removed)
  await push(proc.base, SERIES * PER, SERIES * PER + 300);
  const want2 = await answers(proc.base, dir);
  assert.equal(want2.n, SERIES * PER + 300);
  proc.kill('SIGTERM');
  const tmp = snap + '.tmp';
  let caught = false;
  for (let i = 0; i < 20000 && !proc.exited; i++) {
    if (fs.existsSync(tmp)) {
      caught = true;
      break;
    }
    await sleep(0);
  }
  proc.kill('SIGKILL');
  await proc.wait();
  t_diag(`kill -9 while ${caught ? 'head.snapshot.tmp existed' : 'stopping (the .tmp was not seen)'}`);
  r = await start(storage, port);
  proc = r.proc;
  assert.ok(!fs.existsSync(tmp), 'an unfinished snapshot is removed at open');
  assert.equal(r.walOnlyAtReady, 0);
  sameAnswers(await answers(proc.base, dir), want2, 'answers after kill -9 during the snapshot write');
  await proc.stop();
});

// Equal answers, with a short message (the first differing sample) when not.
function sameAnswers(got, want, what) {
  assert.equal(got.n, want.n, `${what}: profiles stored`);
  assert.equal(got.points.join('\n'), want.points.join('\n'), `${what}: series and timestamps`);
  const h = (v) => crypto.createHash('sha256').update(v.join('\n--\n')).digest('hex');
  if (h(got.samples) !== h(want.samples)) {
    const i = got.samples.findIndex((x, k) => x !== want.samples[k]);
    assert.fail(`${what}: the merge differs (${got.samples.length} vs ${want.samples.length} samples); ` +
      `first difference:\n${got.samples[i]}\n-- want --\n${want.samples[i]}`);
  }
}

function t_diag(msg) { process.stdout.write(`# ${msg}\n`); }
