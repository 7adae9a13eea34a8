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
  assert.equal(await input.inputValue(), 'heap{service="');
  // After name=" the values of that label are offered.
  await page.waitForSelector('#suggest:not([hidden]) li:has-text("uitest")');
  await page.keyboard.press('Tab');
  assert.equal(await input.inputValue(), 'heap{service="uitest"');
  await input.pressSequentially('}');
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

test('the CPU series shows time units', { timeout: 30000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'cpu{service="uitest"}' }));
  await page.waitForSelector('#timeline circle.pt');
  assert.equal(await page.locator('#timeline circle.pt').count(), N_CPU);
  assert.equal(await page.locator('#sample-type').inputValue(), 'cpu');
  await page.locator('#timeline circle.pt').last().click();
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  assert.match(await page.locator('#top-table tbody tr').first().innerText(), /\d(ms|s|µs)\b/);
  await shot(t, '5-cpu');
});

test('the targets page shows health per job and profile type', { timeout: 30000 }, async (t) => {
  await page.click('#nav-targets');
  assert.equal(new URL(page.url()).pathname, '/targets');
  await page.waitForSelector('.job[data-job="unreachable"]');
  // The page refreshes itself; the first scrape fails within a few seconds.
  await page.waitForSelector('.job[data-job="unreachable"] tr[data-health="down"] .badge.down', { timeout: 20000 });
  assert.match(await page.locator('.job[data-job="unreachable"] td.err').first().innerText(), /\S/, 'the error is shown');
  await shot(t, '6-targets');
  // A reload of /targets is served the page too.
  await page.reload();
  await page.waitForSelector('.job[data-job="unreachable"]');
  assert.deepEqual(pageErrors, [], 'no JavaScript errors');
});
