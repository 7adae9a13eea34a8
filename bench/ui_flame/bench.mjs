// Flame graph speed in chromium (issue 15's goals, moved here from
// tests/ui/flame50k.test.mjs by issue 34): a real Go heap profile of
// ~82,000 flame graph nodes (tests/ui/bigflame) opened in the UI from the
// timeline, RUNS times (a fresh page each):
//   - first paint: the UI's own figure (flame.timing.firstPaint: tree +
//     layout + paint of the canvas), goal < 300 ms;
//   - click to painted: from the click on the point to the frame on the
//     canvas (the view request included);
//   - search: each keystroke of "main.e" (flame.timing.search, after the
//     debounce), goal < 50 ms a keystroke.
// Prints the median and the worst of each with the load average. Run by
// hand, not by ctest:
//
//   PROFD_BIN=build/profd node bench/ui_flame/bench.mjs      (RUNS=5)
//
// Needs what the UI tests need: golang-go, chromium, playwright-core in
// tests/ui/node_modules (scripts/install-deps.sh --test).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { goEnv, http, killAll, qs, run, startProfd, tempDir } from '../../tests/e2e/lib.mjs';
import { waitFrame } from '../../tests/ui/flamelib.mjs';
import { clickPoint, waitPoints } from '../../tests/ui/timelib.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const UI = path.join(HERE, '../../tests/ui');
const { chromium } = createRequire(path.join(UI, 'package.json'))('playwright-core');
const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const RUNS = Number(process.env.RUNS || 5);

const load = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };

const dir = tempDir('profd-bench-flame-');
try {
  const bin = path.join(dir, 'bigflame'), prof = path.join(dir, 'heap.pb.gz');
  let r = await run('go', ['build', '-o', bin, '.'], { cwd: path.join(UI, 'bigflame'), env: goEnv(dir) }, 180000);
  if (r.code !== 0) throw new Error(`go build of tests/ui/bigflame: ${r.stderr}`);
  r = await run(bin, ['-o', prof], {}, 60000);
  if (r.code !== 0) throw new Error(r.stderr);
  const profd = await startProfd({ storage: path.join(dir, 'data') });
  const when = Math.floor((Date.now() - 10 * 60e3) / 1000) * 1000;
  const push = await http(`${profd.base}/api/0/profiles?` + qs({
    service: 'bigflame', type: 'heap', instance_id: 'big-1', created_at: new Date(when).toISOString().replace(/\.\d+Z$/, 'Z'),
  }), { method: 'POST', body: fs.readFileSync(prof), headers: { 'Content-Type': 'application/octet-stream' } });
  if (push.status >= 300) throw new Error(`push: HTTP ${push.status} ${push.text}`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const paint = [], click = [], search = [];
  console.log(`load before: ${load()}; ${os.cpus().length} x ${os.cpus()[0].model}`);
  for (let i = 0; i < RUNS; i++) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(120000);
    await page.goto(profd.base + '/?' + qs({ query: 'heap{service="bigflame"}', type: 'inuse_space' }));
    await waitPoints(page);
    const t0 = Date.now();
    await clickPoint(page, { index: 0 });
    await waitFrame(page, 'main.a');
    click.push(Date.now() - t0);
    const m = await page.evaluate(() => { const f = document.getElementById('flamegraph').flame; let n = 0; const st = [f.root]; while (st.length) { const x = st.pop(); n++; for (const c of x.children) st.push(c); } return { nodes: n, firstPaint: f.timing.firstPaint }; });
    paint.push(m.firstPaint);
    let text = '';
    const ks = [];
    for (const ch of 'main.e') {
      text += ch;
      await page.fill('#flame-search', text);
      await page.waitForFunction((q) => new URL(location.href).searchParams.get('search') === q && /^matched /.test(document.getElementById('flame-match').textContent), text);
      ks.push(await page.evaluate(() => document.getElementById('flamegraph').flame.timing.search));
    }
    search.push(...ks);
    console.log(`run ${i + 1}: ${m.nodes} nodes; first paint ${m.firstPaint.toFixed(1)} ms; click to painted ${click.at(-1)} ms; search ${ks.map((x) => x.toFixed(1)).join(', ')} ms`);
    await page.close();
  }
  await browser.close();
  const f = (x) => x.toFixed(1);
  console.log(`first paint: median ${f(median(paint))} ms, max ${f(Math.max(...paint))} ms (goal < 300 ms: ${Math.max(...paint) < 300 ? 'met' : 'NOT met'})`);
  console.log(`click to painted: median ${median(click)} ms, max ${Math.max(...click)} ms`);
  console.log(`search a keystroke: median ${f(median(search))} ms, max ${f(Math.max(...search))} ms (goal < 50 ms: ${Math.max(...search) < 50 ? 'met' : 'NOT met'})`);
  console.log(`load after: ${load()}`);
} finally {
  await killAll();
  fs.rmSync(dir, { recursive: true, force: true });
}
