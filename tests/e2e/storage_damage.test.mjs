// Issue 19, end to end: the real profd binary with a damaged block. Two
// services push real heap profiles (profefe API) over ~40 s of timestamps with
// a 10 s block duration, so the head is cut into blocks; profd stops, one
// byte of the first block's chunks file is flipped (its first frame: one
// series' value group), profd starts again. Then:
//   - query_range answers 200 for both series, merges answer 200 with a
//     `warnings` array (and an X-Profd-Warnings header), and `go tool pprof`
//     reads the merged report=proto of both services;
//   - /metrics counts the corruption and the partial answer;
//   - `profd tsdb check` exits 1 naming chunks/000001 and the offset;
//   - `profd tsdb repair` (profd stopped) rewrites the block, keeps the
//     original aside, and afterwards merges answer without warnings.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startProfd, tempDir, http, run, goEnv, TESTDATA, killAll, qs, profdBin, waitFor } from './lib.mjs';

test.after(killAll);

const metric = (text, name) => {
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
};

test('a byte flipped in one series chunk costs only that series; check names it; repair rewrites the block', { timeout: 180000 }, async () => {
  const dir = tempDir('pd-e2e-damage-');
  const storage = path.join(dir, 'data');
  const args = ['--storage.block-duration=10s'];
  let p = await startProfd({ storage, extraArgs: args });
  const heapDir = path.join(TESTDATA, 'pprof', 'go-demo-series');
  const files = fs.readdirSync(heapDir).filter((f) => f.startsWith('heap-')).sort().slice(0, 14);
  const t0 = Math.floor(Date.now() / 1000) - 120;
  for (let i = 0; i < files.length; i++) {
    for (const svc of ['x', 'y']) { /* interleaved: every block holds both series */
      const body = fs.readFileSync(path.join(heapDir, files[i]));
      const created = new Date((t0 + i * 3) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
      const r = await http(`${p.base}/api/0/profiles?` + qs({ service: svc, type: 'heap', created_at: created }), { method: 'POST', body });
      assert.equal(r.status, 200, `push ${svc} ${files[i]}: ${r.text}`);
    }
  }
  await waitFor('a head cut into blocks', async () => {
    const m = await http(`${p.base}/metrics`);
    return metric(m.text, 'profd_storage_blocks') >= 1;
  }, 60000);
  await p.stop();

  const blocks = fs.readdirSync(storage).filter((n) => /^[0-9A-HJKMNP-TV-Z]{26}$/.test(n)).sort();
  assert.ok(blocks.length >= 1, `blocks on disk: ${blocks}`);
  const chunks = path.join(storage, blocks[0], 'chunks', '000001');
  const fd = fs.openSync(chunks, 'r+');
  const b = Buffer.alloc(1);
  fs.readSync(fd, b, 0, 1, 8 + 12);
  b[0] ^= 0x5a;
  fs.writeSync(fd, b, 0, 1, 8 + 12);
  fs.closeSync(fd);

  p = await startProfd({ storage, extraArgs: args });
  const from = String(t0 - 60), to = String(t0 + 120);
  const sel = 'heap{service=~"x|y"}';
  const range = await http(`${p.base}/api/v1/query_range?` + qs({ query: sel, from, to }));
  assert.equal(range.status, 200, range.text);
  assert.equal(range.json.data.length, 2, `both series listed: ${range.text.slice(0, 300)}`);

  const top = await http(`${p.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from, to, report: 'top' }));
  assert.equal(top.status, 200, top.text);
  assert.ok(Array.isArray(top.json.warnings) && top.json.warnings.length >= 1, `warnings in the envelope: ${top.text.slice(0, 400)}`);
  assert.match(top.json.warnings.join('\n'), /chunks\/000001 offset \d+/);
  const proto = await http(`${p.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from, to, report: 'proto' }));
  assert.equal(proto.status, 200, proto.text.slice(0, 300));
  assert.match(proto.headers.get('x-profd-warnings') || '', /damaged parts skipped/);

  // the profefe API answers too
  const list = await http(`${p.base}/api/0/profiles?` + qs({ service: 'x', type: 'heap', from: new Date((t0 - 60) * 1000).toISOString(), to: new Date((t0 + 120) * 1000).toISOString() }));
  assert.equal(list.status, 200, list.text.slice(0, 300));

  // a real consumer: go tool pprof reads the merge of both services
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const url = `${p.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from, to, report: 'proto' });
  const gp = await run('go', ['tool', 'pprof', '-top', url], { env: goEnv(gd), cwd: gd }, 60000);
  assert.equal(gp.code, 0, `go tool pprof exit ${gp.code}\n${gp.stdout}\n${gp.stderr}`);
  assert.match(gp.stdout, /Type: inuse_space/, gp.stdout);

  const m = await http(`${p.base}/metrics`);
  assert.ok(metric(m.text, 'profd_storage_corruptions_total') >= 1, 'corruption counted');
  assert.ok(metric(m.text, 'profd_partial_answers_total') >= 1, 'partial answers counted');

  const check = await run(profdBin(), ['tsdb', 'check', storage]);
  assert.equal(check.code, 1, check.stdout + check.stderr);
  assert.match(check.stdout, new RegExp(`${blocks[0]}/chunks/000001 offset \\d+`));

  // repair needs the store closed (it takes the lock)
  const busy = await run(profdBin(), ['tsdb', 'repair', storage]);
  assert.equal(busy.code, 1, 'repair refuses while profd holds the store');
  await p.stop();
  const rep = await run(profdBin(), ['tsdb', 'repair', storage]);
  assert.equal(rep.code, 0, rep.stdout + rep.stderr);
  assert.match(rep.stdout, /rewrote .* profiles kept, \d+ dropped/);
  assert.ok(fs.readdirSync(storage).some((n) => n.startsWith('repair-')), 'originals kept aside');
  const check2 = await run(profdBin(), ['tsdb', 'check', storage]);
  assert.equal(check2.code, 0, check2.stdout + check2.stderr);

  p = await startProfd({ storage, extraArgs: args });
  const top2 = await http(`${p.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from, to, report: 'top' }));
  assert.equal(top2.status, 200, top2.text);
  assert.equal(top2.json.warnings, undefined, 'no warnings after repair');
  await p.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});
