// Issue 31 item 7, the source view in the UI, in Debian's chromium
// (headless, playwright-core): a stripped clang -g program
// (tests/e2e/source/hotline.c) profiled by profd-agent (eBPF), its debug
// info and source served by Debian's debuginfod on loopback
// (tests/e2e/source_lib.mjs). On the merged profile:
//   - the top table's "source" of hot_line opens the panel: every line of
//     the file, the HOT line highlighted as the hottest, scrolled into view
//     in the panel, with the widest heat bar, "from debuginfod (build ID)";
//   - right-click on hot_line's frame (the sandwich view), then Source: the
//     same panel;
//   - cold_spin, whose source is nowhere: the panel says so, naming the
//     function and what was tried.
// Needs root for the agent (skips with its message when the kernel refuses BPF).
//
//   PROFD_BIN=build/profd PROFD_AGENT_BIN=build/profd-agent PD_UI_SHOTS=shots node --test tests/ui/source.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { Proc, http, killAll, qs, startProfd, tempDir, waitFor } from '../e2e/lib.mjs';
import { debuginfodTarget, startAgent } from '../e2e/source_lib.mjs';
import { clickFrame, waitFrame } from './flamelib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const SEL = 'process_cpu{comm="hotline"}';
const pageErrors = [];
let dir, profd, tgt, agent, skipWhy = null, browser, page, shots, t0, text;

async function shot(t, name) {
  const file = path.join(shots, `31-source-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  t.diagnostic(`screenshot: ${file}`);
}

before(async () => {
  dir = tempDir('profd-uisrc-');
  shots = process.env.PD_UI_SHOTS || path.join(dir, 'shots');
  fs.mkdirSync(shots, { recursive: true });
  tgt = await debuginfodTarget(dir);
  text = fs.readFileSync(tgt.src, 'utf8').replace(/\n$/, '').split('\n');
  process.env.DEBUGINFOD_URLS = tgt.durl;
  process.env.DEBUGINFOD_TIMEOUT = '30';
  profd = await startProfd({ storage: path.join(dir, 'data') });
  delete process.env.DEBUGINFOD_URLS;
  t0 = Date.now() - 60000;
  new Proc('hotline', tgt.bin, []);
  ({ agent, skipWhy } = await startAgent(profd.base));
  if (skipWhy) return;
  // enough samples of both functions, named with lines
  const src = (fn) => `${profd.base}/api/v1/source?` + qs({ query: SEL, mode: 'merge', from: '0', to: String(Math.ceil(Date.now() / 1000)), function: fn });
  let last = '';
  await waitFor('hot_line (30 samples) and cold_spin (named with lines)', async () => {
    const [h, c] = await Promise.all([http(src('hot_line')), http(src('cold_spin'))]);
    last = `${h.status} ${h.text.slice(0, 200)} | ${c.status} ${c.text.slice(0, 300)}`;
    return h.status === 200 && h.json.data.self >= 30 && c.status === 404 && /no source for function/.test(c.text);
  }, 300000, 2000).catch((e) => { throw new Error(`${e.message}\nlast: ${last}\n${agent.tail()}`); });

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  // the not-found answer is a 404 the browser logs: expected
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 404/.test(m.text())) pageErrors.push('console: ' + m.text()); });
  const to = Date.now();
  const iso = (ms) => new Date(ms).toISOString();
  await page.goto(`${profd.base}/?` + qs({ query: SEL, from: iso(t0), to: iso(to), sel: `${t0}-${to}` }));
  await page.waitForSelector('#top-table tbody tr[data-fn="hot_line"]');
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// What the panel shows: state, the hottest line, its row, whether that row
// is inside the panel's scroll box, heat bar widths.
const panel = () => page.evaluate(() => {
  const box = document.getElementById('source-view'), body = document.getElementById('source-body');
  const hot = body.querySelector('tr.hottest');
  const br = body.getBoundingClientRect(), hr = hot ? hot.getBoundingClientRect() : null;
  const bars = [...body.querySelectorAll('tr[data-line]')].map((tr) => [+tr.getAttribute('data-line'), tr.querySelector('.heat span').getBoundingClientRect().width]);
  return {
    state: box.getAttribute('data-state'), hidden: box.hidden, hottest: +box.getAttribute('data-hottest'),
    origin: box.getAttribute('data-origin'), file: box.getAttribute('data-file'),
    hotLine: hot ? +hot.getAttribute('data-line') : 0, hotCode: hot ? hot.querySelector('td.code').textContent : '',
    hotSelf: hot ? +hot.getAttribute('data-self') : 0,
    inView: !!hr && hr.top >= br.top && hr.bottom <= br.bottom,
    rows: body.querySelectorAll('tr[data-line]').length, bars,
    where: document.getElementById('source-where').textContent, fn: document.getElementById('source-fn').textContent,
    error: document.getElementById('source-error').hidden ? '' : document.getElementById('source-error').textContent,
  };
});

function checkHot(p) {
  assert.equal(p.state, 'shown');
  assert.equal(p.fn, 'hot_line');
  assert.equal(p.origin, 'debuginfod');
  assert.equal(p.file, tgt.src);
  assert.equal(p.rows, text.length, 'every line of the file');
  assert.equal(p.hottest, tgt.hotLine);
  assert.equal(p.hotLine, tgt.hotLine, 'the HOT line is the one highlighted');
  assert.equal(p.hotCode, text[tgt.hotLine - 1]);
  assert.ok(p.hotSelf > 0);
  assert.ok(p.inView, 'the hottest line is scrolled into view in the panel');
  const widest = p.bars.reduce((a, b) => (b[1] > a[1] ? b : a));
  assert.equal(widest[0], tgt.hotLine, 'the widest heat bar is the HOT line\'s: ' + JSON.stringify(p.bars.filter((b) => b[1])));
  assert.ok(p.where.includes(tgt.bid), `says where from: ${p.where}`);
}

test('top table "source" of hot_line: the file from debuginfod, the HOT line highlighted and in view', { timeout: 600000 }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  // the row's actions show on hover (or focus), as its "sandwich"
  await page.locator('#top-table tbody tr[data-fn="hot_line"]').hover();
  await page.click('#top-table tbody tr[data-fn="hot_line"] .src-open');
  await page.waitForSelector('#source-view[data-state="shown"]');
  checkHot(await panel());
  await page.locator('#source-view').scrollIntoViewIfNeeded();
  await shot(t, 'hot-line');
});

test('right-click on the hot_line frame, then Source in the sandwich view: the same panel', { timeout: 300000 }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await page.click('#source-close');
  assert.equal((await panel()).hidden, true);
  await waitFrame(page, 'hot_line');
  await clickFrame(page, 'hot_line', { button: 'right' });
  await page.waitForSelector('#sandwich:not([hidden])');
  await page.click('#sandwich-source');
  await page.waitForSelector('#source-view[data-state="shown"]');
  checkHot(await panel());
});

test('cold_spin, whose source is nowhere: the panel says so, naming the function and what was tried', { timeout: 300000 }, async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await page.locator('#top-table tbody tr[data-fn="cold_spin"]').hover();
  await page.click('#top-table tbody tr[data-fn="cold_spin"] .src-open');
  await page.waitForSelector('#source-view[data-state="missing"]');
  const p = await panel();
  assert.equal(p.fn, 'cold_spin');
  assert.equal(p.rows, 0);
  assert.match(p.error, /^No source to show: not_found: no source for function "cold_spin"/);
  assert.ok(p.error.includes(`debuginfod build ID ${tgt.bid}: not found`), p.error);
  assert.ok(await page.isVisible('#source-error'));
  await page.locator('#source-view').scrollIntoViewIfNeeded();
  await shot(t, 'not-found');
  assert.deepEqual(pageErrors, []);
});
