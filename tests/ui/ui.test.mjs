// Browser test of profd's web UI (issue 2, "Web UI"): Debian's chromium,
// headless, driven by playwright-core (tests/ui/node_modules; no browser
// download). profd runs on a free loopback port with real Go profiles from
// PD_TESTDATA pushed through profefe's API; the page must load, suggest
// labels, draw one point per profile, and on a click show the profile's
// flame graph (with a function the API's own top report names) and top table.
//
//   PROFD_BIN=build/profd node --test tests/ui/
//
// A screenshot of each step is written to $PD_UI_SHOTS (default: a temp dir)
// and the paths printed as test diagnostics.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { axisLabels, clickPoint, pointCount, profiles, pointXY as pointAt, waitPoints } from './timelib.mjs';
import { contrastFailures } from './contrast.mjs';
import { clickFrame, frameNames, hoverFrame, kbdName, matchCount, pixelAt, rectBox, waitFrame, waitMatches, zoomName } from './flamelib.mjs';
import { TESTDATA, apiData, freePort, http, killAll, qs, startProfd, tempDir, waitFor } from '../e2e/lib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const SERIES_DIR = path.join(TESTDATA, 'pprof', 'go-demo-series');
const N_HEAP = 6, N_CPU = 4;

let dir, shots, profd, browser, page;
const pageErrors = [];
const base = Date.now() - 30 * 60 * 1000; // first push 30 minutes ago: inside "last 1h"
const heapTimes = [], cpuTimes = [];

async function push(file, type, createdMs) {
  const body = fs.readFileSync(path.join(SERIES_DIR, file));
  const r = await http(`${profd.base}/api/0/profiles?` + qs({
    service: 'uitest', type, instance_id: 'ui-1', labels: 'zone=eu-1',
    created_at: new Date(createdMs).toISOString().replace(/\.\d+Z$/, 'Z'),
  }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } });
  assert.ok(r.status >= 200 && r.status < 300, `push ${file}: HTTP ${r.status} ${r.text}\n${profd.tail()}`);
}

async function shot(t, name) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  t.diagnostic(`screenshot: ${file}`);
}

before(async () => {
  dir = tempDir('profd-ui-');
  shots = process.env.PD_UI_SHOTS || path.join(dir, 'shots');
  fs.mkdirSync(shots, { recursive: true });
  // One job whose target is a port nobody listens on: the targets page then
  // has something to show (health down) without adding any profile.
  const dead = await freePort();
  const config = path.join(dir, 'profd.yaml');
  fs.writeFileSync(config, `scrape_configs:\n  - job_name: unreachable\n    scrape_interval: 1s\n    scrape_timeout: 1s\n` +
    `    static_configs:\n      - targets: ["127.0.0.1:${dead}"]\n    profiling_config:\n      pprof_config:\n` +
    ['allocs', 'block', 'goroutine', 'mutex', 'threadcreate', 'cpu'].map((t) => `        ${t}: {enabled: false}\n`).join(''));
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
  for (let i = 0; i < N_HEAP; i++) {
    heapTimes.push(Math.floor((base + i * 60000) / 1000) * 1000);
    await push(`heap-${String(i + 1).padStart(4, '0')}.pb.gz`, 'heap', heapTimes[i]);
  }
  for (let i = 0; i < N_CPU; i++) {
    cpuTimes.push(Math.floor((base + 30000 + i * 60000) / 1000) * 1000);
    await push(`cpu-${String(i + 1).padStart(4, '0')}.pb.gz`, 'cpu', cpuTimes[i]);
  }
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP && !process.env.PD_UI_SHOTS) fs.rmSync(dir, { recursive: true, force: true });
});

test('the page loads from the binary and lists the stored profile types', { timeout: 180000 }, async (t) => {
  const resp = await page.goto(profd.base + '/');
  assert.equal(resp.status(), 200);
  assert.equal(await page.title(), 'profd');
  // The chips come from /api/v1/label/__name__/values.
  await page.waitForSelector('#type-chips a[data-q="heap"]');
  await page.waitForSelector('#type-chips a[data-q="cpu"]');
  for (const asset of ['/static/app.js', '/static/style.css']) {
    const r = await http(profd.base + asset);
    assert.equal(r.status, 200, asset);
  }
  // Page weight (issue 15: < 150 KB compressed): the page and every asset it
  // loaded, as chromium received them (gzip from profd)
  const w = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource').filter((e) => /\/static\//.test(e.name));
    return { n: res.length, wire: nav.encodedBodySize + res.reduce((a, e) => a + e.encodedBodySize, 0),
      raw: nav.decodedBodySize + res.reduce((a, e) => a + e.decodedBodySize, 0), names: res.map((e) => e.name.replace(/^.*\/static\//, '')) };
  });
  t.diagnostic(`page weight: ${w.wire} B compressed (${w.raw} B) in ${w.n + 1} files: ${w.names.join(' ')}`);
  assert.ok(w.names.includes('vendor/uplot/uPlot.iife.min.js') && w.names.includes('flame.js'), 'the modules were loaded');
  assert.ok(w.wire < 150 * 1024, `page weight ${w.wire} B compressed (goal < 150 KB)`);
  assert.ok(w.wire < w.raw / 2, 'the assets came compressed');
  // the vendored uPlot is the npm package's file, byte for byte (package.json pins its version)
  const vendored = await http(profd.base + '/static/vendor/uplot/uPlot.iife.min.js');
  const npmFile = fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'node_modules', 'uplot', 'dist', 'uPlot.iife.min.js'));
  assert.ok(Buffer.compare(vendored.buf, npmFile) === 0, 'src/ui/assets/vendor/uplot/uPlot.iife.min.js is npm uplot\'s dist file');
  await shot(t, '1-start');
});

test('the selector box suggests label names and values', { timeout: 180000 }, async (t) => {
  const input = page.locator('#selector');
  await input.click();
  await input.fill('');
  await input.pressSequentially('he');
  await page.waitForSelector('#suggest li:has-text("heap")');
  await page.keyboard.press('Tab');
  assert.equal(await input.inputValue(), 'heap');
  await input.pressSequentially('{serv');
  await page.waitForSelector('#suggest:not([hidden]) li:has-text("service")');
  await shot(t, '2-suggest-name');
  await page.keyboard.press('Tab');
  // the quote and the brace are closed, the caret between the quotes
  assert.equal(await input.inputValue(), 'heap{service=""}');
  assert.equal(await input.evaluate((e) => e.selectionStart), 'heap{service="'.length);
  // After name=" the values of that label are offered.
  await page.waitForSelector('#suggest:not([hidden]) li:has-text("uitest")');
  await page.keyboard.press('Tab');
  assert.equal(await input.inputValue(), 'heap{service="uitest"}');
  assert.equal(await input.evaluate((e) => e.selectionStart), 'heap{service="uitest"'.length);
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => document.getElementById('suggest').hidden);
});

test('a query draws one point per stored profile', { timeout: 180000 }, async (t) => {
  await page.click('#run');
  await waitPoints(page);
  assert.equal(await pointCount(page), N_HEAP);
  const ts = (await profiles(page)).map((p) => p.ts);
  assert.deepEqual(ts, heapTimes, 'points at the pushed created_at times');
  // Heap's default sample type (Go puts it last) is chosen, with its unit.
  assert.equal(await page.locator('#sample-type').inputValue(), 'inuse_space');
  assert.match(await page.locator('#legend').innerText(), /service="uitest"/);
  assert.match((await axisLabels(page)).y.join(' '), /[KM]iB/, 'y axis in bytes units');
  // The state is in the URL.
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('query'), 'heap{service="uitest"}');
  await shot(t, '3-timeline');

  // Another sample type redraws the same points with other values.
  const ys = async () => (await profiles(page)).map((p) => p.py.toFixed(1)).join();
  const y1 = await ys();
  await page.selectOption('#sample-type', 'alloc_objects');
  await page.waitForFunction((prev) => document.getElementById('timeline').timeline.profiles.map((p) => p.py.toFixed(1)).join() !== prev, y1);
  assert.equal(await pointCount(page), N_HEAP);
  await page.selectOption('#sample-type', 'inuse_space');
});

test('a click on a point shows its flame graph and top table', { timeout: 180000 }, async (t) => {
  const i = N_HEAP - 2;
  const when = heapTimes[i];
  await clickPoint(page, when);
  await waitFrame(page);
  await page.waitForSelector('#top-table tbody tr[data-fn]');

  // What the API says this profile's top functions are (not hard-coded).
  const top = await apiData(profd.base, '/api/v1/query?' + qs({
    query: '{__name__="heap", instance_id="ui-1", service="uitest", zone="eu-1"}', time: String(when / 1000),
    report: 'top', sample_index: 'inuse_space',
  }));
  assert.ok(top.rows.length > 0, 'the API top has rows');
  const expected = top.rows[0].function;
  assert.ok((await frameNames(page)).includes(expected), `the flame graph has a frame "${expected}"`);

  const rows = page.locator('#top-table tbody tr[data-fn]');
  assert.equal(await rows.count(), Math.min(top.rows.length, 200), 'one table row per function');
  assert.equal(await rows.first().getAttribute('data-fn'), expected, 'sorted by flat like the API');
  assert.match(await rows.first().innerText(), /(B|KiB|MiB)\b/, 'values with byte units');

  // Download link and the go tool pprof command point at report=proto of this profile.
  const href = await page.locator('#download').getAttribute('href');
  assert.match(href, /report=proto/);
  const dl = await http(profd.base + href);
  assert.equal(dl.status, 200);
  assert.equal(dl.buf[0], 0x1f, 'gzip pprof');
  assert.equal(dl.buf[1], 0x8b);
  assert.match(await page.locator('#pprof-cmd').innerText(), /^go tool pprof .*report=proto/);

  // Hover shows a tooltip with value and percentage.
  await hoverFrame(page, expected);
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').innerText(), /% of total/);
  if (top.rows[0].file) assert.ok((await page.locator('#tooltip').innerText()).includes(top.rows[0].file), 'the tooltip names the source file');
  // ... and where it comes from: file:line and the binary (issue 15), as the
  // API's flame graph says ("functions" at its root)
  const fg = await apiData(profd.base, '/api/v1/query?' + qs({
    query: '{__name__="heap", instance_id="ui-1", service="uitest", zone="eu-1"}', time: String(when / 1000),
    report: 'flamegraph', sample_index: 'inuse_space',
  }));
  const src = (fg.functions || {})[expected];
  assert.ok(src && src.file && src.line > 0, `functions[${expected}] has file and line: ${JSON.stringify(src)}`);
  const tip = await page.locator('#tooltip').innerText();
  assert.ok(tip.includes(src.file + ':' + src.line), `the tooltip says ${src.file}:${src.line}: ${tip}`);
  if (src.mapping) assert.ok(tip.includes(src.mapping.split('/').pop()), `the tooltip names the binary ${src.mapping}: ${tip}`);
  await shot(t, '4-profile');

  // Click to zoom: the clicked frame becomes full width.
  await clickFrame(page, expected);
  await page.waitForSelector('#flame-reset:not([hidden])');
  assert.equal(await zoomName(page), expected);
  const zw = await page.evaluate(() => { const f = document.getElementById('flamegraph').flame; return [f.rects.find((r) => r.node === f.zoom).w, f.canvas.clientWidth]; });
  assert.equal(zw[0], zw[1], 'the zoomed frame spans the whole width');
  await page.click('#flame-reset');

  // The URL opens the same profile again (shareable).
  const url = page.url();
  assert.match(url, /series=.*&t=\d+/);
  await page.goto(url);
  await waitFrame(page, expected); // reloaded URL shows the profile
});

// Issue 15 "the table and the flame graph each run their own merge": a view
// is one request (report=view) and so one merge on the server.
test('a merged view is one request and one merge', { timeout: 180000 }, async (t) => {
  const urls = [];
  const onReq = (r) => { if (r.url().includes('/api/v1/query?')) urls.push(r.url()); };
  page.on('request', onReq);
  try {
    await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', sel: `${heapTimes[1]}-${heapTimes[3]}` }));
    await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
    await waitFrame(page);
    await page.waitForSelector('#top-table tbody tr[data-fn]');
    const merges = urls.filter((u) => /mode=merge/.test(u) && !/report=proto/.test(u));
    assert.equal(merges.length, 1, merges.join('\n'));
    assert.match(merges[0], /report=view/);
  } finally {
    page.off('request', onReq);
  }
});

// Issue 12/15: the top table sorted only the 100 rows the server sent by
// flat, descending only, with no filter. Now each header asks the server for
// that order (both ways, keyboard too) and the filter box for matching names.
test('the top table is sorted and filtered by the server', { timeout: 180000 }, async (t) => {
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  const topURLs = [];
  const onReq = (r) => { if (r.url().includes('report=top')) topURLs.push(r.url()); };
  page.on('request', onReq);
  const names = () => page.locator('#top-table tbody tr[data-fn]').evaluateAll((els) => els.map((e) => e.getAttribute('data-fn')));
  const apiRows = async (url) => (await apiData(profd.base, url.slice(url.indexOf('/api/')))).rows.map((r) => r.function);
  try {
    await page.click('#top-table th[data-key="cum"]');
    await page.waitForFunction(() => document.querySelector('#top-table th[data-key="cum"]').getAttribute('aria-sort') === 'descending');
    await page.waitForFunction((n) => n > 0, topURLs.length);
    let last = topURLs[topURLs.length - 1];
    assert.match(last, /sort=cum&order=desc/);
    await page.waitForFunction(async () => true);
    assert.deepEqual(await names(), await apiRows(last), 'the table shows the server\'s rows in its order');
    // again: ascending, from the keyboard
    const n0 = topURLs.length;
    await page.focus('#top-table th[data-key="cum"]');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('#top-table th[data-key="cum"]').getAttribute('aria-sort') === 'ascending');
    assert.ok(topURLs.length > n0);
    last = topURLs[topURLs.length - 1];
    assert.match(last, /sort=cum&order=asc/);
    await page.waitForFunction(() => document.querySelector('#top-table th.sorted.asc'));
    const asc = await apiRows(last);
    await page.waitForFunction((want) => [...document.querySelectorAll('#top-table tbody tr[data-fn]')].map((e) => e.getAttribute('data-fn')).join('\n') === want, asc.join('\n'));
    // the filter: only matching names, asked of the server
    const all = await names();
    const word = 'runtime';
    const want = all.filter((f) => f.toLowerCase().includes(word));
    assert.ok(want.length > 0 && want.length < all.length, 'the filter keeps some rows and drops others');
    await page.fill('#top-filter', 'RunTime');
    await page.waitForFunction((n) => [...document.querySelectorAll('#top-table tbody tr[data-fn]')].length === n, want.length);
    last = topURLs[topURLs.length - 1];
    assert.match(last, /filter=RunTime/);
    for (const f of await names()) assert.ok(f.toLowerCase().includes(word), f);
    await shot(t, '4b-top-sorted-filtered');
    await page.fill('#top-filter', '');
    await page.waitForFunction((n) => document.querySelectorAll('#top-table tbody tr[data-fn]').length === n, all.length);
    await page.click('#top-table th[data-key="flat"]');
    await page.waitForFunction(() => document.querySelector('#top-table th[data-key="flat"]').getAttribute('aria-sort') === 'descending');
  } finally {
    page.off('request', onReq);
  }
});

// Centre of timeline point i (page coordinates).
async function pointXY(i) {
  return pointAt(page, heapTimes[i]);
}

// Drags across the timeline from halfway between points i-1 and i to
// halfway between points j and j+1 (or a little past an end point).
async function dragPoints(i, j) {
  const pi = await pointXY(i), pj = await pointXY(j);
  const x0 = i > 0 ? (pi.x + (await pointXY(i - 1)).x) / 2 : pi.x - 6;
  const x1 = j < N_HEAP - 1 ? (pj.x + (await pointXY(j + 1)).x) / 2 : pj.x + 6;
  const box = await page.locator('#timeline svg').boundingBox();
  const y = box.y + box.height - 40; // low in the plot, away from the points' tooltips
  await page.mouse.move(x0, y);
  await page.mouse.down();
  await page.mouse.move((x0 + x1) / 2, y, { steps: 4 });
  await page.mouse.move(x1, y, { steps: 4 });
  await page.mouse.up();
}

// Sum of the inuse_space totals of the heap points in [from, to] ms, from
// the API's own query_range (what the timeline draws), over every series.
async function rangeTotal(from, to) {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: 'heap{service="uitest"}', from: String(heapTimes[0] / 1000 - 60), to: String(heapTimes[N_HEAP - 1] / 1000 + 60),
  }));
  let sum = 0, n = 0;
  for (const s of data) {
    const idx = s.sample_types.findIndex((st) => st.type === 'inuse_space');
    assert.ok(idx >= 0, 'series has inuse_space');
    s.timestamps.forEach((ts, j) => { if (ts >= from && ts <= to) { sum += s.totals[j][idx]; n++; } });
  }
  return { sum, n };
}

test('a drag on the timeline shows the merged flame graph and top table of the range', { timeout: 180000 }, async (t) => {
  // agg=sum: inuse_space is a gauge, merged as avg by default (issue 12)
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', agg: 'sum' }));
  await waitPoints(page);
  assert.equal(await page.locator('#sample-type').inputValue(), 'inuse_space');
  await dragPoints(1, 3);
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  await waitFrame(page);
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  await page.waitForFunction(() => !document.getElementById('profile-panel').classList.contains('loading'));

  // The selection is the range from the first to the last point inside the drag.
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('sel'), `${heapTimes[1]}-${heapTimes[3]}`, 'selection in the URL');
  const rect = page.locator('#timeline rect.sel-m');
  assert.equal(await rect.count(), 1, 'the range is shaded on the timeline');
  assert.match(await page.locator('#selection').innerText(), /3 profiles/);

  // The merged total is the sum of the selected points' totals.
  const exp = await rangeTotal(heapTimes[1], heapTimes[3]);
  assert.equal(exp.n, 3, 'three points in the range');
  assert.ok(exp.sum > 0);
  assert.equal(+(await page.locator('#flamegraph').getAttribute('data-total')), exp.sum, 'flame graph total = sum of the points');
  assert.equal(+(await page.locator('#top-table').getAttribute('data-total')), exp.sum, 'top table total = sum of the points');
  // The root frame spans the whole width and the top table has the merge's functions.
  const top = await apiData(profd.base, '/api/v1/query?' + qs({
    mode: 'merge', query: 'heap{service="uitest"}', from: String(heapTimes[1] / 1000), to: String(heapTimes[3] / 1000),
    report: 'top', sample_index: 'inuse_space',
  }));
  assert.equal(top.total, exp.sum, 'the API merge agrees');
  assert.equal(await page.locator('#top-table tbody tr[data-fn]').first().getAttribute('data-fn'), top.rows[0].function);
  assert.equal(await page.locator('#top-table thead th').first().getAttribute('data-key'), 'flat');

  // The pprof download is the merge (3 profiles).
  const href = await page.locator('#download').getAttribute('href');
  assert.match(href, /mode=merge/);
  assert.match(href, /report=proto/);
  const dl = await http(profd.base + href);
  assert.equal(dl.status, 200);
  assert.equal(dl.buf[0], 0x1f, 'gzip pprof');
  assert.equal(dl.headers.get('x-profd-profiles'), '3');
  assert.match(await page.locator('#pprof-cmd').innerText(), /^go tool pprof .*mode=merge.*report=proto/);
  await shot(t, '5-merge');

  // Reloading the URL shows the same merge.
  await page.goto(page.url());
  await page.waitForSelector('#profile-panel[data-kind="merge"]');
  await waitFrame(page);
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === v, String(exp.sum));

  // Issue 15 "shared links rot": the link pins the window it was made in
  // (from/to), so opened a day later (the page's clock moved) it shows the
  // same points, the same 3 merged profiles and the same flame graph total.
  const link = page.url();
  const lu = new URL(link);
  assert.ok(lu.searchParams.get('from') && lu.searchParams.get('to'), `the link has an absolute window: ${link}`);
  const later = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  try {
    await later.clock.setFixedTime(new Date(Date.now() + 86400e3));
    await later.goto(link);
    await waitPoints(later);
    assert.equal(await pointCount(later), N_HEAP, 'every point of the window, a day later');
    await later.waitForSelector('#profile-panel[data-kind="merge"]');
    await waitFrame(later);
    await later.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === v, String(exp.sum));
    assert.match(await later.locator('#selection').innerText(), /3 profiles/);
    assert.equal(await later.locator('#range').inputValue(), 'custom', 'the range box shows the pinned window');
    assert.match(await later.locator('#tz').innerText(), /UTC[+-]\d\d:\d\d/, 'the time zone is shown');
    assert.ok(await later.locator('#back-to-now').isVisible());
    await later.screenshot({ path: path.join(shots, '5b-link-a-day-later.png'), fullPage: true });
    t.diagnostic(`screenshot: ${path.join(shots, '5b-link-a-day-later.png')}`);
    // back to now: a relative window again, and the choice goes with it
    await later.click('#back-to-now');
    await later.waitForFunction(() => !new URL(location.href).searchParams.get('from'));
    assert.equal(new URL(later.url()).searchParams.get('sel'), null);
    await later.waitForFunction(() => document.getElementById('timeline').timeline.profiles.length === 0);
  } finally {
    await later.close();
  }
});

test('shift-click on two points merges the range between them', { timeout: 180000 }, async (t) => {
  const p0 = await pointXY(0), p2 = await pointXY(2);
  await page.keyboard.down('Shift');
  await page.mouse.click(p0.x, p0.y);
  await page.waitForSelector('#selection:has-text("Shift-click a second point")');
  await page.mouse.click(p2.x, p2.y);
  await page.keyboard.up('Shift');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('sel'));
  assert.equal(new URL(page.url()).searchParams.get('sel'), `${heapTimes[0]}-${heapTimes[2]}`);
  const exp = await rangeTotal(heapTimes[0], heapTimes[2]);
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === v, String(exp.sum));
  // A plain click goes back to one profile.
  const p4 = await pointXY(4);
  await page.mouse.click(p4.x, p4.y);
  await page.waitForSelector('#profile-panel[data-kind="single"]');
  assert.equal(await page.locator('#timeline rect.sel').count(), 0, 'no range shaded');
});

test('compare mode shows the diff of two ranges: red and green frames, base/new/delta columns', { timeout: 180000 }, async (t) => {
  // absolute (diff=abs): the sums of each side; shares, the default, are compare.test.mjs' (issue 31)
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', agg: 'sum', diff: 'abs' }));
  await waitPoints(page);
  await page.click('#compare');
  assert.equal(await page.locator('#compare').getAttribute('aria-pressed'), 'true');
  await dragPoints(0, 2); // A: three profiles
  await page.waitForSelector('#timeline rect.sel-a');
  await dragPoints(4, 5); // B: two profiles
  await page.waitForSelector('#timeline rect.sel-b');
  await page.waitForSelector('#profile-panel[data-kind="diff"]');
  await waitFrame(page);
  await page.waitForFunction(() => !document.getElementById('profile-panel').classList.contains('loading'));
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('cmp'), '1');
  assert.equal(u.searchParams.get('a'), `${heapTimes[0]}-${heapTimes[2]}`);
  assert.equal(u.searchParams.get('b'), `${heapTimes[4]}-${heapTimes[5]}`);

  // What the API says grew and shrank (not hard-coded): both happen here.
  const diffQ = {
    mode: 'diff', query_a: 'heap{service="uitest"}', query_b: 'heap{service="uitest"}', mode_a: 'merge', mode_b: 'merge',
    from_a: String(heapTimes[0] / 1000), to_a: String(heapTimes[2] / 1000),
    from_b: String(heapTimes[4] / 1000), to_b: String(heapTimes[5] / 1000), sample_index: 'inuse_space',
  };
  const fg = await apiData(profd.base, '/api/v1/query?' + qs({ ...diffQ, report: 'flamegraph' }));
  const grew = new Set(), shrank = new Set();
  (function walk(n) {
    if (n.name !== 'root') (n.new > n.base ? grew : n.new < n.base ? shrank : new Set()).add(n.name);
    (n.children || []).forEach(walk);
  })(fg);
  assert.ok(grew.size > 0 && shrank.size > 0, 'the chosen ranges have frames that grew and frames that shrank');
  const a = await rangeTotal(heapTimes[0], heapTimes[2]), b = await rangeTotal(heapTimes[4], heapTimes[5]);
  assert.equal(fg.base, a.sum, 'diff base = sum of A');
  assert.equal(fg.new, b.sum, 'diff new = sum of B');

  // Grown frames are red, shrunk ones green.
  // (the canvas' pixels read back at each frame)
  const painted = await page.evaluate(() => document.getElementById('flamegraph').flame.rects
    .map((r, i) => ({ i, name: r.name, w: r.w, d: r.node ? r.node.new - r.node.base : 0, node: !!r.node,
      rel: r.node ? Math.abs(r.node.new - r.node.base) / Math.max(Math.abs(r.node.base), Math.abs(r.node.new), 1) : 0 }))
    .filter((r) => r.node && r.name !== 'root' && r.w >= 3));
  // a change under 0.05% of a frame is drawn unchanged (flame.js SAME)
  const red = painted.filter((r) => r.d > 0 && r.rel >= 0.0005), green = painted.filter((r) => r.d < 0 && r.rel >= 0.0005);
  assert.ok(red.length > 0, 'red frames');
  assert.ok(green.length > 0, 'green frames');
  for (const r of red) {
    const [pr, pg] = await pixelAt(page, r.i);
    assert.ok(pr > pg, `grown frame ${r.name} is red (${pr},${pg})`);
    assert.ok(grew.has(r.name), `${r.name} grew`);
  }
  for (const r of green) {
    const [pr, pg] = await pixelAt(page, r.i);
    assert.ok(pg > pr, `shrunk frame ${r.name} is green (${pr},${pg})`);
    assert.ok(shrank.has(r.name), `${r.name} shrank`);
  }

  // The top table shows base, new and delta.
  const keys = await page.locator('#top-table thead th').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
  assert.deepEqual(keys.slice(0, 3), ['base_flat', 'new_flat', 'flat']);
  assert.match(await page.locator('#top-table thead').innerText(), /A \(base\)[\s\S]*B[\s\S]*Δ/);
  const top = await apiData(profd.base, '/api/v1/query?' + qs({ ...diffQ, report: 'top' }));
  const row = page.locator('#top-table tbody tr[data-fn]').first();
  assert.equal(await row.getAttribute('data-fn'), top.rows[0].function, 'sorted by |delta| like the API');
  const cells = await row.locator('td').allInnerTexts();
  const r0 = top.rows[0];
  assert.equal(r0.flat, r0.new_flat - r0.base_flat);
  assert.match(cells[2], r0.flat > 0 ? /^\+/ : /^-/, 'delta is signed');
  assert.equal(await row.locator('td.delta').first().getAttribute('class'), 'num delta ' + (r0.flat > 0 ? 'pos' : 'neg'));
  assert.ok(await page.locator('#top-table td.delta.pos').count() > 0, 'a grown row');
  assert.ok(await page.locator('#top-table td.delta.neg').count() > 0, 'a shrunk row');
  assert.equal(+(await page.locator('#top-table').getAttribute('data-total')), b.sum - a.sum, 'total delta');
  assert.match(await page.locator('#pprof-cmd').innerText(), /-diff_base=/);
  const dl = await http(profd.base + await page.locator('#download').getAttribute('href'));
  assert.equal(dl.status, 200);
  assert.equal(dl.headers.get('x-profd-profiles'), '5');

  // Hover on a red frame tells A, B and the delta.
  const rb = await rectBox(page, red[0].i);
  await page.mouse.move(rb.x + Math.min(rb.w / 2, 20), rb.y + 8);
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').innerText(), /A \(base\)[\s\S]*B[\s\S]*Δ \+/);
  await page.mouse.move(5, 5);
  await shot(t, '6-compare');

  // Compare off: B stays as the merged range.
  await page.click('#compare');
  await page.waitForSelector('#profile-panel[data-kind="merge"]');
  assert.equal(new URL(page.url()).searchParams.get('sel'), `${heapTimes[4]}-${heapTimes[5]}`);
});

test('the CPU series shows time units', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}' }));
  await waitPoints(page);
  assert.equal(await pointCount(page), N_CPU);
  assert.equal(await page.locator('#sample-type').inputValue(), 'cpu');
  await clickPoint(page, { index: -1 });
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  assert.match(await page.locator('#top-table tbody tr').first().innerText(), /\d(ms|s|µs)\b/);
  await shot(t, '7-cpu');
});

test('the targets page shows health per job and profile type', { timeout: 180000 }, async (t) => {
  await page.click('#nav-targets');
  assert.equal(new URL(page.url()).pathname, '/targets');
  await page.waitForSelector('.job[data-job="unreachable"]');
  // The page refreshes itself; the first scrape fails within a few seconds.
  await page.waitForSelector('.job[data-job="unreachable"] tr[data-health="down"] .badge.down', { timeout: 120000 });
  assert.match(await page.locator('.job[data-job="unreachable"] td.err').first().innerText(), /\S/, 'the error is shown');
  await shot(t, '8-targets');
  // A reload of /targets is served the page too.
  await page.reload();
  await page.waitForSelector('.job[data-job="unreachable"]');
  assert.deepEqual(pageErrors, [], 'no JavaScript errors');
});

// Issue 15: legend entries repeated the labels every series shares, and the
// palette repeated after 12 series.
test('the legend names only the labels that differ; 24 series get 24 colours', { timeout: 180000 }, async (t) => {
  const body = fs.readFileSync(path.join(SERIES_DIR, 'heap-0001.pb.gz'));
  const when = new Date(Math.floor((Date.now() - 600000) / 1000) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  for (let i = 0; i < 24; i++) {
    // one time for all 24 (pushes straddling a second made the drag's range miss a hidden one)
    const r = await http(`${profd.base}/api/0/profiles?` + qs({
      service: 'palette', type: 'heap', instance_id: `p-${String(i).padStart(2, '0')}`, labels: 'zone=eu-2',
      created_at: when,
    }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } });
    assert.ok(r.status >= 200 && r.status < 300, r.text);
  }
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="palette"}' }));
  await page.waitForSelector('#legend li[data-key]');
  const entries = page.locator('#legend li[data-key]');
  assert.equal(await entries.count(), 24);
  const common = await page.locator('#legend li.common').innerText();
  assert.match(common, /service="palette"/);
  assert.match(common, /zone="eu-2"/);
  for (const text of await entries.allInnerTexts()) {
    assert.match(text, /instance_id="p-\d\d"/);
    assert.doesNotMatch(text, /service=|zone=/, `only the differing label: ${text}`);
  }
  const colours = await page.locator('#legend li[data-key] .swatch').evaluateAll((els) => els.map((e) => getComputedStyle(e).backgroundColor));
  assert.equal(new Set(colours).size, 24, `24 distinct colours: ${colours.join(' ')}`);
  await shot(t, '5c-legend-24');

  // Hidden legend entries are left out of the merge (they were merged anyway)
  for (let i = 0; i < 4; i++) await entries.nth(i).click();
  await page.waitForFunction(() => document.querySelectorAll('#legend li.off').length === 4);
  assert.equal(new URL(page.url()).searchParams.getAll('hide').length, 4, 'hidden series are in the URL');
  const b = await pointAt(page, { index: 0 });
  const box = await page.locator('#timeline svg').boundingBox();
  const y = box.y + box.height - 40;
  await page.mouse.move(b.x - 30, y);
  await page.mouse.down();
  await page.mouse.move(b.x + 30, y, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  await waitFrame(page);
  assert.match(await page.locator('#selection').innerText(), /20 profiles/);
  const href = await page.locator('#download').getAttribute('href');
  assert.equal((href.match(/exclude=/g) || []).length, 4);
  const dl = await http(profd.base + href);
  assert.equal(dl.status, 200);
  assert.equal(dl.headers.get('x-profd-profiles'), '20', 'the merge leaves the 4 hidden series out');
  // showing one again puts it back in the merge
  await entries.nth(0).click();
  await page.waitForFunction(() => /21 profiles/.test(document.getElementById('selection').innerText));
  const href2 = await page.locator('#download').getAttribute('href');
  assert.equal((await http(profd.base + href2)).headers.get('x-profd-profiles'), '21');
});

// Issue 15: with DejaVu Sans Mono at 1x the selector box clipped the "_"
// below the baseline (inuse_space read "inuse space"): its line box must
// hold the glyph's descent.
test('underscores are visible in the selector box', { timeout: 180000 }, async (t) => {
  await page.fill('#selector', 'heap{__name__="x_y_z"}');
  const m = await page.locator('#selector').evaluate((el) => {
    const cs = getComputedStyle(el);
    return { lh: parseFloat(cs.lineHeight), fs: parseFloat(cs.fontSize), h: el.clientHeight };
  });
  assert.ok(m.lh >= 1.4 * m.fs, `line-height ${m.lh}px for a ${m.fs}px font`);
  assert.ok(m.h >= m.lh, `the box (${m.h}px) holds the line (${m.lh}px)`);
  const b = await page.locator('#selector').screenshot();
  fs.writeFileSync(path.join(shots, '5d-underscore.png'), b);
  t.diagnostic(`screenshot: ${path.join(shots, '5d-underscore.png')}`);
});

// Issue 15: frames narrower than 7 px were drawn 7 px wide (padding and
// border outside the width), overlapping their neighbours; a bad search
// regexp was ignored silently. In a narrow window the small frames of a real
// CPU profile are a few pixels wide: each must be drawn at most as wide as
// its value, thin runs merged into "…".
test('flame graph frames are never drawn wider than their value; a bad search regexp is reported', { timeout: 180000 }, async (t) => {
  const narrow = await browser.newPage({ viewport: { width: 480, height: 900 } });
  try {
    const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
    await narrow.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
    await waitFrame(narrow);
    // The API's tree of this profile: what each frame's width must be.
    const fg = await apiData(profd.base, '/api/v1/query?' + qs({ query: series, time: String(cpuTimes[0] / 1000), report: 'flamegraph' }));
    const want = new Map();
    (function walk(n, pth) { want.set(pth, n.value); (n.children || []).forEach((c) => walk(c, pth + '\n' + c.name)); })(fg, 'root');
    const r = await narrow.evaluate(() => {
      const f = document.getElementById('flamegraph').flame;
      const W = f.canvas.clientWidth, dpr = window.devicePixelRatio || 1;
      const pathOf = (n) => { const a = []; for (; n; n = n.parent) a.unshift(n.name); return a.join('\n'); };
      const rects = f.rects.map((q) => ({ path: q.node ? pathOf(q.node) : null, x: q.x, w: q.w, y: q.y, value: q.value, more: q.kind === 'more', count: q.count }));
      // every pixel column of each row that no rect covers must be blank
      const img = f.ctx.getImageData(0, 0, f.canvas.width, f.canvas.height).data;
      let spill = 0, where = '';
      for (let row = 0; row <= f.maxRow; row++) {
        const y = Math.floor((row * 18 + 8) * dpr);
        const iv = f.rects.filter((q) => q.y === row * 18).map((q) => [Math.floor(q.x * dpr), Math.ceil((q.x + q.w) * dpr)]);
        for (let x = 0; x < f.canvas.width; x++) {
          if (img[(y * f.canvas.width + x) * 4 + 3] === 0) continue;
          if (!iv.some(([a, b]) => x >= a && x < b)) { spill++; where = where || ('row ' + row + ' x ' + x); }
        }
      }
      return { W, rects, spill, where };
    });
    let thin = 0, worst = 0, more = 0;
    for (const q of r.rects) {
      if (q.more) { more++; continue; }
      assert.ok(want.has(q.path), `painted frame ${q.path.replace(/\n/g, ' > ')} is in the API's tree`);
      const exp = want.get(q.path) / fg.value * r.W;
      if (exp < 7) thin++;
      worst = Math.max(worst, q.w - exp);
    }
    assert.ok(thin > 0, `some frames are under 7 px here (${r.rects.length} painted): the case is exercised`);
    assert.ok(worst <= 0.01, `a frame is laid out ${worst.toFixed(3)} px wider than its value`);
    assert.equal(r.spill, 0, `pixels painted outside every frame (${r.where})`);
    t.diagnostic(`${r.rects.length} rects painted at ${r.W} px, ${thin} under 7 px, ${more} "…" runs`);
    await narrow.fill('#flame-search', 'main.(fib');
    await narrow.waitForFunction(() => /not a regular expression/.test(document.getElementById('flame-match').textContent));
    assert.equal(await narrow.locator('#flame-search').getAttribute('aria-invalid'), 'true');
    await narrow.fill('#flame-search', 'main\\.fib');
    await narrow.waitForFunction(() => /^matched /.test(document.getElementById('flame-match').textContent));
    assert.ok(await matchCount(narrow) >= 1);
    await narrow.screenshot({ path: path.join(shots, '9-flame-narrow.png'), fullPage: true });
    t.diagnostic(`screenshot: ${path.join(shots, '9-flame-narrow.png')}`);
  } finally {
    await narrow.close();
  }
});

// Issue 15: no call graph tab though the API has one; mouse only.
test('keyboard: "/" searches, Esc resets; the call graph tab shows the API\'s SVG', { timeout: 180000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await waitFrame(page);
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'flame-search');
  await page.keyboard.type('fib');
  await waitMatches(page);
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('#flame-search').inputValue(), '');
  await page.waitForFunction(() => !document.getElementById('flamegraph').classList.contains('searching'));
  // zoom with a click, back with Esc
  await clickFrame(page, 'main.fib');
  await page.waitForSelector('#flame-reset:not([hidden])');
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('Escape');
  await page.waitForSelector('#flame-reset', { state: 'hidden' });
  // the call graph
  await page.click('#view-callgraph');
  await page.waitForFunction(() => { const i = document.querySelector('#callgraph img'); return i && i.complete && i.naturalWidth > 0; }, null, { timeout: 120000 });
  assert.ok(await page.locator('#flamegraph').isHidden());
  const src = await page.locator('#callgraph').getAttribute('data-url');
  assert.match(src, /report=callgraph/);
  const svg = await http(profd.base + src);
  assert.equal(svg.status, 200);
  assert.match(svg.text, /<svg/);
  assert.match(svg.text, /main\.fib/, 'the hot function is a box of the call graph');
  // issue 31: what the page shows has human units, not the API's raw nanoseconds
  const shown = await page.evaluate(() => document.getElementById('callgraph').svg);
  const texts = [...shown.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
  assert.ok(texts.some((x) => /^Total: [\d.]+(ns|µs|ms|s|min)$/.test(x)), 'Total in units: ' + texts.slice(0, 4).join(' | '));
  assert.ok(texts.some((x) => /^[\d.]+(ns|µs|ms|s|min) \([\d.]+%\)$/.test(x)), 'a node value in units');
  assert.deepEqual(texts.filter((x) => /^\s*(of )?-?\d{4,}( \(|\s*$)/.test(x)), [], 'no raw value left');
  await shot(t, '10-callgraph');
  await page.click('#view-callgraph');
  assert.ok(await page.locator('#flamegraph').isVisible());
});

// Issue 15: no label explorer (Pyroscope's tag explorer, Parca's "sum by").
// A label with 30 values on real heap profiles: the explorer lists the label
// names with their number of values; picking one shows the 8 values with the
// largest total (the test computes which from the API) each with a small
// timeline and flame graph; a click adds the matcher to the selector.
test('label explorer: a label of 30 values broken down, a click narrows the selector', { timeout: 180000 }, async (t) => {
  const when = Math.floor((Date.now() - 300000) / 1000) * 1000;
  for (let i = 0; i < 30; i++) {
    const body = fs.readFileSync(path.join(SERIES_DIR, `heap-${String(i + 1).padStart(4, '0')}.pb.gz`));
    const r = await http(`${profd.base}/api/0/profiles?` + qs({
      service: 'explore', type: 'heap', instance_id: 'x-1', labels: `pod=pod-${String(i).padStart(2, '0')},team=core`,
      created_at: new Date(when).toISOString().replace(/\.\d+Z$/, 'Z'),
    }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } });
    assert.ok(r.status >= 200 && r.status < 300, r.text);
  }
  const sel = 'heap{service="explore"}';
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: sel, from: String(when / 1000 - 3600), to: String(Date.now() / 1000) }));
  const sums = data.map((s) => {
    const idx = s.sample_types.findIndex((st) => st.type === 'inuse_space');
    return [s.labels.pod, s.totals.reduce((a, tt) => a + tt[idx], 0)];
  }).sort((a, b) => b[1] - a[1]);
  const want = sums.slice(0, 8).map((x) => x[0]);

  await page.goto(profd.base + '/?' + qs({ query: sel }));
  await waitPoints(page);
  await page.click('#explore');
  await page.waitForSelector('#explorer-names button[data-name="pod"]');
  assert.match(await page.locator('#explorer-names button[data-name="pod"]').innerText(), /pod\s+30/);
  assert.match(await page.locator('#explorer-names button[data-name="team"]').innerText(), /team\s+1/);
  await page.click('#explorer-names button[data-name="pod"]');
  await page.waitForSelector('.explorer-card');
  const got = await page.locator('.explorer-card').evaluateAll((els) => els.map((e) => e.getAttribute('data-value')));
  assert.deepEqual(got, want, 'the 8 values with the largest inuse_space total, largest first');
  await page.waitForFunction(() => [...document.querySelectorAll('.explorer-card .mini-flame')].every((m) => m.querySelector('.mf')));
  assert.equal(await page.locator('.explorer-card .spark path').count(), 8);
  await shot(t, '11-explorer');
  await page.locator('.explorer-card').first().click();
  await page.waitForFunction((v) => document.getElementById('selector').value === v, `heap{service="explore", pod="${want[0]}"}`);
  await page.waitForFunction(() => document.querySelectorAll('#legend li[data-key]').length === 1);
  assert.match(await page.locator('#legend').innerText(), new RegExp(`pod="${want[0]}"`));
});

// Issue 15: no sandwich view (callers and callees of one function).
test('sandwich view: callers and callees of a function over every call site', { timeout: 180000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await waitFrame(page, 'main.fib');
  const top = await apiData(profd.base, '/api/v1/query?' + qs({ query: series, time: String(cpuTimes[0] / 1000), report: 'top', limit: '0' }));
  const fib = top.rows.find((r) => r.function === 'main.fib');
  assert.ok(fib && fib.cum > 0);
  await clickFrame(page, 'main.fib', { button: 'right' });
  await page.waitForSelector('#sandwich:not([hidden])');
  assert.equal(await page.locator('#sandwich-fn').innerText(), 'main.fib');
  assert.equal(+(await page.locator('#sandwich').getAttribute('data-value')), fib.cum, "the function's cum, as the API's top says");
  // callers: main.fib on top, main.burner (its caller) below it
  const callers = await page.locator('#sandwich-callers .mf').evaluateAll((els) => els.map((e) => [e.getAttribute('data-name'), parseFloat(e.style.top)]));
  assert.deepEqual(callers[0], ['main.fib', 0]);
  assert.ok(callers.some(([n, y]) => n === 'main.burner' && y > 0), JSON.stringify(callers));
  const callees = await page.locator('#sandwich-callees .mf').evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
  assert.equal(callees[0], 'main.fib');
  assert.ok(!callees.includes('main.burner'), 'a caller is not among the callees');
  await shot(t, '12-sandwich');
  // Focus on it (pprof -focus): only the samples through main.fib, as the API
  // computes them; then ignore it; then remove the filter
  const full = +(await page.locator('#flamegraph').getAttribute('data-total'));
  await page.click('#sandwich-focus');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('focus') === '^main\\.fib$');
  const focused = await apiData(profd.base, '/api/v1/query?' + qs({ query: series, time: String(cpuTimes[0] / 1000), report: 'top', limit: '0', focus: '^main\\.fib$' }));
  assert.ok(focused.total < full, `focus keeps less than all (${focused.total} of ${full})`);
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), focused.total);
  assert.equal(await page.locator('#top-table tbody tr[data-fn="runtime.mcall"]').count(), 0, 'a function off main.fib\'s stacks is gone');
  assert.match(await page.locator('#filters').innerText(), /focus on/);
  await page.click('#filters button[data-clear="focus"]');
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), full);
  await clickFrame(page, 'main.fib', { button: 'right' });
  await page.click('#sandwich-ignore');
  await page.waitForFunction((v) => +document.getElementById('flamegraph').getAttribute('data-total') === v, full - fib.cum);
  await page.click('#filters button[data-clear="ignore"]');
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), full);

  // from the top table too
  await waitFrame(page, 'main.fib');
  await clickFrame(page, 'main.fib', { button: 'right' });
  await page.click('#sandwich-close');
  await page.locator('#top-table tbody tr[data-fn="main.burner"]').hover();
  await page.locator('#top-table tbody tr[data-fn="main.burner"] .sw-open').click();
  await page.waitForFunction(() => document.getElementById('sandwich-fn').textContent === 'main.burner');
});

// Issue 15: a status page (flags, configuration as loaded, build info,
// storage stats), over Prometheus' status API.
test('the status page shows flags, the configuration as loaded and storage stats', { timeout: 180000 }, async (t) => {
  const flags = await apiData(profd.base, '/api/v1/status/flags');
  assert.equal(flags['storage.future-grace'], '10m');
  assert.equal(flags['storage.retention.time'], '15d');
  assert.match(flags['config.file'], /profd\.yaml$/);
  const tsdb = await apiData(profd.base, '/api/v1/status/tsdb');
  const range = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': '{__name__=~".+"}' }));
  assert.equal(tsdb.storage.series, range.length, 'series count as the series API lists them');
  await page.goto(profd.base + '/');
  await page.click('#nav-status');
  await page.waitForSelector('#status-flags tr');
  assert.equal(new URL(page.url()).pathname, '/status');
  assert.match(await page.locator('#status-flags').innerText(), /--storage\.future-grace\s+10m/);
  assert.match(await page.locator('#status-config').innerText(), /job_name: unreachable/);
  assert.match(await page.locator('#status-storage').innerText(), new RegExp(`series\\s+${range.length}`));
  assert.match(await page.locator('#status-runtime').innerText(), /reloadConfigSuccess\s+true/);
  await shot(t, '13-status');
  // a reload (SIGHUP) of a changed file shows the new text
  const cfgPath = flags['config.file'];
  fs.writeFileSync(cfgPath, fs.readFileSync(cfgPath, 'utf8').replace('job_name: unreachable', 'job_name: unreachable2'));
  profd.child.kill('SIGHUP');
  await waitFor('the reloaded configuration', async () => /unreachable2/.test((await apiData(profd.base, '/api/v1/status/config')).yaml), 15000, 200);
  await page.click('#status-refresh');
  await page.waitForFunction(() => /unreachable2/.test(document.getElementById('status-config').textContent));
  // a reload that fails keeps the loaded text and says so
  fs.writeFileSync(cfgPath, 'scrape_configs: [ this is not valid');
  profd.child.kill('SIGHUP');
  await waitFor('the failed reload', async () => (await apiData(profd.base, '/api/v1/status/runtimeinfo')).reloadConfigSuccess === false, 15000, 200);
  assert.match((await apiData(profd.base, '/api/v1/status/config')).yaml, /unreachable2/);
});

// Issue 15: autocomplete ignored the current profile type (and range): the
// values of service offered for cpu are those of cpu series only (the heap
// series of later tests have services palette and explore).
test('autocomplete is scoped to the profile type typed so far', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/');
  const input = page.locator('#selector');
  await input.click();
  await input.fill('');
  await input.pressSequentially('heap{service="');
  await page.waitForSelector('#suggest:not([hidden]) li:has-text("palette")');
  await input.fill('');
  await input.pressSequentially('cpu{service="');
  await page.waitForSelector('#suggest:not([hidden]) li');
  await page.waitForFunction(() => ![...document.querySelectorAll('#suggest li')].some((li) => /palette/.test(li.textContent)));
  const items = await page.locator('#suggest li').evaluateAll((els) => els.map((e) => e.firstChild.textContent));
  assert.deepEqual(items, ['uitest']);
  // label names too: pod is a label of heap{service="explore"} only
  await input.fill('');
  await input.pressSequentially('heap{service="explore", ');
  await page.waitForSelector('#suggest:not([hidden]) li:has-text("pod")');
  await input.fill('');
  await input.pressSequentially('cpu{');
  await page.waitForSelector('#suggest:not([hidden]) li');
  assert.ok(!(await page.locator('#suggest li').allInnerTexts()).some((x) => /^pod/.test(x)), 'cpu series have no pod label');
  await page.keyboard.press('Escape');
});

// Issue 15 "a profile type picker showing each type's sample types with
// units": the picker lists what /api/v1/profile_types says, and picking a
// type replaces the selector's name, its matchers kept.
test('profile type picker: each type with its sample types and units; picking one keeps the matchers', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}' }));
  await waitPoints(page);
  const api = await apiData(profd.base, '/api/v1/profile_types');
  const heap = api.find((x) => x.name === 'heap');
  assert.ok(heap && heap.sample_types.length === 4, JSON.stringify(api));
  await page.waitForFunction(() => document.querySelectorAll('#profile-type option').length > 2);
  assert.equal(await page.locator('#profile-type').inputValue(), 'heap');
  const label = await page.locator('#profile-type option[value="heap"]').innerText();
  for (const st of heap.sample_types) assert.ok(label.includes(`${st.type} (${st.unit})`), `"${label}" names ${st.type} (${st.unit})`);
  const cpu = api.find((x) => x.name === 'cpu');
  assert.ok(cpu, 'a cpu type is stored');
  assert.match(await page.locator('#profile-type option[value="cpu"]').innerText(), /cpu \(nanoseconds\)/);
  await page.selectOption('#profile-type', 'cpu');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('query') === 'cpu{service="uitest"}');
  assert.equal(await page.locator('#selector').inputValue(), 'cpu{service="uitest"}');
  await waitPoints(page);
  await shot(t, '23-type-picker');
});

// Issue 15 "reload loses flame zoom, search ...; icicle only": the zoom path
// and the search are in the URL and come back on reload; breadcrumbs lead
// back; a flame (root at the bottom) toggle; a colour-blind diff palette.
test('flame graph zoom and search survive a reload; breadcrumbs; flame/icicle toggle', { timeout: 180000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await waitFrame(page, 'main.fib');
  await clickFrame(page, 'main.burner');
  await page.waitForSelector('#flame-crumbs a');
  await page.fill('#flame-search', 'fib');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('search') === 'fib');
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('zoom'), 'main.burner');
  await page.reload();
  await waitFrame(page, 'main.fib');
  await page.waitForSelector('#flame-reset:not([hidden])');
  assert.equal(await zoomName(page), 'main.burner', 'the zoom is back');
  assert.equal(await page.locator('#flame-search').inputValue(), 'fib');
  await waitMatches(page);
  assert.match(await page.locator('#flame-crumbs').innerText(), /all › main\.burner/);
  await page.click('#flame-crumbs a[data-depth="0"]');
  await page.waitForSelector('#flame-reset', { state: 'hidden' });
  assert.equal(new URL(page.url()).searchParams.get('zoom'), null);
  // flame: the root row at the bottom
  const rootTop = async () => page.evaluate(() => document.getElementById('flamegraph').flame.rects.find((r) => r.name === 'root').y);
  assert.equal(await rootTop(), 0);
  await page.click('#flame-up');
  const maxTop = await page.evaluate(() => Math.max(...document.getElementById('flamegraph').flame.rects.map((r) => r.y)));
  assert.ok(maxTop > 0);
  assert.equal(await rootTop(), maxTop, 'the root is the lowest row');
  assert.equal(new URL(page.url()).searchParams.get('flame'), 'up');
  await shot(t, '14-flame-up');
  await page.click('#flame-up');
  assert.equal(await rootTop(), 0);
});

// Issue 15 "mouse only": a keyboard-only walk — open a profile from the
// timeline, search, zoom, open the sandwich view, back.
test('keyboard-only walk: open a profile, search, zoom, sandwich, back', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}' }));
  await waitPoints(page);
  await page.focus('#timeline'); // as Tab would
  await page.keyboard.press('ArrowRight');
  assert.match(await page.locator('#timeline-live').innerText(), /point 1 of 4/);
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Enter');
  await page.waitForFunction((ts) => new URL(location.href).searchParams.get('t') === String(ts), cpuTimes[1]);
  await waitFrame(page, 'main.fib');
  await page.focus('#flamegraph');
  await page.keyboard.press('/');
  await page.keyboard.type('fib');
  await waitMatches(page);
  await page.keyboard.press('Escape');
  await page.focus('#flamegraph');
  await page.keyboard.press('ArrowDown'); // the first callee of the root
  let name = '';
  for (let i = 0; i < 6 && name !== 'main.burner'; i++) {
    name = await kbdName(page);
    if (name !== 'main.burner') await page.keyboard.press('ArrowRight');
  }
  assert.equal(name, 'main.burner');
  assert.match(await page.locator('#flame-live').innerText(), /main\.burner/);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#flame-reset:not([hidden])');
  assert.equal(await zoomName(page), 'main.burner');
  await page.keyboard.press('ArrowDown');
  assert.equal(await kbdName(page), 'main.fib');
  await page.keyboard.press('s');
  await page.waitForSelector('#sandwich:not([hidden])');
  assert.equal(await page.locator('#sandwich-fn').innerText(), 'main.fib');
  await page.focus('#flamegraph');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#flame-reset', { state: 'hidden' });
  await shot(t, '15-keyboard');
});

// Issue 15 "the timeline cannot zoom or pan (drag only merges)": Alt+drag
// zooms the window (pinned in the URL), − zooms out, ◀ ▶ pan.
test('timeline zoom (Alt+drag) and pan', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}' }));
  await waitPoints(page);
  assert.equal(await pointCount(page), N_HEAP);
  const p1 = await pointXY(1), p3 = await pointXY(3);
  const box = await page.locator('#timeline svg').boundingBox();
  const y = box.y + box.height - 40;
  await page.keyboard.down('Alt');
  await page.mouse.move(p1.x - 5, y);
  await page.mouse.down();
  await page.mouse.move(p3.x + 5, y, { steps: 6 });
  await page.mouse.up();
  await page.keyboard.up('Alt');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('from'));
  const u = new URL(page.url());
  const from = Date.parse(u.searchParams.get('from')), to = Date.parse(u.searchParams.get('to'));
  assert.ok(from > heapTimes[0] && from <= heapTimes[1] && to >= heapTimes[3] && to < heapTimes[4], `zoomed to ${u.searchParams.get('from')} – ${u.searchParams.get('to')}`);
  await waitPoints(page, 3);
  assert.equal(new URL(page.url()).searchParams.get('sel'), null, 'a zoom is not a merge');
  await page.click('#zoom-out');
  await page.waitForFunction((f) => Date.parse(new URL(location.href).searchParams.get('from')) < f, from);
  const u2 = new URL(page.url());
  assert.ok(Math.abs((Date.parse(u2.searchParams.get('to')) - Date.parse(u2.searchParams.get('from'))) - 2 * (to - from)) <= 2, 'twice the window');
  await page.click('#pan-left');
  await page.waitForFunction((f) => Date.parse(new URL(location.href).searchParams.get('to')) < f, Date.parse(u2.searchParams.get('to')));
  await shot(t, '16-zoom');
});

// Issue 15 "no calendar, no time zone shown (local/UTC toggle)": the picker
// takes an absolute window in the zone shown; the zone switch rewrites every
// time (the picker's fields, the axis) without moving the window, and the
// choice is in the URL. The browser runs in Asia/Kolkata (UTC+05:30) so that
// local and UTC differ.
test('calendar picker: an absolute window in local time or UTC', { timeout: 180000 }, async (t) => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Asia/Kolkata' });
  const p = await ctx.newPage();
  const errs = [];
  p.on('pageerror', (e) => errs.push(e.message));
  try {
    await p.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}' }));
    await waitPoints(p);
    assert.match(await p.locator('#tz').innerText(), /Asia\/(Kolkata|Calcutta).*UTC\+05:30/);
    await p.click('#pick-window');
    await p.waitForSelector('#window-picker:not([hidden])');
    assert.equal(await p.locator('#pick-window').getAttribute('aria-expanded'), 'true');
    assert.match(await p.locator("#pick-zone").innerText(), /Asia\/(Kolkata|Calcutta)/);
    // Kolkata wall-clock text of an instant, as a person would type it
    // (Chrome writes a datetime-local value without ":00" seconds: typed and read so)
    const ist = (ms) => new Date(ms + 5.5 * 3600e3).toISOString().slice(0, 19).replace(/:00$/, '');
    const utc = (ms) => new Date(ms).toISOString().slice(0, 19).replace(/:00$/, '');
    const f = heapTimes[1] - 10000, to = heapTimes[3] + 10000;
    // To before From is refused with a message, nothing changes
    await p.fill('#pick-from', ist(to));
    await p.fill('#pick-to', ist(f));
    await p.click('#pick-apply');
    assert.match(await p.locator('#pick-error').innerText(), /To must be after From/);
    assert.equal(new URL(p.url()).searchParams.get('from'), null);
    await p.fill('#pick-from', ist(f));
    await p.fill('#pick-to', ist(to));
    await p.click('#pick-apply');
    await p.waitForFunction(() => new URL(location.href).searchParams.get('from'));
    const u = new URL(p.url());
    assert.equal(Date.parse(u.searchParams.get('from')), f, 'from = the instant typed in local time');
    assert.equal(Date.parse(u.searchParams.get('to')), to);
    await waitPoints(p, 3);
    assert.ok(await p.locator('#window-picker').isHidden());
    assert.ok(await p.locator('#back-to-now').isVisible());
    const ticks = async () => (await axisLabels(p)).x.filter((x) => /\d\d:\d\d/.test(x));
    const ticksLocal = await ticks();
    assert.ok(ticksLocal.length > 0, 'time ticks');
    // UTC: same window, other wall-clock text
    await p.click('#tz');
    await p.waitForFunction(() => new URL(location.href).searchParams.get('tz') === 'utc');
    assert.equal(await p.locator('#tz').getAttribute('aria-pressed'), 'true');
    assert.match(await p.locator('#tz').innerText(), /UTC/);
    assert.equal(Date.parse(new URL(p.url()).searchParams.get('from')), f, 'the window did not move');
    const ticksUTC = await ticks();
    assert.notDeepEqual(ticksUTC, ticksLocal, 'the axis is rewritten');
    await p.click('#pick-window');
    assert.equal(await p.inputValue('#pick-from'), utc(f), 'the picker shows the window in UTC');
    assert.equal(await p.inputValue('#pick-to'), utc(to));
    assert.match(await p.locator('#pick-zone').innerText(), /UTC/);
    await p.screenshot({ path: path.join(shots, '17-calendar.png'), fullPage: true });
    t.diagnostic(`screenshot: ${path.join(shots, '17-calendar.png')}`);
    // typed in UTC now: a window one minute wider at each end
    await p.fill('#pick-from', utc(f - 60000));
    await p.fill('#pick-to', utc(to + 60000));
    await p.keyboard.press('Tab');
    await p.click('#pick-apply');
    await p.waitForFunction((v) => Date.parse(new URL(location.href).searchParams.get('from')) === v, f - 60000);
    // reload: UTC and the window come back
    await p.reload();
    await waitPoints(p);
    assert.equal(await p.locator('#tz').getAttribute('aria-pressed'), 'true');
    assert.equal(await pointCount(p), 5, 'the window typed in UTC holds 5 points');
    // toggling the picker's zone while it is open keeps the instants
    await p.click('#pick-window');
    await p.click('#tz');
    assert.equal(await p.inputValue('#pick-from'), ist(f - 60000), 'the same instant in Kolkata time');
    await p.keyboard.press('Escape');
    assert.deepEqual(errs, []);
  } finally {
    await ctx.close();
  }
});

// Issue 15 "State: everything in the URL (… sort, aggregation, view); back/
// forward work; reload restores the same view": the top table's column,
// direction, filter and "show all", the call graph tab and the aggregation
// (sum or average of the merged profiles) are in the URL and come back; Back
// and Forward walk the views chosen.
test('state in the URL: sort, filter, show all, call graph tab, aggregation; back and forward', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}' }));
  await waitPoints(page);
  const start = page.url();
  await dragPoints(1, 3);
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  await waitFrame(page);
  const merged = page.url();
  assert.notEqual(merged, start);
  // averaged: the API's agg=avg total
  await page.selectOption('#agg', 'avg');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('agg') === 'avg');
  const avg = await apiData(profd.base, '/api/v1/query?' + qs({
    mode: 'merge', query: 'heap{service="uitest"}', from: String(heapTimes[1] / 1000), to: String(heapTimes[3] / 1000),
    report: 'top', sample_index: 'inuse_space', agg: 'avg', limit: '1',
  }));
  const sum = await rangeTotal(heapTimes[1], heapTimes[3]);
  assert.ok(avg.total < sum.sum, `the average (${avg.total}) is less than the sum (${sum.sum})`);
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), avg.total);
  assert.match(await page.locator('#pprof-cmd').innerText(), /agg=avg/, 'the pprof command gets the same average');
  // cum ascending, a name filter, every row
  await page.click('#top-table th[data-key="cum"]');
  await page.click('#top-table th[data-key="cum"]');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('order') === 'asc');
  await page.fill('#top-filter', 'runtime');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('tfilter') === 'runtime');
  await page.waitForFunction(() => [...document.querySelectorAll('#top-table tbody tr[data-fn]')].every((r) => /runtime/.test(r.getAttribute('data-fn'))));
  await page.click('#view-callgraph');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('view') === 'callgraph');
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('sort'), 'cum');
  // reload: the same view
  const rowsBefore = await page.locator('#top-table tbody tr[data-fn]').evaluateAll((els) => els.map((e) => e.getAttribute('data-fn')));
  await page.reload();
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  await page.waitForFunction(() => { const i = document.querySelector('#callgraph img'); return i && i.complete && i.naturalWidth > 0; }, null, { timeout: 120000 });
  assert.equal(await page.locator('#view-callgraph').getAttribute('aria-pressed'), 'true');
  assert.match(await page.locator('#callgraph').getAttribute('data-url'), /agg=avg/);
  assert.equal(await page.inputValue('#agg'), 'avg');
  assert.equal(await page.inputValue('#top-filter'), 'runtime');
  assert.equal(await page.locator('#top-table th[data-key="cum"]').getAttribute('aria-sort'), 'ascending');
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), avg.total);
  assert.deepEqual(await page.locator('#top-table tbody tr[data-fn]').evaluateAll((els) => els.map((e) => e.getAttribute('data-fn'))), rowsBefore);
  // the server's order: ascending cum among the matching rows
  const top = await apiData(profd.base, '/api/v1/query?' + qs({
    mode: 'merge', query: 'heap{service="uitest"}', from: String(heapTimes[1] / 1000), to: String(heapTimes[3] / 1000),
    report: 'top', sample_index: 'inuse_space', agg: 'avg', sort: 'cum', order: 'asc', filter: 'runtime', limit: '100',
  }));
  assert.deepEqual(rowsBefore, top.rows.map((r) => r.function));
  // Back: the timeline without a merge; Forward: the merge again
  await page.goBack();
  await page.waitForFunction(() => !new URL(location.href).searchParams.get('sel'));
  await page.waitForSelector('#profile-panel', { state: 'hidden' });
  await page.goForward();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('sel'));
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  assert.match(await page.locator('#selection').innerText(), /3 profiles/);
  await shot(t, '18-state');
});

// Issue 15 "Timeline: a charting library made for it … per-series lines,
// stacked/sum mode": three series with profiles at the same four times;
// stacked, the top edge is their sum at each time (the API's query_range
// totals, added here), sum mode draws that one line, a hidden series leaves
// both, and the mode is in the URL.
test('timeline stacked and sum modes add the series shown', { timeout: 180000 }, async (t) => {
  const t0 = Math.floor((Date.now() - 20 * 60e3) / 60000) * 60000;
  for (let k = 0; k < 3; k++) {
    for (let i = 0; i < 4; i++) {
      const body = fs.readFileSync(path.join(SERIES_DIR, `heap-${String(1 + ((i + 2 * k) % N_HEAP)).padStart(4, '0')}.pb.gz`));
      const r = await http(`${profd.base}/api/0/profiles?` + qs({
        service: 'stack', type: 'heap', instance_id: `s-${k}`, created_at: new Date(t0 + i * 60000).toISOString().replace(/\.\d+Z$/, 'Z'),
      }), { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } });
      assert.ok(r.status >= 200 && r.status < 300, r.text);
    }
  }
  const range = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'heap{service="stack"}', from: String(t0 / 1000 - 60), to: String(t0 / 1000 + 300) }));
  assert.equal(range.length, 3);
  const sumAt = (skip) => [0, 1, 2, 3].map((i) => range.reduce((a, s) => {
    if (skip && s.labels.instance_id === skip) return a;
    const x = s.sample_types.findIndex((st) => st.type === 'inuse_space');
    return a + s.totals[s.timestamps.indexOf(t0 + i * 60000)][x];
  }, 0));
  // agg=sum: the bucket's merge is the sum of the series shown (a gauge merges as avg by default)
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="stack"}', agg: 'sum' }));
  await waitPoints(page, 12);
  await page.selectOption('#chart-mode', 'stacked');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('chart') === 'stacked');
  const top = () => page.evaluate(() => { const c = document.getElementById('timeline').timeline; return c.stack[c.stack.length - 1].filter((v) => v !== null); });
  const near = (a, b) => a.length === b.length && a.every((v, i) => Math.abs(v - b[i]) < 1e-6 * Math.max(1, b[i]));
  const want = sumAt(null);
  assert.ok(near(await top(), want), `stack top ${await top()} = sums ${want}`);
  assert.equal(await pointCount(page), 0, 'no per-profile points when stacked');
  await shot(t, '19-stacked');
  // the tooltip names the bucket's sum
  const box = await page.locator('#timeline svg').boundingBox();
  const c = await page.evaluate((ts) => { const m = document.getElementById('timeline').timeline; return m.ctx.x(ts); }, t0 + 60000);
  await page.mouse.move(box.x + c, box.y + box.height / 2);
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').innerText(), /over the series shown/);
  // a click merges that bucket: the three series' profiles at that time
  // (clicked in the bucket's middle: its edge may fall within a pixel of the profiles)
  const mid = await page.evaluate((ts) => {
    const m = document.getElementById('timeline').timeline, bm = m.buckets, k = Math.floor((ts - bm.starts[0]) / bm.step);
    return m.ctx.x(bm.starts[k] + bm.step / 2);
  }, t0 + 60000);
  await page.mouse.click(box.x + mid, box.y + box.height / 2);
  await page.waitForFunction((v) => new URL(location.href).searchParams.get('sel') === v, `${t0 + 60000}-${t0 + 60000}`);
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
  assert.match(await page.locator('#selection').innerText(), /3 profiles/);
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), want[1]);
  // reload keeps the mode
  await page.reload();
  await page.waitForFunction(() => { const c = document.getElementById('timeline').timeline; return c && c.mode === 'stacked' && c.stack; });
  assert.equal(await page.inputValue('#chart-mode'), 'stacked');
  // a hidden series leaves the stack
  await page.locator('#legend li[data-key*="s-1"]').click();
  await page.waitForFunction(() => document.getElementById('timeline').timeline.stack.length === 2);
  assert.ok(near(await top(), sumAt('s-1')), 'the stack without the hidden series');
  // sum: one line, the same values
  await page.selectOption('#chart-mode', 'sum');
  await page.waitForFunction(() => document.getElementById('timeline').timeline.mode === 'sum');
  assert.ok(near(await top(), sumAt('s-1')), 'the sum line');
  await page.selectOption('#chart-mode', 'lines');
  await waitPoints(page, 8);
  assert.equal(new URL(page.url()).searchParams.get('chart'), null);
});

// Issue 15 "colour by package with a legend": the packages drawn widest, each
// with the colour its frames are painted in (read back from the canvas); a
// click highlights that package's functions.
test('flame graph colour legend by package', { timeout: 180000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await waitFrame(page, 'main.fib');
  await page.waitForSelector('#flame-pkgs:not([hidden]) button[data-pkg="main"]');
  const pkgs = await page.locator('#flame-pkgs button[data-pkg]').evaluateAll((els) => els.map((e) => [e.getAttribute('data-pkg'), getComputedStyle(e.querySelector('.sw')).backgroundColor]));
  assert.ok(pkgs.length >= 2, JSON.stringify(pkgs));
  assert.ok(pkgs.some(([p]) => p === 'runtime'), 'runtime is among the widest packages');
  for (const [pkg, css] of pkgs.slice(0, 3)) {
    // a frame of that package, at least 3 px wide: its painted pixel is the swatch's colour
    const i = await page.evaluate((p) => document.getElementById('flamegraph').flame.rects.findIndex((r) => r.node && r.w >= 3 && r.kind !== 'ancestor' &&
      (r.name === p || r.name.startsWith(p + '.'))), pkg);
    assert.ok(i >= 0, `a frame of ${pkg}`);
    const px = await pixelAt(page, i);
    const want = css.match(/\d+/g).map(Number);
    assert.ok(px.every((v, k) => Math.abs(v - want[k]) <= 2), `${pkg}: painted ${px} vs legend ${want}`);
  }
  await page.click('#flame-pkgs button[data-pkg="main"]');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('search') === '^main\\.');
  await waitMatches(page);
  const names = await page.evaluate(() => document.getElementById('flamegraph').flame.rects.filter((r) => r.match).map((r) => r.name));
  assert.ok(names.length > 0 && names.every((n) => n.startsWith('main.')), names.join());
  await shot(t, '20-packages');
});

// Issue 15 "WCAG AA contrast in light and dark": every visible text of the
// profiles view (timeline, legend, profile panel, flame graph head, top
// table), the targets and the status page, in the light and the dark scheme.
test('WCAG AA contrast of every text, light and dark', { timeout: 180000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  const pages = [['/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }), '#top-table tbody tr[data-fn]'],
    ['/targets', '#targets > *'], ['/status', '#status-flags tr']];
  const all = [];
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [u, sel] of pages) {
      await page.goto(profd.base + u);
      await page.waitForSelector(sel);
      await page.waitForFunction(() => !document.querySelector('.loading'));
      const f = await page.evaluate(`(${contrastFailures.toString()})()`);
      for (const x of f) all.push(`${scheme} ${u.slice(0, 10)}: "${x.text}" ${x.sel} ${x.fg} on ${x.bg}: ${x.ratio} < ${x.need}`);
    }
    if (scheme === 'dark') await shot(t, '21-dark');
  }
  await page.emulateMedia({ colorScheme: 'light' });
  assert.deepEqual(all, [], all.join('\n'));
});

// Issue 15 "a drag over mixed profile types fails with a banner far from the
// empty panel": a selector matching heap and cpu series; the timeline draws
// the chosen sample type's series, and a drag merges exactly those (the
// others are left out, as they are not drawn). An error of the view is said
// inside the profile panel, with nothing of an older view beside it.
test('a drag over mixed profile types merges the type shown; view errors stay in the panel', { timeout: 180000 }, async (t) => {
  const sent = [];
  const onReq = (r) => { if (/mode=merge/.test(r.url())) sent.push(decodeURIComponent(r.url())); };
  page.on('request', onReq);
  try {
    await page.goto(profd.base + '/?' + qs({ query: '{service="uitest"}', type: 'inuse_space', agg: 'sum' }));
    await waitPoints(page, N_HEAP);
    await dragPoints(0, N_HEAP - 1);
    await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden])');
    await waitFrame(page);
    const exp = await rangeTotal(heapTimes[0], heapTimes[N_HEAP - 1]);
    await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), exp.sum);
    assert.ok(await page.locator('#error').isHidden(), 'no error banner');
    assert.ok(await page.locator('#profile-error').isHidden());
    assert.match(await page.locator('#selection').innerText(), new RegExp(N_HEAP + ' profiles'));
    assert.ok(sent.some((u) => /exclude=\{__name__="cpu"/.test(u)), 'the cpu series is left out: ' + sent.join('\n'));
    // reload: the same merge (the series left out are known once the timeline is in)
    await page.reload();
    await waitFrame(page);
    await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), exp.sum);
  } finally {
    page.off('request', onReq);
  }
  // a bad focus regexp in the link: the API's 400, said in the panel
  const u = new URL(page.url());
  u.searchParams.set('focus', 'main.(fib');
  await page.goto(u.toString());
  await page.waitForSelector('#profile-error:not([hidden])');
  assert.match(await page.locator('#profile-error').innerText(), /failed: .*focus/i);
  assert.ok(await page.locator('#error').isHidden(), 'not in the banner at the top');
  assert.equal(await page.evaluate(() => document.getElementById('flamegraph').flame.rects.length), 0, 'no flame graph of an older view');
  assert.equal(await page.locator('#top-table tbody tr').count(), 0, 'no table of an older view');
  await shot(t, '22-view-error');
});
