// Issue 30, the regression report's UI page (/?view=regressions&query=&by=),
// in Debian's chromium (headless, playwright-core):
//
//  - two versions of a real Go program's heap (tests/ui/diffapp, written by
//    runtime/pprof, pushed through profefe's API with version=v1 / v2) where
//    main.foo's share of inuse_space doubles (5 of 50 MiB → 10 of 50): the page, reached by
//    its tab, lists main.foo first as grown, 10% → 20%; its link opens the
//    compare view with each side's selector (query_a / query_b), whose diff
//    says main.foo +100%
//  - two runs of one version: "nothing above the noise"; a bad selector: the
//    API's error said on the page; a loading badge while the API answers
//
//   PROFD_BIN=build/profd PD_UI_SHOTS=shots node --test tests/ui/regressions.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { goEnv, http, killAll, qs, run, startProfd, tempDir } from '../e2e/lib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const HERE = path.dirname(new URL(import.meta.url).pathname);
const MIN = 60000;
const now = Math.floor(Date.now() / 1000) * 1000;
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
const pageErrors = [];
let dir, profd, browser, page;

async function push(file, params) {
  const r = await http(`${profd.base}/api/0/profiles?` + qs({ service: 'regsvc', type: 'heap', ...params, created_at: iso(params.created_at) }),
    { method: 'POST', body: fs.readFileSync(file), headers: { 'Content-Type': 'application/octet-stream' } });
  assert.ok(r.status >= 200 && r.status < 300, `push ${file}: HTTP ${r.status} ${r.text}`);
}

before(async () => {
  dir = tempDir('profd-ui30-');
  const diffapp = path.join(dir, 'diffapp');
  let r = await run('go', ['build', '-o', diffapp, '.'], { cwd: path.join(HERE, 'diffapp'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/ui/diffapp\n${r.stdout}${r.stderr}`);
  // v1: foo 5 MiB, bar 25, baz 20; v2: foo 10, bar 22, baz 18 (the same 50 MiB)
  const V1 = path.join(dir, 'v1.pb.gz'), V2 = path.join(dir, 'v2.pb.gz');
  for (const [file, foo, bar, baz] of [[V1, 5, 25, 20], [V2, 10, 22, 18]]) {
    r = await run(diffapp, ['-foo', String(foo), '-bar', String(bar), '-baz', String(baz), '-heap', file], {}, 60000);
    assert.equal(r.code, 0, r.stderr);
  }
  profd = await startProfd({ storage: path.join(dir, 'data') });
  // v1 first (two runs of 3 profiles), then v2 (3 profiles)
  for (let i = 0; i < 6; i++) await push(V1, { instance_id: 'i-' + (i % 2), labels: 'version=v1,run=r' + (i % 2), created_at: now - (40 - i) * MIN });
  for (let i = 0; i < 3; i++) await push(V2, { instance_id: 'i-0', labels: 'version=v2,run=r2', created_at: now - (20 - i) * MIN });

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 400/.test(m.text())) pageErrors.push('console: ' + m.text()); });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const settled = (p) => p.waitForSelector('#reg-panel:not(.loading)[aria-busy="false"]');
const rows = (p) => p.evaluate(() => [...document.querySelectorAll('.reg-cmp tbody tr')].map((tr) => ({
  fn: tr.getAttribute('data-fn'), direction: tr.getAttribute('data-direction'), cells: [...tr.cells].map((c) => c.textContent.trim()),
})));

test('v1 → v2: main.foo, whose share doubled, is listed first as grown; its link opens the compare view', { timeout: 240000 }, async (t) => {
  let release;
  const gate = new Promise((r) => { release = r; });
  await page.route('**/api/v1/regressions**', async (route) => { await gate; await route.continue(); });
  await page.goto(profd.base + '/');
  await page.click('#nav-regressions');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('view') === 'regressions');
  assert.equal(await page.inputValue('#reg-by'), 'version');
  await page.fill('#reg-query', 'heap{service="regsvc"}');
  await page.fill('#reg-type', 'inuse_space');
  await page.click('#reg-run');
  await page.waitForSelector('#reg-panel.loading[aria-busy="true"]');
  release();
  await settled(page);
  await page.unroute('**/api/v1/regressions**');
  const q = new URL(page.url()).searchParams;
  assert.equal(q.get('query'), 'heap{service="regsvc"}');
  assert.equal(q.get('by'), 'version');
  assert.equal(q.get('type'), 'inuse_space');
  const cmps = await page.evaluate(() => [...document.querySelectorAll('.reg-cmp')].map((s) => s.getAttribute('data-from') + '→' + s.getAttribute('data-to')));
  assert.deepEqual(cmps, ['v1→v2']);
  const r = await rows(page);
  t.diagnostic(r.map((x) => x.cells.join(' | ')).join('\n'));
  assert.ok(r.length >= 1, 'functions listed');
  assert.equal(r[0].fn, 'main.foo');
  assert.equal(r[0].direction, 'grew');
  // inuse_space (pprof's rule for heap): 10% → 20% within the runtime's own few KiB
  assert.match(r[0].cells[2], /^(9\.9\d|10\.0\d)%$/, r[0].cells[2]);
  assert.match(r[0].cells[3], /^(19\.9\d|20\.0\d)%$/, r[0].cells[3]);
  assert.match(r[0].cells[4], /^\+(9\.9\d|10\.0\d) pp$/, r[0].cells[4]);
  assert.ok(r.some((x) => x.fn === 'main.bar' && x.direction === 'shrank'), 'main.bar shrank');
  assert.equal(await page.textContent('#reg-error'), '');
  if (process.env.PD_UI_SHOTS) {
    fs.mkdirSync(process.env.PD_UI_SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(process.env.PD_UI_SHOTS, '30-regressions.png'), fullPage: true });
  }

  // the comparison's link: the compare view, each side its selector
  await page.click('.reg-cmp[data-from="v1"] a.reg-compare');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('cmp') === '1');
  const c = new URL(page.url()).searchParams;
  assert.equal(c.get('query_a'), 'heap{service="regsvc",version="v1"}');
  assert.equal(c.get('query_b'), 'heap{service="regsvc",version="v2"}');
  assert.equal(c.get('type'), 'inuse_space');
  await page.waitForFunction(() => {
    const panel = document.getElementById('profile-panel');
    return panel && !panel.hidden && panel.getAttribute('data-kind') === 'diff' && !panel.classList.contains('loading') &&
      document.querySelector('#top-table tbody tr[data-fn="main.foo"]');
  });
  assert.equal(await page.inputValue('#cmp-qa'), 'heap{service="regsvc",version="v1"}');
  assert.equal(await page.inputValue('#cmp-qb'), 'heap{service="regsvc",version="v2"}');
  const foo = await page.evaluate(() => [...document.querySelector('#top-table tbody tr[data-fn="main.foo"]').cells].map((x) => x.textContent.trim()));
  assert.equal(foo[3], '+100%', foo.join(' | '));
  // back: the report again, from the URL
  await page.goBack();
  await page.waitForSelector('.reg-cmp tbody tr[data-fn="main.foo"]');
});

test('two runs of one version: nothing above the noise, said so', { timeout: 120000 }, async () => {
  await page.goto(profd.base + '/?' + qs({ view: 'regressions', query: 'heap{service="regsvc",version="v1"}', by: 'run' }));
  await settled(page);
  assert.equal(await page.inputValue('#reg-query'), 'heap{service="regsvc",version="v1"}');
  assert.equal(await page.inputValue('#reg-by'), 'run');
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('.reg-cmp')].map((s) => s.getAttribute('data-to'))), ['r1']);
  assert.deepEqual(await rows(page), []);
  assert.match(await page.textContent('#reg-body'), /Nothing changed above the noise/);
});

test('a bad selector: the API\'s error on the page', { timeout: 120000 }, async () => {
  await page.goto(profd.base + '/?' + qs({ view: 'regressions', query: 'heap{service=', by: 'version' }));
  await settled(page);
  assert.ok(await page.isVisible('#reg-error'));
  assert.match(await page.textContent('#reg-error'), /HTTP 400/);
  assert.deepEqual(await rows(page), []);
  assert.deepEqual(pageErrors, [], 'no page or console error');
});
