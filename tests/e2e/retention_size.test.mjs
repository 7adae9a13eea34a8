// Issue 27: --storage.retention.size bounds the whole store (blocks, WAL,
// series file). The real profd with --storage.retention.size=3MB takes real
// Go heap profiles (profefe API, 24 services whose pods churn over 16 names)
// whose timestamps, set by
// the test, are spread over 5 h; after every round of pushes and at every
// second the bytes of every file under --storage.path are summed and must
// stay <= 4.5 MB (limit + one WAL segment + one block or aggregates file
// in flight). At the
// end the newest profile of every service is still listed by query_range
// and served, and the store really held more than the limit's worth
// (retention deleted blocks), so the bound was exercised. No wall-clock
// assertion: the test counts bytes, not time.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startProfd, tempDir, http, TESTDATA, killAll, qs, waitFor } from './lib.mjs';

test.after(killAll);

const LIMIT = 3 * 1024 * 1024;
const BOUND = 4.5 * 1024 * 1024;

const metric = (text, name) => {
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
};

// every file under dir, apparent size (what `du --apparent-size` adds up);
// files: [path, bytes] of each, for the failure message
function storeBytes(dir, files) {
  let sum = 0;
  const walk = (d) => {
    let ents;
    try { ents = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
    for (const e of ents) {
      const p = path.join(d, e.name);
      try {
        if (e.isDirectory()) walk(p);
        else {
          const n = fs.statSync(p).size;
          sum += n;
          if (files) files.push([path.relative(dir, p), n]);
        }
      } catch { /* removed meanwhile */ }
    }
  };
  walk(dir);
  return sum;
}

test('--storage.retention.size=3MB keeps the whole store under limit + segment + block; newest data served', { timeout: 540000 }, async () => {
  const dir = tempDir('pd-e2e-retsize-');
  const storage = path.join(dir, 'data');
  const p = await startProfd({ storage, extraArgs: ['--storage.retention.size=3MB'] });
  const heaps = [];
  for (const sub of ['go-demo-series', 'go-demo-once']) {
    const d = path.join(TESTDATA, 'pprof', sub);
    for (const f of fs.readdirSync(d).filter((x) => x.startsWith('heap') || x.startsWith('allocs')).sort())
      heaps.push(fs.readFileSync(path.join(d, f)));
  }
  assert.ok(heaps.length >= 10, 'real heap profiles in testdata');
  const services = Array.from({ length: 24 }, (_, i) => `svc-${i}`);
  const ROUNDS = 300;
  const span = 5 * 3600; // seconds of timestamps
  const t0 = Math.floor(Date.now() / 1000) - span - 60;
  let peak = 0, pushed = 0, samples = 0, refusals = 0;
  const sample = () => {
    const files = [];
    const b = storeBytes(storage, files);
    samples++;
    if (b > peak) peak = b;
    if (b > BOUND) {
      const list = files.sort((x, y) => y[1] - x[1]).map(([f, n]) => `${f} ${n}`).join('\n  ');
      assert.fail(`store holds ${b} bytes > ${BOUND} after ${pushed} bytes pushed:\n  ${list}`);
    }
  };
  const timer = setInterval(() => { try { sample(); } catch (e) { timer.err = e; } }, 1000);
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const ts = t0 + Math.floor((r * span) / ROUNDS);
      const created = new Date(ts * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
      for (let g = 0; g < services.length; g += 8) { /* 8 connections at once */
        await Promise.all(services.slice(g, g + 8).map(async (svc, j) => {
          const body = heaps[(r + g + j) % heaps.length];
          const url = `${p.base}/api/0/profiles?` + qs({ service: svc, type: 'heap', created_at: created, labels: `pod=p${(r + g + j) % 16}` });
          let res = await http(url, { method: 'POST', body });
          /* 503 + Retry-After: the WAL at its bound while a slow cut runs
             (nothing stored); a client retries, as profefe's agent does */
          for (let k = 0; res.status === 503 && k < 30; k++) {
            refusals++;
            assert.ok(res.headers.get('retry-after'), 'a 503 carries Retry-After');
            await new Promise((ok) => setTimeout(ok, 1000));
            res = await http(url, { method: 'POST', body });
          }
          assert.equal(res.status, 200, `push ${svc} round ${r}: ${res.text}`);
          pushed += body.length;
        }));
      }
      sample();
      if (timer.err) throw timer.err;
    }
    // the maintenance thread settles (cut, checkpoint, retention)
    await waitFor('the WAL checkpointed below a quarter of the limit', async () => {
      const m = await http(`${p.base}/metrics`);
      sample();
      return metric(m.text, 'profd_storage_bytes') <= LIMIT;
    }, 120000);
    if (timer.err) throw timer.err;
  } finally {
    clearInterval(timer);
  }
  assert.ok(pushed > 3 * LIMIT, `pushed ${pushed} bytes: several times the limit`);
  const m = await http(`${p.base}/metrics`);
  assert.ok(metric(m.text, 'profd_storage_retention_deletes_total') >= 1, 'retention deleted blocks');
  assert.ok(metric(m.text, 'profd_storage_blocks') >= 1, 'the newest block kept');
  assert.ok(metric(m.text, 'profd_storage_head_cuts_total') >= 2, 'the head cut as the WAL filled');

  // the newest profile of every service is still listed and served
  const tLast = t0 + Math.floor(((ROUNDS - 1) * span) / ROUNDS);
  const range = await http(`${p.base}/api/v1/query_range?` + qs({ query: 'heap{service=~"svc-.*"}', from: String(tLast - 3600), to: String(tLast + 1) }));
  assert.equal(range.status, 200, range.text.slice(0, 300));
  const newest = new Map(); // service -> its newest listed timestamp
  for (const s of range.json.data) {
    const ts = s.timestamps;
    newest.set(s.labels.service, Math.max(newest.get(s.labels.service) || 0, ts[ts.length - 1]));
  }
  for (const svc of services)
    assert.equal(newest.get(svc), tLast * 1000, `newest profile of ${svc} listed: ${range.text.slice(0, 300)}`);
  const one = await http(`${p.base}/api/v1/query?` + qs({ mode: 'merge', query: 'heap{service="svc-0"}', from: String(tLast - 1), to: String(tLast + 1), report: 'top' }));
  assert.equal(one.status, 200, one.text.slice(0, 300));
  assert.equal(one.json.warnings, undefined, one.text.slice(0, 300));
  // the oldest data went first: the first hour is gone
  const old = await http(`${p.base}/api/v1/query_range?` + qs({ query: 'heap{service="svc-0"}', from: String(t0), to: String(t0 + 3600) }));
  assert.equal(old.status, 200);
  assert.equal(old.json.data.length, 0, `the oldest hour deleted first: ${old.text.slice(0, 200)}`);
  const waits = (r) => metric(m.text.split('\n').filter((l) => l.includes(`result="${r}"`)).join('\n'), 'profd_storage_wal_bound_waits_total');
  assert.equal(waits('refused'), refusals, 'each 503 counted as a refused wait');
  console.log(`retention.size=3MB: ${pushed} bytes pushed, peak store ${peak} bytes over ${samples} samples; ` +
    `appends held at the WAL's bound: ${waits('stored')} stored, ${refusals} refused (503, retried)`);
  await p.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});
