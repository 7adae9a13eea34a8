// Prometheus' lifecycle endpoints: /-/quit shuts profd down gracefully (as
// SIGTERM) when started with --web.enable-lifecycle, answers 403 without it
// and 405 to a GET; what was pushed before the quit is there after a restart.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { http, killAll, startProfd, tempDir, TESTDATA } from './lib.mjs';

const dir = tempDir('pd-lifecycle-');
after(async () => {
  await killAll();
  if (!process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const heap = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));

test('/-/quit: 403 without --web.enable-lifecycle, 405 for GET, 200 and a clean exit with it', { timeout: 300000 }, async () => {
  const storage = path.join(dir, 'data');
  const a = await startProfd({ storage });
  let r = await http(a.base + '/-/quit', { method: 'POST' });
  assert.equal(r.status, 403, r.text);
  assert.match(r.text, /--web\.enable-lifecycle/);
  assert.equal((await http(a.base + '/-/healthy')).status, 200, 'still serving after a refused quit');
  await a.stop();

  const b = await startProfd({ storage, extraArgs: ['--web.enable-lifecycle'] });
  r = await http(b.base + '/-/quit');
  assert.equal(r.status, 405, 'GET /-/quit');
  const now = Math.floor(Date.now() / 1000);
  r = await http(`${b.base}/api/0/profiles?service=quit&type=heap&created_at=${now}`, { method: 'POST', body: heap });
  assert.equal(r.status, 200, r.text);
  r = await http(b.base + '/-/quit', { method: 'POST' });
  assert.equal(r.status, 200, r.text);
  const ex = await b.wait(120000);
  assert.deepEqual({ code: ex.code, signal: ex.signal }, { code: 0, signal: null }, b.tail ? b.tail() : '');
  assert.match(b.out, /shutting down/);

  const c = await startProfd({ storage });
  const s = await http(`${c.base}/api/v1/series?match[]=${encodeURIComponent('{service="quit"}')}&start=${now - 3600}&end=${now + 3600}`);
  assert.equal(JSON.parse(s.text).data.length, 1, `the profile pushed before /-/quit: ${s.text}`);
  await c.stop();
});
