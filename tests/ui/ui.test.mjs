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
    timeout: 30000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(15000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP && !process.env.PD_UI_SHOTS) fs.rmSync(dir, { recursive: true, force: true });
});

test('the page loads from the binary and lists the stored profile types', { timeout: 30000 }, async (t) => {
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
  await shot(t, '1-start');
});

test('the selector box suggests label names and values', { timeout: 30000 }, async (t) => {
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

test('a query draws one point per stored profile', { timeout: 30000 }, async (t) => {
  await page.click('#run');
  await page.waitForSelector('#timeline circle.pt');
  assert.equal(await page.locator('#timeline circle.pt').count(), N_HEAP);
  const ts = await page.locator('#timeline circle.pt').evaluateAll((els) => els.map((e) => +e.getAttribute('data-ts')));
  assert.deepEqual(ts, heapTimes, 'points at the pushed created_at times');
  // Heap's default sample type (Go puts it last) is chosen, with its unit.
  assert.equal(await page.locator('#sample-type').inputValue(), 'inuse_space');
  assert.match(await page.locator('#legend').innerText(), /service="uitest"/);
  assert.match(await page.locator('#timeline svg').innerHTML(), /[KM]iB/, 'y axis in bytes units');
  // The state is in the URL.
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('query'), 'heap{service="uitest"}');
  await shot(t, '3-timeline');

  // Another sample type redraws the same points with other values.
  const ys = async () => page.locator('#timeline circle.pt').evaluateAll((els) => els.map((e) => e.getAttribute('cy')).join());
  const y1 = await ys();
  await page.selectOption('#sample-type', 'alloc_objects');
  await page.waitForFunction((prev) => [...document.querySelectorAll('#timeline circle.pt')].map((e) => e.getAttribute('cy')).join() !== prev, y1);
  assert.equal(await page.locator('#timeline circle.pt').count(), N_HEAP);
  await page.selectOption('#sample-type', 'inuse_space');
});

test('a click on a point shows its flame graph and top table', { timeout: 40000 }, async (t) => {
  const i = N_HEAP - 2;
  const when = heapTimes[i];
  await page.locator(`#timeline circle.pt[data-ts="${when}"]`).click();
  await page.waitForSelector('#flamegraph .frame');
  await page.waitForSelector('#top-table tbody tr[data-fn]');

  // What the API says this profile's top functions are (not hard-coded).
  const top = await apiData(profd.base, '/api/v1/query?' + qs({
    query: '{__name__="heap", instance_id="ui-1", service="uitest", zone="eu-1"}', time: String(when / 1000),
    report: 'top', sample_index: 'inuse_space',
  }));
  assert.ok(top.rows.length > 0, 'the API top has rows');
  const expected = top.rows[0].function;
  const frame = page.locator('#flamegraph .frame').filter({ hasText: new RegExp('^' + expected.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$') });
  assert.ok(await frame.count() >= 1, `the flame graph has a frame "${expected}"`);
  assert.equal((await frame.first().textContent()).trim(), expected);

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
  await frame.first().hover();
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').innerText(), /% of total/);
  await shot(t, '4-profile');

  // Click to zoom: the clicked frame becomes full width.
  await frame.first().click();
  await page.waitForSelector('#flame-reset:not([hidden])');
  const zoomed = page.locator('#flamegraph .frame:not(.ancestor)').first();
  assert.equal(await zoomed.getAttribute('data-name'), expected);
  assert.equal(parseFloat(await zoomed.evaluate((e) => e.style.width)), 100);
  await page.click('#flame-reset');

  // The URL opens the same profile again (shareable).
  const url = page.url();
  assert.match(url, /series=.*&t=\d+/);
  await page.goto(url);
  await page.waitForSelector('#flamegraph .frame');
  assert.ok(await page.locator('#flamegraph .frame').filter({ hasText: expected }).count() >= 1, 'reloaded URL shows the profile');
});

// Issue 15 "the table and the flame graph each run their own merge": a view
// is one request (report=view) and so one merge on the server.
test('a merged view is one request and one merge', { timeout: 40000 }, async (t) => {
  const urls = [];
  const onReq = (r) => { if (r.url().includes('/api/v1/query?')) urls.push(r.url()); };
  page.on('request', onReq);
  try {
    await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', sel: `${heapTimes[1]}-${heapTimes[3]}` }));
    await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden]) #flamegraph .frame');
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
test('the top table is sorted and filtered by the server', { timeout: 40000 }, async (t) => {
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
  const b = await page.locator(`#timeline circle.pt[data-ts="${heapTimes[i]}"]`).boundingBox();
  return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
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

test('a drag on the timeline shows the merged flame graph and top table of the range', { timeout: 40000 }, async (t) => {
  // Merge: sum (inuse_space is a gauge, merged as avg by default: issue 12,
  // tests/ui/cumulative.test.mjs), so the totals add up to the points'
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', agg: 'sum' }));
  await page.waitForSelector('#timeline circle.pt');
  assert.equal(await page.locator('#sample-type').inputValue(), 'inuse_space');
  await dragPoints(1, 3);
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden]) #flamegraph .frame');
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
  await page.waitForSelector('#profile-panel[data-kind="merge"] #flamegraph .frame');
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
    await later.waitForSelector('#timeline circle.pt');
    assert.equal(await later.locator('#timeline circle.pt').count(), N_HEAP, 'every point of the window, a day later');
    await later.waitForSelector('#profile-panel[data-kind="merge"] #flamegraph .frame');
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
    await later.waitForFunction(() => document.querySelectorAll('#timeline circle.pt').length === 0);
  } finally {
    await later.close();
  }
});

test('shift-click on two points merges the range between them', { timeout: 30000 }, async (t) => {
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

test('compare mode shows the diff of two ranges: red and green frames, base/new/delta columns', { timeout: 40000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}', agg: 'sum' })); // sums, as the API's diff below
  await page.waitForSelector('#timeline circle.pt');
  await page.click('#compare');
  assert.equal(await page.locator('#compare').getAttribute('aria-pressed'), 'true');
  await dragPoints(0, 2); // A: three profiles
  await page.waitForSelector('#timeline rect.sel-a');
  await dragPoints(4, 5); // B: two profiles
  await page.waitForSelector('#timeline rect.sel-b');
  await page.waitForSelector('#profile-panel[data-kind="diff"] #flamegraph .frame');
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
  const red = page.locator('#flamegraph .frame.grew'), green = page.locator('#flamegraph .frame.shrank');
  assert.ok(await red.count() > 0, 'red frames');
  assert.ok(await green.count() > 0, 'green frames');
  const rgb = async (loc) => (await loc.first().evaluate((e) => getComputedStyle(e).backgroundColor)).match(/\d+/g).map(Number);
  const [rr, rg] = await rgb(red), [gr, gg] = await rgb(green);
  assert.ok(rr > rg, `grown frame is red (${rr},${rg})`);
  assert.ok(gg > gr, `shrunk frame is green (${gr},${gg})`);
  for (const el of await red.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')))) assert.ok(grew.has(el), `${el} grew`);
  for (const el of await green.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')))) assert.ok(shrank.has(el), `${el} shrank`);

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
  await red.first().hover();
  await page.waitForSelector('#tooltip:not([hidden])');
  assert.match(await page.locator('#tooltip').innerText(), /A \(base\)[\s\S]*B[\s\S]*Δ \+/);
  await page.mouse.move(5, 5);
  await shot(t, '6-compare');

  // Compare off: B stays as the merged range.
  await page.click('#compare');
  await page.waitForSelector('#profile-panel[data-kind="merge"]');
  assert.equal(new URL(page.url()).searchParams.get('sel'), `${heapTimes[4]}-${heapTimes[5]}`);
});

test('the CPU series shows time units', { timeout: 30000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}' }));
  await page.waitForSelector('#timeline circle.pt');
  assert.equal(await page.locator('#timeline circle.pt').count(), N_CPU);
  assert.equal(await page.locator('#sample-type').inputValue(), 'cpu');
  await page.locator('#timeline circle.pt').last().click();
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  assert.match(await page.locator('#top-table tbody tr').first().innerText(), /\d(ms|s|µs)\b/);
  await shot(t, '7-cpu');
});

test('the targets page shows health per job and profile type', { timeout: 30000 }, async (t) => {
  await page.click('#nav-targets');
  assert.equal(new URL(page.url()).pathname, '/targets');
  await page.waitForSelector('.job[data-job="unreachable"]');
  // The page refreshes itself; the first scrape fails within a few seconds.
  await page.waitForSelector('.job[data-job="unreachable"] tr[data-health="down"] .badge.down', { timeout: 20000 });
  assert.match(await page.locator('.job[data-job="unreachable"] td.err').first().innerText(), /\S/, 'the error is shown');
  await shot(t, '8-targets');
  // A reload of /targets is served the page too.
  await page.reload();
  await page.waitForSelector('.job[data-job="unreachable"]');
  assert.deepEqual(pageErrors, [], 'no JavaScript errors');
});

// Issue 15: legend entries repeated the labels every series shares, and the
// palette repeated after 12 series.
test('the legend names only the labels that differ; 24 series get 24 colours', { timeout: 60000 }, async (t) => {
  const body = fs.readFileSync(path.join(SERIES_DIR, 'heap-0001.pb.gz'));
  for (let i = 0; i < 24; i++) {
    const r = await http(`${profd.base}/api/0/profiles?` + qs({
      service: 'palette', type: 'heap', instance_id: `p-${String(i).padStart(2, '0')}`, labels: 'zone=eu-2',
      created_at: new Date(Math.floor((Date.now() - 600000) / 1000) * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
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
  const b = await page.locator('#timeline circle.pt').first().boundingBox();
  const box = await page.locator('#timeline svg').boundingBox();
  const y = box.y + box.height - 40;
  await page.mouse.move(b.x - 30, y);
  await page.mouse.down();
  await page.mouse.move(b.x + 30, y, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('#profile-panel[data-kind="merge"]:not([hidden]) #flamegraph .frame');
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
test('underscores are visible in the selector box', { timeout: 30000 }, async (t) => {
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
test('flame graph frames are never drawn wider than their value; a bad search regexp is reported', { timeout: 40000 }, async (t) => {
  const narrow = await browser.newPage({ viewport: { width: 480, height: 900 } });
  try {
    const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
    await narrow.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
    await narrow.waitForSelector('#flamegraph .frame[data-i]');
    const r = await narrow.evaluate(() => {
      const box = document.getElementById('flamegraph');
      const W = box.clientWidth;
      let worst = 0, thin = 0, n = 0;
      for (const el of box.querySelectorAll('.frame')) {
        const model = parseFloat(el.style.width) / 100 * W;
        const drawn = el.getBoundingClientRect().width;
        if (model < 7) thin++;
        worst = Math.max(worst, drawn - model);
        n++;
      }
      return { worst, thin, n };
    });
    assert.ok(r.thin > 0, `some frames are under 7 px here (${r.n} frames): the case is exercised`);
    assert.ok(r.worst <= 0.5, `a frame is drawn ${r.worst.toFixed(2)} px wider than its value`);
    await narrow.fill('#flame-search', 'main.(fib');
    await narrow.waitForFunction(() => /not a regular expression/.test(document.getElementById('flame-match').textContent));
    assert.equal(await narrow.locator('#flame-search').getAttribute('aria-invalid'), 'true');
    await narrow.fill('#flame-search', 'main\\.fib');
    await narrow.waitForFunction(() => /^matched /.test(document.getElementById('flame-match').textContent));
    assert.ok(await narrow.locator('#flamegraph .frame.match').count() >= 1);
    await narrow.screenshot({ path: path.join(shots, '9-flame-narrow.png'), fullPage: true });
    t.diagnostic(`screenshot: ${path.join(shots, '9-flame-narrow.png')}`);
  } finally {
    await narrow.close();
  }
});

// Issue 15: no call graph tab though the API has one; mouse only.
test('keyboard: "/" searches, Esc resets; the call graph tab shows the API\'s SVG', { timeout: 40000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await page.waitForSelector('#flamegraph .frame[data-i]');
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'flame-search');
  await page.keyboard.type('fib');
  await page.waitForFunction(() => document.querySelectorAll('#flamegraph .frame.match').length > 0);
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('#flame-search').inputValue(), '');
  await page.waitForFunction(() => !document.getElementById('flamegraph').classList.contains('searching'));
  // zoom with a click, back with Esc
  await page.locator('#flamegraph .frame[data-name="main.fib"]').first().click();
  await page.waitForSelector('#flame-reset:not([hidden])');
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('Escape');
  await page.waitForSelector('#flame-reset', { state: 'hidden' });
  // the call graph
  await page.click('#view-callgraph');
  await page.waitForFunction(() => { const i = document.querySelector('#callgraph img'); return i && i.complete && i.naturalWidth > 0; }, null, { timeout: 20000 });
  assert.ok(await page.locator('#flamegraph').isHidden());
  const src = await page.locator('#callgraph img').getAttribute('src');
  assert.match(src, /report=callgraph/);
  const svg = await http(profd.base + src);
  assert.equal(svg.status, 200);
  assert.match(svg.text, /<svg/);
  assert.match(svg.text, /main\.fib/, 'the hot function is a box of the call graph');
  await shot(t, '10-callgraph');
  await page.click('#view-callgraph');
  assert.ok(await page.locator('#flamegraph').isVisible());
});

// Issue 15: no label explorer (Pyroscope's tag explorer, Parca's "sum by").
// A label with 30 values on real heap profiles: the explorer lists the label
// names with their number of values; picking one shows the 8 values with the
// largest total (the test computes which from the API) each with a small
// timeline and flame graph; a click adds the matcher to the selector.
test('label explorer: a label of 30 values broken down, a click narrows the selector', { timeout: 60000 }, async (t) => {
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
  await page.waitForSelector('#timeline circle.pt');
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
test('sandwich view: callers and callees of a function over every call site', { timeout: 40000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await page.waitForSelector('#flamegraph .frame[data-name="main.fib"]');
  const top = await apiData(profd.base, '/api/v1/query?' + qs({ query: series, time: String(cpuTimes[0] / 1000), report: 'top', limit: '0' }));
  const fib = top.rows.find((r) => r.function === 'main.fib');
  assert.ok(fib && fib.cum > 0);
  await page.locator('#flamegraph .frame[data-name="main.fib"]').first().click({ button: 'right' });
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
  await page.locator('#flamegraph .frame[data-name="main.fib"]').first().click({ button: 'right' });
  await page.click('#sandwich-ignore');
  await page.waitForFunction((v) => +document.getElementById('flamegraph').getAttribute('data-total') === v, full - fib.cum);
  await page.click('#filters button[data-clear="ignore"]');
  await page.waitForFunction((v) => document.getElementById('flamegraph').getAttribute('data-total') === String(v), full);

  // from the top table too
  await page.waitForSelector('#flamegraph .frame[data-name="main.fib"]');
  await page.locator('#flamegraph .frame[data-name="main.fib"]').first().click({ button: 'right' });
  await page.click('#sandwich-close');
  await page.locator('#top-table tbody tr[data-fn="main.burner"]').hover();
  await page.locator('#top-table tbody tr[data-fn="main.burner"] .sw-open').click();
  await page.waitForFunction(() => document.getElementById('sandwich-fn').textContent === 'main.burner');
});

// Issue 15: a status page (flags, configuration as loaded, build info,
// storage stats), over Prometheus' status API.
test('the status page shows flags, the configuration as loaded and storage stats', { timeout: 40000 }, async (t) => {
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
test('autocomplete is scoped to the profile type typed so far', { timeout: 30000 }, async (t) => {
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

// Issue 15 "reload loses flame zoom, search ...; icicle only": the zoom path
// and the search are in the URL and come back on reload; breadcrumbs lead
// back; a flame (root at the bottom) toggle; a colour-blind diff palette.
test('flame graph zoom and search survive a reload; breadcrumbs; flame/icicle toggle', { timeout: 40000 }, async (t) => {
  const series = '{__name__="cpu", instance_id="ui-1", service="uitest", zone="eu-1"}';
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}', series, t: String(cpuTimes[0]) }));
  await page.waitForSelector('#flamegraph .frame[data-name="main.fib"]');
  await page.locator('#flamegraph .frame[data-name="main.burner"]').first().click();
  await page.waitForSelector('#flame-crumbs a');
  await page.fill('#flame-search', 'fib');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('search') === 'fib');
  const u = new URL(page.url());
  assert.equal(u.searchParams.get('zoom'), 'main.burner');
  await page.reload();
  await page.waitForSelector('#flamegraph .frame[data-name="main.fib"]');
  await page.waitForSelector('#flame-reset:not([hidden])');
  assert.equal(await page.locator('#flamegraph .frame:not(.ancestor)').first().getAttribute('data-name'), 'main.burner', 'the zoom is back');
  assert.equal(await page.locator('#flame-search').inputValue(), 'fib');
  await page.waitForFunction(() => document.querySelectorAll('#flamegraph .frame.match').length > 0);
  assert.match(await page.locator('#flame-crumbs').innerText(), /all › main\.burner/);
  await page.click('#flame-crumbs a[data-depth="0"]');
  await page.waitForSelector('#flame-reset', { state: 'hidden' });
  assert.equal(new URL(page.url()).searchParams.get('zoom'), null);
  // flame: the root row at the bottom
  const rootTop = async () => page.locator('#flamegraph .frame[data-name="root"]').evaluate((e) => parseFloat(e.style.top));
  assert.equal(await rootTop(), 0);
  await page.click('#flame-up');
  const maxTop = await page.locator('#flamegraph .frame').evaluateAll((els) => Math.max(...els.map((e) => parseFloat(e.style.top))));
  assert.equal(await rootTop(), maxTop, 'the root is the lowest row');
  assert.equal(new URL(page.url()).searchParams.get('flame'), 'up');
  await shot(t, '14-flame-up');
  await page.click('#flame-up');
  assert.equal(await rootTop(), 0);
});

// Issue 15 "mouse only": a keyboard-only walk — open a profile from the
// timeline, search, zoom, open the sandwich view, back.
test('keyboard-only walk: open a profile, search, zoom, sandwich, back', { timeout: 40000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}' }));
  await page.waitForSelector('#timeline circle.pt');
  await page.focus('#timeline'); // as Tab would
  await page.keyboard.press('ArrowRight');
  assert.match(await page.locator('#timeline-live').innerText(), /point 1 of 4/);
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Enter');
  await page.waitForFunction((ts) => new URL(location.href).searchParams.get('t') === String(ts), cpuTimes[1]);
  await page.waitForSelector('#flamegraph .frame[data-name="main.fib"]');
  await page.focus('#flamegraph');
  await page.keyboard.press('/');
  await page.keyboard.type('fib');
  await page.waitForFunction(() => document.querySelectorAll('#flamegraph .frame.match').length > 0);
  await page.keyboard.press('Escape');
  await page.focus('#flamegraph');
  await page.keyboard.press('ArrowDown'); // the first callee of the root
  let name = '';
  for (let i = 0; i < 6 && name !== 'main.burner'; i++) {
    name = await page.locator('#flamegraph .frame.kbd').getAttribute('data-name');
    if (name !== 'main.burner') await page.keyboard.press('ArrowRight');
  }
  assert.equal(name, 'main.burner');
  assert.match(await page.locator('#flame-live').innerText(), /main\.burner/);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#flame-reset:not([hidden])');
  assert.equal(await page.locator('#flamegraph .frame:not(.ancestor)').first().getAttribute('data-name'), 'main.burner');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.locator('#flamegraph .frame.kbd').getAttribute('data-name'), 'main.fib');
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
test('timeline zoom (Alt+drag) and pan', { timeout: 40000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="uitest"}' }));
  await page.waitForSelector('#timeline circle.pt');
  assert.equal(await page.locator('#timeline circle.pt').count(), N_HEAP);
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
  await page.waitForFunction(() => document.querySelectorAll('#timeline circle.pt').length === 3);
  assert.equal(new URL(page.url()).searchParams.get('sel'), null, 'a zoom is not a merge');
  await page.click('#zoom-out');
  await page.waitForFunction((f) => Date.parse(new URL(location.href).searchParams.get('from')) < f, from);
  const u2 = new URL(page.url());
  assert.ok(Math.abs((Date.parse(u2.searchParams.get('to')) - Date.parse(u2.searchParams.get('from'))) - 2 * (to - from)) <= 2, 'twice the window');
  await page.click('#pan-left');
  await page.waitForFunction((f) => Date.parse(new URL(location.href).searchParams.get('to')) < f, Date.parse(u2.searchParams.get('to')));
  await shot(t, '16-zoom');
});
