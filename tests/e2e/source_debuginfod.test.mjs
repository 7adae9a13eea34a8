// Issue 31 item 7, the source view, end to end with real tools: a clang -g C
// program (tests/e2e/source/hotline.c), stripped, profiled for real by
// profd-agent (eBPF) — so its frames reach profd as addresses — named by
// profd from the debug info that Debian's debuginfod serves by build ID,
// and GET /api/v1/source answering hot_line's file from debuginfod's
// /buildid/ID/source/PATH: the line marked HOT has the largest self, the
// text is the file's, line for line. cold_spin() (cold.c, whose source
// debuginfod does not have) answers 404 naming the function and what was
// tried. Needs root for the agent; skips with the agent's message when the
// kernel refuses BPF (as e2e_ebpf_agent).
//
//   PROFD_BIN=build/profd PROFD_AGENT_BIN=build/profd-agent node --test tests/e2e/source_debuginfod.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Proc, http, killAll, profdBin, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { debuginfodTarget, startAgent } from './source_lib.mjs';

let dir, profd, tgt, skipWhy = null, agent;
const SEL = 'process_cpu{comm="hotline"}';
const url = (fn, extra = {}) => `${profd.base}/api/v1/source?` +
  qs({ query: SEL, mode: 'merge', from: '0', to: String(Math.ceil(Date.now() / 1000) + 3600), function: fn, ...extra });

before(async () => {
  profdBin();
  dir = tempDir('profd-srcdbg-');
  tgt = await debuginfodTarget(dir);
  process.env.DEBUGINFOD_URLS = tgt.durl;
  process.env.DEBUGINFOD_TIMEOUT = '30';
  profd = await startProfd({ storage: path.join(dir, 'data') });
  delete process.env.DEBUGINFOD_URLS;
  new Proc('hotline', tgt.bin, []);
  ({ agent, skipWhy } = await startAgent(profd.base));
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('hot_line: its source from debuginfod, the HOT line with the largest self, the text the file\'s', { timeout: 400000 }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  let d = null, last = '';
  await waitFor('hot_line to have 50 samples with lines and its source', async () => {
    const r = await http(url('hot_line'));
    last = `${r.status} ${r.text.slice(0, 600)}`;
    if (r.status !== 200) return false;
    d = r.json.data;
    return d.self >= 50;
  }, 300000, 2000).catch((e) => { throw new Error(`${e.message}\nlast answer: ${last}\n${agent.tail()}\n${profd.tail()}`); });
  assert.equal(d.function, 'hot_line');
  assert.equal(d.file, tgt.src, 'the file as DWARF names it (comp dir + name)');
  assert.deepEqual(d.source, { origin: 'debuginfod', build_id: tgt.bid });
  assert.deepEqual(d.sample_type, { type: 'samples', unit: 'count' });
  // the text, line for line
  const text = fs.readFileSync(tgt.src, 'utf8').replace(/\n$/, '').split('\n');
  assert.equal(d.lines_in_file, text.length);
  assert.deepEqual(d.lines.map((l) => l.text), text);
  assert.deepEqual(d.lines.map((l) => l.line), text.map((_, i) => i + 1));
  // the HOT line has the largest self; self sums to the function's
  const withSelf = d.lines.filter((l) => l.self > 0).sort((a, b) => b.self - a.self);
  assert.equal(withSelf[0].line, tgt.hotLine, JSON.stringify(withSelf));
  assert.equal(d.hottest, tgt.hotLine);
  assert.ok(withSelf[0].self > d.self / 2, `the HOT line holds most of hot_line's self: ${JSON.stringify(withSelf)}`);
  assert.equal(d.lines.reduce((s, l) => s + l.self, 0) + d.no_line.self, d.self);
  for (const l of d.lines) assert.ok(l.total >= l.self, JSON.stringify(l));
  // cost only on hot_line's own lines (from its signature to its closing brace)
  const fnFirst = text.findIndex((l) => l.includes('void hot_line(')) + 1;
  const fnLast = text.findIndex((l, i) => i >= fnFirst && l === '}') + 1;
  assert.ok(fnFirst > 0 && fnLast > fnFirst);
  assert.deepEqual(d.lines.filter((l) => l.total && (l.line < fnFirst || l.line > fnLast)), [],
    `cost outside hot_line's lines ${fnFirst}..${fnLast}`);
  assert.ok(d.profile_total >= d.total);
  assert.equal(d.stale, false);
});

test('cold_spin, whose source debuginfod does not have: 404 naming the function and what was tried', { timeout: 400000 }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  let r;
  await waitFor('cold_spin to be named with lines', async () => {
    r = await http(url('cold_spin'));
    return r.status === 404 && /no source for function/.test(r.text);
  }, 300000, 2000).catch((e) => { throw new Error(`${e.message}\nlast: ${r && r.status} ${r && r.text}`); });
  assert.equal(r.json.status, 'error');
  assert.equal(r.json.errorType, 'not_found');
  const msg = r.json.error;
  assert.match(msg, /"cold_spin"/);
  assert.ok(msg.includes(tgt.cold), `names the file: ${msg}`);
  assert.ok(msg.includes(`debuginfod build ID ${tgt.bid}: not found`), msg);
  assert.match(msg, /no --ui\.source-dir configured/);
  // a function that is in no sample: 404 naming it
  const none = await http(url('no_such_function'));
  assert.equal(none.status, 404);
  assert.match(none.json.error, /no function named "no_such_function"/);
});
