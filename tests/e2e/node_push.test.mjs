// End-to-end test of issue 5's push path with a real Node.js producer: a
// program profiled by @datadog/pprof (from npm; tests/e2e/package.json,
// installed by `scripts/install-deps.sh --test`) pushes its wall-time and
// heap profiles to profd's profefe API (tests/e2e/node_producer.mjs); then
// the profiles are listed, fetched by id and merged through profefe's URLs,
// and `go tool pprof -top` on the /merge URL shows the busy function.
//
//   PROFD_BIN=build/profd node --test tests/e2e/node_push.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const BUSY = 'profdNodeBusyWork';
const ALLOC = 'profdNodeAllocator';
const ROUNDS = 2;

let dir, profd, pushes;

before(async () => {
  profdBin();
  if (!fs.existsSync(path.join(here, 'node_modules', '@datadog', 'pprof'))) {
    throw new Error('@datadog/pprof is not installed in tests/e2e/node_modules: run scripts/install-deps.sh --test ' +
      '(or `npm install` in tests/e2e)');
  }
  dir = tempDir('profd-node-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
  const prod = new Proc('node-producer', process.execPath, [path.join(here, 'node_producer.mjs')], {
    env: { ...process.env, PROFD_URL: profd.base, ROUNDS: String(ROUNDS), BUSY_MS: '1500' },
    cwd: here,
  });
  const ex = await prod.wait(60000);
  assert.equal(ex.code, 0, `the Node producer failed\n${prod.tail()}\n${profd.tail()}`);
  pushes = prod.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('the producer pushed wall and heap profiles, each acknowledged with profefe\'s meta', () => {
  assert.equal(pushes.length, 2 * ROUNDS, JSON.stringify(pushes));
  for (const p of pushes) {
    assert.equal(p.status, 200, p.body);
    const r = JSON.parse(p.body);
    assert.equal(r.code, 200);
    assert.match(r.body.id, /^[0-9a-f]{32}$/);
    assert.equal(r.body.service, 'node-e2e');
    assert.equal(r.body.type, p.type);
    assert.deepEqual(r.body.labels.map((l) => l.key), ['round', 'runtime']);
  }
});

test('profefe lists them and serves each by id as a gzip pprof', async () => {
  for (const type of ['other', 'heap']) {
    const r = await http(`${profd.base}/api/0/profiles?` + qs({ service: 'node-e2e', type }));
    assert.equal(r.status, 200, r.text);
    const ids = r.json.body.map((m) => m.id);
    const pushed = pushes.filter((p) => p.type === type).map((p) => JSON.parse(p.body).body.id);
    assert.deepEqual([...ids].sort(), [...pushed].sort(), `${type}: listed ids are the pushed ones`);
    for (const id of ids) {
      const g = await http(`${profd.base}/api/0/profiles/${id}`);
      assert.equal(g.status, 200);
      assert.equal(g.buf[0], 0x1f, 'a gzip pprof');
      assert.equal(g.buf[1], 0x8b, 'a gzip pprof');
    }
  }
  const s = await http(`${profd.base}/api/0/services`);
  assert.deepEqual(s.json.body, ['node-e2e']);
});

async function pprofTop(url, extra = []) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-top', ...extra, url], { env: goEnv(gd), cwd: gd }, 60000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

// The flat value of fn in `go tool pprof -top` output, as printed.
function flatRow(top, fn) {
  return top.split('\n').find((l) => l.trim().split(/\s+/).pop() === fn);
}

test('go tool pprof -top on profefe\'s /merge URL shows the busy function on top', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/0/profiles/merge?` + qs({ service: 'node-e2e', type: 'other' });
  const top = await pprofTop(url);
  assert.match(top, /Type: wall/, top);
  const rows = top.split('\n').filter((l) => /^\s*[\d.]+\w*\s+[\d.]+%/.test(l));
  assert.ok(rows.length > 0, top);
  assert.equal(rows[0].trim().split(/\s+/).pop(), BUSY, `the hottest function is ${BUSY}\n${top}`);
  // the merge holds the sum of the rounds' busy time (each round's own time
  // varies with the machine's load, so the sum is computed, not assumed)
  const ms = (row) => {
    const m = /^\s*([\d.]+)(ms|s)/.exec(row);
    return m[2] === 's' ? Number(m[1]) * 1000 : Number(m[1]);
  };
  const rounds = pushes.filter((p) => p.type === 'other');
  assert.ok(rounds.length >= 2, JSON.stringify(pushes));
  let sum = 0;
  for (const p of rounds) {
    const one = await pprofTop(`${profd.base}/api/0/profiles/${JSON.parse(p.body).body.id}`, ['-unit=ms']);
    const row = flatRow(one, BUSY);
    assert.ok(row, `${BUSY} in round ${p.round}\n${one}`);
    sum += ms(row);
  }
  const mergedTop = await pprofTop(url, ['-unit=ms']);
  const merged = ms(flatRow(mergedTop, BUSY));
  assert.ok(Math.abs(merged - sum) <= 0.01 * sum + 1, `merged ${merged} ms vs the rounds' sum ${sum} ms`);
});

test('the heap /merge shows the allocating function', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/0/profiles/merge?` + qs({ service: 'node-e2e', type: 'heap' });
  const top = await pprofTop(url, ['-sample_index=inuse_space']);
  assert.match(top, /Type: inuse_space/, top);
  assert.ok(flatRow(top, ALLOC), `${ALLOC} is listed\n${top}`);
});
