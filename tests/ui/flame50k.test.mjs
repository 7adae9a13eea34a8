// Issue 15 "Flame graph of a real 50k-node profile: no frame drawn wider
// than its value (checked from the canvas model); search of a common name".
//
// A real Go program (tests/ui/bigflame: 30,000 allocations from 30,000
// distinct stacks, MemProfileRate 1) writes its heap profile with
// runtime/pprof; profd stores it (profefe push); Debian's chromium opens it
// in the UI. The test asserts what is drawn: every node in the UI's tree, no
// frame wider than its value (unzoomed and zoomed), nothing painted outside
// the frames, and each keystroke's search marks exactly the frames whose name
// matches, with the API's total. How fast (issue 15's goals: first paint
// < 300 ms, a search < 50 ms a keystroke) is measured by bench/ui_flame, not
// here (issue 34: a timing goal fails on a busy machine); the figures are
// still printed as diagnostics with the load average.
//
//   PROFD_BIN=build/profd node --test tests/ui/flame50k.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { apiData, goEnv, http, killAll, qs, run, startProfd, tempDir } from '../e2e/lib.mjs';
import { clickFrame, rectBox, waitFrame, zoomName } from './flamelib.mjs';
import { clickPoint, waitPoints } from './timelib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const HERE = path.dirname(new URL(import.meta.url).pathname);
const SERIES = '{__name__="heap", instance_id="big-1", service="bigflame"}';

let dir, profd, browser, page, when, tree;
const pageErrors = [];

before(async () => {
  dir = tempDir('profd-flame50k-');
  const bin = path.join(dir, 'bigflame'), prof = path.join(dir, 'heap.pb.gz');
  let r = await run('go', ['build', '-o', bin, '.'], { cwd: path.join(HERE, 'bigflame'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/ui/bigflame (is golang-go installed?)\n${r.stdout}${r.stderr}`);
  r = await run(bin, ['-o', prof], {}, 60000);
  assert.equal(r.code, 0, r.stderr);
  profd = await startProfd({ storage: path.join(dir, 'data') });
  when = Math.floor((Date.now() - 10 * 60e3) / 1000) * 1000;
  const push = await http(`${profd.base}/api/0/profiles?` + qs({
    service: 'bigflame', type: 'heap', instance_id: 'big-1', created_at: new Date(when).toISOString().replace(/\.\d+Z$/, 'Z'),
  }), { method: 'POST', body: fs.readFileSync(prof), headers: { 'Content-Type': 'application/octet-stream' } });
  assert.ok(push.status >= 200 && push.status < 300, `push: HTTP ${push.status} ${push.text}`);
  tree = await apiData(profd.base, '/api/v1/query?' + qs({ query: SERIES, time: String(when / 1000), report: 'flamegraph', nodes: '0', sample_index: 'inuse_space' }));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
const countNodes = (n) => 1 + (n.children || []).reduce((k, c) => k + countNodes(c), 0);

test('a 50k-node flame graph: every node, no frame wider than its value, search marks the matching frames', { timeout: 180000 }, async (t) => {
  const nodes = countNodes(tree);
  assert.ok(nodes >= 50000, `the real profile's tree has ${nodes} nodes (>= 50,000)`);
  // open it from the timeline, as a person would
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="bigflame"}', type: 'inuse_space' }));
  await waitPoints(page);
  const t0 = Date.now();
  await clickPoint(page, { index: 0 });
  await waitFrame(page, 'main.a');
  const clickToPaint = Date.now() - t0;
  const m = await page.evaluate(() => {
    const f = document.getElementById('flamegraph').flame;
    let n = 0;
    const stack = [f.root];
    while (stack.length) { const x = stack.pop(); n++; for (const c of x.children) stack.push(c); }
    const view = performance.getEntriesByType('resource').filter((e) => /report=view/.test(e.name)).pop();
    return { nodes: n, rects: f.rects.length, timing: f.timing, fetchMs: view ? view.duration : -1, size: view ? view.encodedBodySize : -1, raw: view ? view.decodedBodySize : -1 };
  });
  t.diagnostic(`load ${load()}: ${m.nodes} nodes in the UI's tree (API: ${nodes}), ${m.rects} rects painted; ` +
    `tree+layout+paint ${m.timing.firstPaint.toFixed(1)} ms (layout ${m.timing.layout.toFixed(1)}, paint ${m.timing.paint.toFixed(1)}); ` +
    `view request ${m.fetchMs.toFixed(0)} ms (${m.size} B gzip, ${m.raw} B JSON); click to painted ${clickToPaint} ms`);
  assert.equal(m.nodes, nodes, 'the UI has every node of the profile');
  assert.ok(m.rects > 0, 'frames are painted');

  // No frame wider than its value: each painted rect against the API's tree
  // (by path), and no pixel painted outside the rects.
  const want = new Map();
  (function walk(n, p) { want.set(p, n.value); (n.children || []).forEach((c) => walk(c, p + '\n' + c.name)); })(tree, 'root');
  const check = async () => {
    const r = await page.evaluate(() => {
      const f = document.getElementById('flamegraph').flame, dpr = window.devicePixelRatio || 1;
      const pathOf = (n) => { const a = []; for (; n; n = n.parent) a.unshift(n.name); return a.join('\n'); };
      const img = f.ctx.getImageData(0, 0, f.canvas.width, f.canvas.height).data;
      let spill = 0;
      for (let row = 0; row <= f.maxRow; row++) {
        const y = Math.floor((row * 18 + 8) * dpr);
        const iv = f.rects.filter((q) => q.y === row * 18).map((q) => [Math.floor(q.x * dpr), Math.ceil((q.x + q.w) * dpr)]);
        for (let x = 0; x < f.canvas.width; x++) {
          if (img[(y * f.canvas.width + x) * 4 + 3] !== 0 && !iv.some(([a, b]) => x >= a && x < b)) spill++;
        }
      }
      return {
        W: f.canvas.clientWidth, zoom: pathOf(f.zoom), spill,
        rects: f.rects.filter((q) => q.kind !== 'ancestor').map((q) => ({ path: q.node ? pathOf(q.node) : null, w: q.w, value: q.value })),
      };
    });
    const zv = want.get(r.zoom);
    let worst = -Infinity, under = 0;
    for (const q of r.rects) {
      const v = q.path ? want.get(q.path) : q.value;
      assert.ok(v !== undefined, `painted ${q.path} is in the API's tree`);
      const exp = v / zv * r.W;
      if (exp < 1 && q.path) assert.fail(`${q.path} is drawn alone though under a pixel (${exp.toFixed(3)} px)`);
      if (exp < 7) under++;
      worst = Math.max(worst, q.w - exp);
    }
    assert.ok(worst <= 0.01, `a frame is ${worst.toFixed(3)} px wider than its value`);
    assert.equal(r.spill, 0, 'pixels painted outside every frame');
    return { rects: r.rects.length, under, more: r.rects.filter((q) => !q.path).length };
  };
  const c1 = await check();
  t.diagnostic(`unzoomed: ${c1.rects} rects, ${c1.under} under 7 px, ${c1.more} "…" runs`);
  assert.ok(c1.more > 0, 'runs under a pixel are merged into "…"');
  // zoomed two levels down (main.a, then its callee main.b): every frame still exact
  await clickFrame(page, 'main.a', { notAncestor: true });
  await page.waitForFunction(() => document.getElementById('flamegraph').flame.zoom.name === 'main.a');
  // main.a's callee main.b (a quarter of the stacks below it)
  const bi = await page.evaluate(() => { const f = document.getElementById('flamegraph').flame; return f.rects.findIndex((r) => r.node && r.node.parent === f.zoom && r.name === 'main.b'); });
  assert.ok(bi >= 0, "main.a's callee main.b is painted");
  const bb = await rectBox(page, bi);
  await page.mouse.click(bb.x + Math.min(bb.w / 2, 40), bb.y + 8);
  await page.waitForFunction(() => document.getElementById('flamegraph').flame.zoom.name === 'main.b');
  assert.equal(await zoomName(page), 'main.b');
  const c2 = await check();
  t.diagnostic(`zoomed into main.a > main.b: ${c2.rects} rects, ${c2.under} under 7 px, ${c2.more} "…" runs`);
  await page.click('#flame-reset');

  // Search: each keystroke's search (after the debounce) over every node.
  const times = [];
  let text = '';
  for (const ch of 'main.e') {
    text += ch;
    await page.fill('#flame-search', text);
    await page.waitForFunction((q) => new URL(location.href).searchParams.get('search') === q && /^matched /.test(document.getElementById('flame-match').textContent), text);
    times.push(await page.evaluate(() => document.getElementById('flamegraph').flame.timing.search));
    // the frames marked are exactly the painted frames whose name matches
    const marks = await page.evaluate((q) => {
      const f = document.getElementById('flamegraph').flame, re = new RegExp(q);
      const drawn = f.rects.filter((r) => r.node);
      return { drawn: drawn.length, matched: drawn.filter((r) => r.match).length, wrong: drawn.filter((r) => r.match !== re.test(r.node.name)).map((r) => r.node.name).slice(0, 5) };
    }, text);
    assert.deepEqual(marks.wrong, [], `search "${text}": frames marked that do not match, or matching and not marked`);
    assert.ok(marks.matched > 0, `search "${text}" marks some of the ${marks.drawn} frames`);
  }
  t.diagnostic(`load ${load()}: search per keystroke (ms): ${times.map((x) => x.toFixed(1)).join(', ')} (goal in bench/ui_flame)`);
  // the match total is the API's: main.e's outermost occurrences
  let sum = 0;
  (function walk(n) { if (n.name !== 'root' && /main.e/.test(n.name)) { sum += n.value; return; } (n.children || []).forEach(walk); })(tree);
  const pct = (100 * sum / tree.value);
  assert.match(await page.locator('#flame-match').innerText(), new RegExp('\\(' + (pct >= 10 ? pct.toFixed(1) : pct.toFixed(2)).replace('.', '\\.')));
  await page.screenshot({ path: path.join(dir, 'flame50k.png') });
  if (process.env.PD_UI_SHOTS) fs.copyFileSync(path.join(dir, 'flame50k.png'), path.join(process.env.PD_UI_SHOTS, 'flame50k.png'));
  assert.deepEqual(pageErrors, []);
});
