// Issue 17: profd profiles itself. profd (linked with libprofd-agent)
// serves its own /debug/pprof/profile and /debug/pprof/heap; while four
// pushers post real Go profiles (shared testdata) to profefe's API, a CPU
// profile of profd is taken and read by `go tool pprof -symbolize=none`
// (the names come from the agent, not from pprof): profd's ingest path
// (pd_profile_decode / pd_gunzip / the storage appender) must be in it.
// Also: a bad seconds= is a 400 counted in /metrics, the heap profile reads,
// and --no-web.enable-pprof turns the endpoints off.
//
//   PROFD_BIN=build/profd node --test tests/e2e/self_profile.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import nodeHttp from 'node:http';
import path from 'node:path';
import { TESTDATA, goEnv, http, killAll, qs, run, startProfd, tempDir } from './lib.mjs';

let dir, profd;

before(async () => {
  dir = tempDir('profd-self-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
});

after(async () => {
  await killAll();
  fs.rmSync(dir, { recursive: true, force: true });
});

// POST on a fresh connection (agent: false). A /debug/pprof/profile request
// holds one profd HTTP pool thread for its seconds; connections kept alive on
// that thread wait with it, new ones are accepted by the other threads.
function postFresh(url, body) {
  return new Promise((resolve) => {
    const req = nodeHttp.request(url, { method: 'POST', agent: false, timeout: 120000 }, (res) => { // a hang guard
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', (e) => resolve({ status: -1, text: String(e) }));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

async function pprofTop(file, extra = []) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const r = await run('go', ['tool', 'pprof', '-symbolize=none', '-top', ...extra, file],
    { env: goEnv(gd), cwd: gd }, 60000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('profd CPU profile under a push load shows the ingest path', async () => {
  const bodies = ['profile.pb.gz', 'heap.pb.gz', 'allocs.pb.gz', 'goroutine.pb.gz']
    .map((f) => fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', f)));
  let stop = false, pushed = 0;
  const failures = [];
  const pusher = async (k) => {
    // until told to stop and at least 10 pushes went (however slow the machine)
    for (let i = 0; !stop || pushed <= 10; i++) {
      const type = ['cpu', 'heap', 'other', 'other'][i % 4];
      // one series per push: the testdata profiles carry fixed timestamps
      const r = await postFresh(`${profd.base}/api/0/profiles?` + qs({ service: `self-${k}-${i}`, type }), bodies[i % 4]);
      if (r.status !== 200) failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      else pushed++;
    }
  };
  const load = [0, 1, 2, 3].map(pusher);
  // profd's own 6 s CPU profile under the push load; on a busy machine profd
  // may get too little CPU in 6 s for its ingest path to show: profiled again
  // (10 tries are a hang guard), not judged on one window (issue 34)
  let top = '', ours = [];
  for (let tries = 0; tries < 10 && ours.length < 2; tries++) {
    const prof = await http(`${profd.base}/debug/pprof/profile?seconds=6`, { timeoutMs: 120000 });
    assert.equal(prof.status, 200, prof.text);
    const file = path.join(dir, 'profd-cpu.pb.gz');
    fs.writeFileSync(file, prof.buf);
    top = await pprofTop(file, ['-cum', '-nodecount=400']);
    assert.match(top, /Type: cpu/, top);
    const names = top.split('\n').map((l) => l.trim().split(/\s+/).pop());
    ours = names.filter((n) => /^pd_(profile_decode|gunzip|storage_|profile_|api_handle|http_)/.test(n));
  }
  stop = true;
  await Promise.all(load);
  assert.deepEqual(failures.slice(0, 3), [], 'every push is stored');
  assert.ok(pushed > 10, `only ${pushed} pushes`);
  assert.ok(ours.length >= 2, `profd's ingest functions are in its own CPU profile (${pushed} pushes)\n${top}`);
});

test('profd heap profile reads with go tool pprof', async () => {
  const r = await http(`${profd.base}/debug/pprof/heap`);
  assert.equal(r.status, 200, r.text);
  const file = path.join(dir, 'profd-heap.pb.gz');
  fs.writeFileSync(file, r.buf);
  const top = await pprofTop(file, ['-sample_index=inuse_space']);
  assert.match(top, /Type: inuse_space/, top);
  // ASan build: the interposers are compiled out and the profile's comment says so
  if (/heap sampling is off/.test(top)) return;
  assert.match(top, /\bpd_\w+/, `profd's own allocation sites are named\n${top}`);
});

test('bad seconds is a 400 naming it, counted in /metrics', async () => {
  const r = await http(`${profd.base}/debug/pprof/profile?seconds=abc`);
  assert.equal(r.status, 400);
  assert.match(r.text, /seconds=abc/);
  const m = await http(`${profd.base}/metrics`);
  assert.match(m.text, /profd_rejected_input_total\{reason="pprof_bad_seconds"\} 1/);
});

test('--no-web.enable-pprof turns /debug/pprof off', async () => {
  const off = await startProfd({ storage: path.join(dir, 'data-off'), extraArgs: ['--no-web.enable-pprof'], name: 'profd-off' });
  const r = await http(`${off.base}/debug/pprof/heap`);
  assert.equal(r.status, 404);
  off.kill();
});
