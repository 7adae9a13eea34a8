// Issue 35 item 2: every query is cancelled when its client leaves and when
// profd stops. profd runs with the test hook PROFD_TEST_QUERY_HOLD
// (base/cancel.h): Grafana's Series and LabelNames (Connect, JSON) block
// after selecting until their query is cancelled, so the test knows the
// query is running (the hook logs it) without a store big enough to be slow.
// Asserted: profd_queries_cancelled_total{reason="client_gone"} rises after
// the client (node's fetch) aborts; SIGTERM during a held query stops profd
// (exit 0, "profd stopped") and counts reason="shutdown". No durations: the
// waits are hang guards.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startProfd, tempDir, waitFor, killAll, http } from './lib.mjs';

after(killAll);

process.env.PROFD_TEST_QUERY_HOLD = '1';

async function counter(base, reason) {
  const r = await http(base + '/metrics');
  const m = r.text.match(new RegExp(`^profd_queries_cancelled_total\\{reason="${reason}"\\} (\\d+)`, 'm'));
  assert.ok(m, `profd_queries_cancelled_total{reason="${reason}"} in /metrics`);
  return Number(m[1]);
}

async function push(base) {
  const r = await http(`${base}/ingest?name=app.cpu%7Binstance%3Da%7D&format=folded&sampleRate=100`, {
    method: 'POST', body: 'main;work 5\nmain;gc 2\n' });
  assert.equal(r.status, 200, r.text);
}

function connect(base, method, signal) {
  return fetch(`${base}/querier.v1.QuerierService/${method}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ matchers: ['{}'] }), signal,
  });
}

// the hook's log lines so far
const held = (p) => (p.out.match(/query held until cancelled/g) || []).length;

test('a client that leaves cancels its query (Series, LabelNames)', async () => {
  const p = await startProfd({ storage: tempDir('cancel'), extraArgs: ['--log.level=info'] });
  await push(p.base);
  for (const method of ['Series', 'LabelNames']) {
    const before = await counter(p.base, 'client_gone');
    const n = held(p);
    const ac = new AbortController();
    const res = connect(p.base, method, ac.signal).catch((e) => e);
    await waitFor(`${method} to be held`, async () => held(p) > n, 60000, 50);
    ac.abort();
    assert.equal((await res).name, 'AbortError');
    await waitFor(`${method}'s cancellation to be counted`,
      async () => (await counter(p.base, 'client_gone')) > before, 60000, 100);
  }
  // profd still answers (the hook holds only until cancelled)
  assert.equal((await http(p.base + '/-/ready')).status, 200);
  await p.stop();
});

test('SIGTERM during a running query stops profd', async () => {
  const p = await startProfd({ storage: tempDir('cancel-term'), extraArgs: ['--log.level=info'] });
  await push(p.base);
  const res = connect(p.base, 'Series').then((r) => r.status, (e) => e.name);
  await waitFor('Series to be held', async () => held(p) > 0, 60000, 50);
  const before = await counter(p.base, 'shutdown');
  assert.equal(before, 0);
  const ex = await p.stop();
  assert.deepEqual(ex, { code: 0, signal: null }, p.tail());
  assert.match(p.out, /profd stopped/);
  // the held query ended with profd: an error answer or a closed connection
  const outcome = await res;
  assert.ok(outcome !== 200, `held Series answered ${outcome}`);
});
