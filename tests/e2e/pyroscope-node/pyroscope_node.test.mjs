// End-to-end test of Pyroscope's /ingest with the real Pyroscope Node.js SDK
// (issue 11): @pyroscope/nodejs (npm, tests/e2e/pyroscope-node/package.json,
// installed by `scripts/install-deps.sh --test`) runs unchanged in
// producer.mjs and uploads its wall and heap profiles until two of each
// were sent (multipart pprof, name without a type suffix, spyName=nodespy).
// Every upload must be 2xx; profd must file them as one series per type as
// Pyroscope names them (wall, memory) with service_name and the SDK's
// spyName; `go tool pprof -top` on the merged wall profile shows the busy
// function on top.
//
//   PROFD_BIN=build/profd node --test tests/e2e/pyroscope-node/pyroscope_node.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, goEnv, killAll, profdBin, qs, run, startProfd, tempDir } from '../lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const BUSY = 'profdPyroBusyWork';
const ALLOC = 'profdPyroAllocator';
const APP = 'pyro-node-e2e';

let dir, profd, uploads, t0, t1;

before(async () => {
  profdBin();
  if (!fs.existsSync(path.join(here, 'node_modules', '@pyroscope', 'nodejs'))) {
    throw new Error('@pyroscope/nodejs is not installed in tests/e2e/pyroscope-node/node_modules: run ' +
      'scripts/install-deps.sh --test (or `npm ci` in tests/e2e/pyroscope-node)');
  }
  dir = tempDir('profd-pyro-node-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
  t0 = Math.floor(Date.now() / 1000) - 5;
  const prod = new Proc('pyroscope-node', process.execPath, [path.join(here, 'producer.mjs')], {
    env: { ...process.env, PROFD_URL: profd.base, FLUSHES: '2', FLUSH_MS: '2000' },
    cwd: here,
  });
  const ex = await prod.wait(150000);
  assert.equal(ex.code, 0, `the Pyroscope SDK producer failed\n${prod.tail()}\n${profd.tail()}`);
  t1 = Math.ceil(Date.now() / 1000) + 5;
  uploads = prod.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('every upload of the SDK is answered 2xx', () => {
  const wall = uploads.filter((u) => /[?&]sampleRate=/.test(u.url)).length;
  assert.ok(wall >= 2 && uploads.length - wall >= 2, `at least two rounds of wall + heap: ${JSON.stringify(uploads)}`);
  for (const u of uploads) {
    assert.ok(u.status >= 200 && u.status < 300, `${u.url}: HTTP ${u.status} ${u.body}`);
    assert.match(u.url, /\/ingest\?/);
  }
});

test('one series per profile type, named as Pyroscope names them, labels as the SDK meant', async () => {
  const series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': `{service_name="${APP}"}` }));
  const names = series.map((s) => s.__name__).sort();
  assert.deepEqual(names, ['memory', 'wall'], JSON.stringify(series));
  for (const s of series) {
    assert.equal(s.service_name, APP);
    assert.equal(s.pyroscope_spy, 'nodespy');
    assert.equal(s.region, 'eu-1', 'the SDK\'s tags (sent in the name: APP{region=eu-1})');
  }
  // every upload is stored: the number of profiles equals the uploads
  let stored = 0;
  for (const name of ['wall', 'memory']) {
    const r = await apiData(profd.base, '/api/v1/query_range?' +
      qs({ query: `${name}{service_name="${APP}"}`, from: t0, to: t1 }));
    assert.equal(r.length, 1, JSON.stringify(r));
    stored += r[0].timestamps.length;
  }
  assert.equal(stored, uploads.length, 'every upload is one stored profile');
});

// The function name of a `go tool pprof -top` row whose last column is the
// SDK's frame name file:function:line.
function fnOf(row) {
  const parts = row.trim().split(/\s+/).pop().split(':');
  return parts.length >= 3 ? parts[parts.length - 2] : parts[0];
}

async function pprofTop(url, extra = []) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-top', ...extra, url], { env: goEnv(gd), cwd: gd }, 60000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('the busy function is on top of the merged wall profile (go tool pprof)', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/v1/query?` +
    qs({ mode: 'merge', query: `wall{service_name="${APP}"}`, from: t0, to: t1, report: 'proto' });
  const top = await pprofTop(url);
  const rows = top.split('\n').filter((l) => /^\s*[\d.]+\w*\s+[\d.]+%/.test(l));
  assert.ok(rows.length > 0, top);
  // the SDK names frames file:function:line (./producer.mjs:profdPyroBusyWork:36)
  assert.match(top, /Type: cpu/, 'the SDK\'s wall profile carries CPU time, the default sample type');
  assert.equal(fnOf(rows[0]), BUSY, `the hottest function is ${BUSY}\n${top}`);
});

test('the merged heap shows the allocating function', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/v1/query?` +
    qs({ mode: 'merge', query: `memory{service_name="${APP}"}`, from: t0, to: t1, report: 'proto' });
  const top = await pprofTop(url);
  assert.ok(top.split('\n').some((l) => fnOf(l) === ALLOC), `${ALLOC} is listed\n${top}`);
});
