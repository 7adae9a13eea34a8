// Issue 31 "The UI: comparisons people can trust, a first screen that shows
// the fleet, nothing internal on show", in Debian's chromium (headless,
// playwright-core):
//
//  - a diff of two ranges, 4 profiles against 3, where main.foo doubles and
//    main.bar is unchanged in every profile: the default view (shares of each
//    side's total) says +100% and 0%; absolute summed says +50% and -25%
//  - two selectors ({env="a"} vs {env="b"}) compared, the URL reloaded in a
//    new page: the same view; "compare with previous period"
//  - the first screen of a profd with 6 services lists all 6 with a sparkline
//    per type; one click opens a service's CPU
//  - no label starting with "__" visible anywhere; the type picker lists each
//    type once; allocs (scraped from a real Go process) opens on alloc_space
//  - a 121,871-node flame graph says "21,871 nodes trimmed (max 100,000)",
//    and the max is a setting; every panel says when it is loading; exports
//  - export as flamebearer JSON (Pyroscope's format): a merge ("single") and
//    a comparison ("double") read as Pyroscope's reader reads them, totals
//    equal to `go tool pprof -raw` of the view's pprof
//  - two selectors: the timeline draws a line per side (each equal to the
//    API's query_range of its selector, painted in its side's colour), a
//    drag on a side's line chooses that side's range; the URL reloads it
//
// The profiles are real: tests/ui/diffapp (a Go program whose heap profile
// has main.foo/bar/baz allocating known sizes, MemProfileRate 1) written by
// runtime/pprof and pushed through profefe's API, or scraped by profd from
// its net/http/pprof; tests/ui/bigflame for the large tree; the Go demo
// profiles of PD_TESTDATA for the fleet.
//
//   PROFD_BIN=build/profd PD_UI_SHOTS=shots node --test tests/ui/compare.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { TESTDATA, apiData, freePort, goEnv, http, killAll, Proc, qs, run, startProfd, tempDir, waitFor } from '../e2e/lib.mjs';
import { waitFrame } from './flamelib.mjs';
import { clickPoint, waitPoints } from './timelib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const HERE = path.dirname(new URL(import.meta.url).pathname);
const SERIES_DIR = path.join(TESTDATA, 'pprof', 'go-demo-series');
const MIN = 60000;

let dir, shots, profd, fleetd, browser, page;
const pageErrors = [];
const now = Math.floor(Date.now() / 1000) * 1000;
const aTimes = [0, 1, 2, 3].map((i) => now - 30 * MIN + i * MIN); // A: 4 profiles
const bTimes = [0, 1, 2].map((i) => now - 20 * MIN + i * MIN);    // B: 3 profiles
const bigTime = now - 10 * MIN;
let bigTree;

const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

async function push(base, file, params) {
  const r = await http(`${base}/api/0/profiles?` + qs({ instance_id: 'i-1', ...params, created_at: iso(params.created_at) }),
    { method: 'POST', body: fs.readFileSync(file), headers: { 'Content-Type': 'application/octet-stream' } });
  assert.ok(r.status >= 200 && r.status < 300, `push ${file}: HTTP ${r.status} ${r.text}`);
}

async function shot(t, name, p = page) {
  const file = path.join(shots, `31-${name}.png`);
  await p.screenshot({ path: file, fullPage: true });
  t.diagnostic(`screenshot: ${file}`);
}

// The top table's row of a function: its cells' text.
const rowCells = (p, fn) => p.evaluate((f) => {
  const tr = [...document.querySelectorAll('#top-table tbody tr')].find((x) => x.getAttribute('data-fn') === f);
  return tr ? [...tr.cells].map((c) => c.textContent.trim()) : null;
}, fn);
// Waits for a loaded diff view whose URL-state settled (no request pending).
const waitDiff = (p) => p.waitForFunction(() => {
  const panel = document.getElementById('profile-panel');
  return panel && !panel.hidden && panel.getAttribute('data-kind') === 'diff' && !panel.classList.contains('loading') &&
    document.querySelector('#top-table tbody tr[data-fn="main.foo"]');
});

before(async () => {
  dir = tempDir('profd-ui31-');
  shots = process.env.PD_UI_SHOTS || path.join(dir, 'shots');
  fs.mkdirSync(shots, { recursive: true });
  const env = goEnv(dir);
  const diffapp = path.join(dir, 'diffapp'), bigflame = path.join(dir, 'bigflame');
  let r = await run('go', ['build', '-o', diffapp, '.'], { cwd: path.join(HERE, 'diffapp'), env }, 180000);
  assert.equal(r.code, 0, `go build of tests/ui/diffapp\n${r.stdout}${r.stderr}`);
  r = await run('go', ['build', '-o', bigflame, '.'], { cwd: path.join(HERE, 'bigflame'), env }, 180000);
  assert.equal(r.code, 0, `go build of tests/ui/bigflame\n${r.stdout}${r.stderr}`);
  const A = path.join(dir, 'a.pb.gz'), B = path.join(dir, 'b.pb.gz'), BIG = path.join(dir, 'big.pb.gz');
  // A: foo 5 MiB, bar 25, baz 20; B: foo doubles (10), bar the same, baz 15 (the same total)
  for (const [file, foo, baz] of [[A, 5, 20], [B, 10, 15]]) {
    r = await run(diffapp, ['-foo', String(foo), '-bar', '25', '-baz', String(baz), '-heap', file], {}, 60000);
    assert.equal(r.code, 0, r.stderr);
  }
  r = await run(bigflame, ['-n', '50000', '-o', BIG], {}, 120000);
  assert.equal(r.code, 0, r.stderr);

  // a real Go process for profd to scrape: its allocs (default_sample_type alloc_space) and heap
  const port = await freePort();
  new Proc('diffapp', diffapp, ['-listen', `127.0.0.1:${port}`]);
  const config = path.join(dir, 'profd.yaml');
  fs.writeFileSync(config, `scrape_configs:\n  - job_name: allocsvc\n    scrape_interval: 1s\n    scrape_timeout: 1s\n` +
    `    static_configs:\n      - targets: ["127.0.0.1:${port}"]\n    profiling_config:\n      pprof_config:\n` +
    ['block', 'goroutine', 'mutex', 'threadcreate', 'cpu'].map((t) => `        ${t}: {enabled: false}\n`).join(''));
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
  for (const t of aTimes) await push(profd.base, A, { service: 'diffsvc', type: 'heap', created_at: t });
  for (const t of bTimes) await push(profd.base, B, { service: 'diffsvc', type: 'heap', created_at: t });
  for (const [i, t] of aTimes.slice(0, 2).entries()) await push(profd.base, A, { service: 'envsvc', type: 'heap', labels: 'env=a', instance_id: 'a-' + i, created_at: t });
  for (const [i, t] of aTimes.slice(0, 2).entries()) await push(profd.base, B, { service: 'envsvc', type: 'heap', labels: 'env=b', instance_id: 'b-' + i, created_at: t });
  // two label sets apart in time, for the timeline of two selectors: env=a at A's 4 times, env=b at B's 3
  for (const [i, t] of aTimes.entries()) await push(profd.base, A, { service: 'twosvc', type: 'heap', labels: 'env=a', instance_id: 'ta-' + (i % 2), created_at: t });
  for (const [i, t] of bTimes.entries()) await push(profd.base, B, { service: 'twosvc', type: 'heap', labels: 'env=b', instance_id: 'tb-' + (i % 2), created_at: t });
  await push(profd.base, BIG, { service: 'bigsvc', type: 'heap', created_at: bigTime });
  bigTree = await apiData(profd.base, '/api/v1/query?' + qs({ query: 'heap{service="bigsvc"}', time: String(bigTime / 1000), report: 'flamegraph', nodes: '100000', sample_index: 'inuse_space' }));
  await waitFor('two scrapes of allocs', async () => {
    const d = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'allocs{job="allocsvc"}', from: String((now - 3600e3) / 1000), to: String(Date.now() / 1000 + 60) }));
    return d.length && d[0].timestamps.length >= 2;
  }, 120000);

  // the fleet: a second profd with 6 services, each with cpu and heap profiles
  fleetd = await startProfd({ storage: path.join(dir, 'fleet'), name: 'fleetd' });
  for (let s = 1; s <= 6; s++) {
    for (let i = 0; i < 3; i++) {
      const t = now - (40 - i * 10 - s) * MIN;
      await push(fleetd.base, path.join(SERIES_DIR, `cpu-000${((s + i) % 9) + 1}.pb.gz`), { service: `svc-${s}`, type: 'cpu', created_at: t });
      await push(fleetd.base, path.join(SERIES_DIR, `heap-000${((s + i) % 9) + 1}.pb.gz`), { service: `svc-${s}`, type: 'heap', created_at: t + 1000 });
    }
  }

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  page.setDefaultTimeout(120000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const diffURL = (extra = {}) => '/?' + qs({
  query: 'heap{service="diffsvc"}', from: iso(now - 45 * MIN), to: iso(now - 5 * MIN), cmp: '1',
  a: aTimes[0] + '-' + aTimes[3], b: bTimes[0] + '-' + bTimes[2], ...extra,
});

test('a diff of 4 against 3 profiles shows shares by default: the doubled function +100%, the unchanged 0%', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + diffURL());
  await waitDiff(page);
  const foo = await rowCells(page, 'main.foo'), bar = await rowCells(page, 'main.bar');
  t.diagnostic(`default: foo ${foo.join(' | ')} · bar ${bar.join(' | ')}`);
  assert.equal(foo[3], '+100%', 'main.foo doubled in every profile');
  assert.equal(bar[3], '0%', 'main.bar is unchanged in every profile');
  assert.match(await page.textContent('#flame-measure'), /share of each side's total/, 'the colour scale says what it measures');
  assert.equal(await page.inputValue('#diff-norm'), '', 'share of total is the default');
  assert.match(await page.textContent('#pprof-cmd'), /-normalize/, 'the pprof command normalizes too');
  // the diff flame graph: foo grew (red), bar unchanged (grey)
  await waitFrame(page, 'main.foo');
  const kinds = await page.evaluate(() => {
    const f = document.getElementById('flamegraph').flame;
    const k = (nm) => { const r = f.rects.find((q) => q.node && q.name === nm); return r ? r.node.new / r.node.base : null; };
    return { foo: k('main.foo'), bar: k('main.bar') };
  });
  // B/A of each frame (B scaled to A's total; the runtime's own few KiB move a share by < 0.05%)
  assert.ok(Math.abs(kinds.foo - 2) < 0.001 && Math.abs(kinds.bar - 1) < 0.0005, JSON.stringify(kinds));
  // the two sides, side by side
  await page.waitForFunction(() => document.getElementById('flame-a').flame && document.getElementById('flame-a').flame.rects.some((r) => r.name === 'main.foo') &&
    document.getElementById('flame-b').flame.rects.some((r) => r.name === 'main.foo'));
  await shot(t, 'diff-shares');

  // summed, shares still compare like with like
  await page.goto(profd.base + diffURL({ agg: 'sum' }));
  await waitDiff(page);
  assert.equal((await rowCells(page, 'main.foo'))[3], '+100%');
  assert.equal((await rowCells(page, 'main.bar'))[3], '0%');

  // absolute, summed: what the sums say (4 profiles against 3), chosen in the page and kept in the URL
  await page.selectOption('#diff-norm', 'abs');
  await page.waitForFunction(() => /diff=abs/.test(location.search));
  await waitDiff(page);
  await page.waitForFunction(() => /absolute/.test(document.getElementById('flame-measure').textContent));
  await page.waitForFunction(() => { const tr = document.querySelector('#top-table tbody tr[data-fn="main.bar"]'); return tr && tr.cells[3].textContent.trim() === '-25%'; });
  assert.equal((await rowCells(page, 'main.foo'))[3], '+50%');
  await shot(t, 'diff-absolute');
  await page.reload();
  await waitDiff(page);
  assert.equal(await page.inputValue('#diff-norm'), 'abs', 'absolute is read back from the URL');
  assert.equal((await rowCells(page, 'main.bar'))[3], '-25%');
});

test('two selectors compared ({env="a"} vs {env="b"}), reloaded from the copied URL: the same view', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="envsvc"}' }));
  await waitPoints(page, 4);
  await page.click('#compare');
  await page.waitForSelector('#cmp-bar:not([hidden])');
  await page.fill('#cmp-qa', 'heap{env="a"}');
  await page.fill('#cmp-qb', 'heap{env="b"}');
  await page.click('#cmp-apply');
  await waitDiff(page);
  assert.equal((await rowCells(page, 'main.foo'))[3], '+100%');
  assert.equal((await rowCells(page, 'main.bar'))[3], '0%');
  const url = page.url();
  const q = new URL(url).searchParams;
  assert.equal(q.get('query_a'), 'heap{env="a"}');
  assert.equal(q.get('query_b'), 'heap{env="b"}');
  const view = async (p) => p.evaluate(() => ({
    title: document.getElementById('profile-title').textContent,
    summary: document.getElementById('profile-summary').textContent,
    rows: document.querySelector('#top-table tbody').innerText,
    a: document.getElementById('cmp-qa').value, b: document.getElementById('cmp-qb').value,
  }));
  const before = await view(page);
  assert.match(before.title, /env="a"/);
  await shot(t, 'two-selectors');
  const p2 = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  p2.on('pageerror', (e) => pageErrors.push(e.message));
  await p2.goto(url);
  await waitDiff(p2);
  await p2.waitForFunction(() => document.getElementById('flame-b').flame && document.getElementById('flame-b').flame.rects.length > 0);
  assert.deepEqual(await view(p2), before, 'the copied URL shows the same comparison');
  await shot(t, 'two-selectors-reloaded', p2);
  await p2.close();
});

test('compare versions from a label: the explorer compares two values of env', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="envsvc"}' }));
  await waitPoints(page, 4);
  await page.click('#explore');
  await page.click('#explorer-names button[data-name="env"]');
  await page.waitForSelector('#xcmp-go');
  await page.selectOption('#xcmp-a', 'a');
  await page.selectOption('#xcmp-b', 'b');
  await page.click('#xcmp-go');
  await waitDiff(page);
  const q = new URL(page.url()).searchParams;
  assert.equal(q.get('query_a'), 'heap{service="envsvc", env="a"}');
  assert.equal(q.get('query_b'), 'heap{service="envsvc", env="b"}');
  assert.equal((await rowCells(page, 'main.foo'))[3], '+100%');
  assert.equal((await rowCells(page, 'main.bar'))[3], '0%');
  await shot(t, 'compare-versions');
});

test('compare with previous period: A the window before, B this window', { timeout: 180000 }, async (t) => {
  // the window holds B's 3 profiles; the one before it A's 4
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="diffsvc"}', from: iso(now - 25 * MIN), to: iso(now - 15 * MIN) }));
  await waitPoints(page, 3);
  await page.click('#compare');
  await page.click('#cmp-prev');
  await waitDiff(page);
  const q = new URL(page.url()).searchParams;
  assert.equal(q.get('b'), (now - 25 * MIN) + '-' + (now - 15 * MIN));
  assert.equal((await rowCells(page, 'main.foo'))[3], '+100%');
  assert.equal((await rowCells(page, 'main.bar'))[3], '0%');
  await shot(t, 'previous-period');
});

test('the first screen lists all 6 services with a sparkline per type; one click opens a service\'s CPU', { timeout: 180000 }, async (t) => {
  await page.goto(fleetd.base + '/');
  await page.waitForFunction(() => document.querySelectorAll('#fleet-body tr[data-service]').length === 6);
  const rows = await page.evaluate(() => [...document.querySelectorAll('#fleet-body tr[data-service]')].map((tr) => ({
    name: tr.getAttribute('data-service'),
    sparks: [...tr.querySelectorAll('td.spark-cell')].map((td) => ({ type: td.getAttribute('data-type'), points: td.querySelectorAll('svg.spark circle').length })),
  })));
  assert.deepEqual(rows.map((r) => r.name).sort(), ['svc-1', 'svc-2', 'svc-3', 'svc-4', 'svc-5', 'svc-6']);
  for (const r of rows) {
    assert.deepEqual(r.sparks.map((s) => s.type), ['cpu', 'heap'], r.name);
    for (const s of r.sparks) assert.equal(s.points, 3, `${r.name} ${s.type}: a point per profile`);
  }
  // sorted by cpu cost by default, descending; a click on heap sorts by heap
  const costs = await page.evaluate(() => [...document.querySelectorAll('#fleet-body td.spark-cell[data-type="cpu"]')].map((td) => td.textContent));
  t.diagnostic('cpu costs as listed: ' + costs.join(', '));
  assert.equal(await page.getAttribute('#fleet-body th[data-sort="cpu"]', 'aria-sort'), 'descending');
  await page.click('#fleet-body th[data-sort="heap"]');
  assert.equal(await page.getAttribute('#fleet-body th[data-sort="heap"]', 'aria-sort'), 'descending');
  await shot(t, 'fleet');
  await page.click('#fleet-body tr[data-service="svc-3"] a.fleet-open');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('query') === 'cpu{service="svc-3"}');
  await waitPoints(page, 3);
  assert.equal(await page.inputValue('#sample-type'), 'cpu');
  await shot(t, 'fleet-open-cpu');
});

test('allocs opens on alloc_space (its default_sample_type); the type picker lists each type once', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'allocs{job="allocsvc"}' }));
  await waitPoints(page);
  await page.waitForFunction(() => document.getElementById('sample-type').value !== '');
  assert.equal(await page.inputValue('#sample-type'), 'alloc_space');
  assert.equal(new URL(page.url()).searchParams.get('type'), 'alloc_space');
  // from heap (inuse_space) to allocs through the picker: allocs' own default
  await page.goto(profd.base + '/?' + qs({ query: 'heap{job="allocsvc"}' }));
  await waitPoints(page);
  assert.equal(await page.inputValue('#sample-type'), 'inuse_space', 'heap: pprof\'s rule, the last sample type');
  await page.waitForFunction(() => document.querySelectorAll('#profile-type option').length > 2);
  const names = await page.evaluate(() => [...document.querySelectorAll('#profile-type option')].map((o) => o.value).filter(Boolean));
  assert.deepEqual(names, [...new Set(names)], 'one entry per type: ' + names.join(', '));
  assert.ok(names.includes('heap') && names.includes('allocs'), names.join(', '));
  await page.selectOption('#profile-type', 'allocs');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('type') === 'alloc_space');
  await clickPoint(page, { index: -1 });
  await waitFrame(page);
  assert.match(await page.textContent('#profile-summary'), /^alloc_space/);
  await shot(t, 'allocs-alloc-space');
});

// Text a user can see: the page's text (not the pprof command, a URL) and
// the values of the inputs the page filled (the selector box is the user's).
const visibleInternal = (p) => p.evaluate(() => {
  const skip = new Set(['pprof-cmd']);
  const found = [];
  const walk = (el) => {
    if (skip.has(el.id) || el.hidden || getComputedStyle(el).display === 'none') return;
    for (const n of el.childNodes) {
      if (n.nodeType === 3 && /__[A-Za-z0-9_]*/.test(n.textContent)) found.push(n.textContent.trim().slice(0, 120));
      else if (n.nodeType === 1) walk(n);
    }
    if (el.title && /__[A-Za-z0-9_]*__/.test(el.title)) found.push('title: ' + el.title.slice(0, 120));
  };
  walk(document.body);
  if (!document.getElementById('cmp-bar').hidden) for (const id of ['cmp-qa', 'cmp-qb']) { const v = document.getElementById(id).value; if (/__/.test(v)) found.push(id + ': ' + v); }
  return found;
});

test('no label starting with "__" is visible: autocomplete, label explorer, legends, titles', { timeout: 180000 }, async (t) => {
  const labels = await apiData(profd.base, '/api/v1/labels');
  t.diagnostic('label names stored: ' + labels.join(', '));
  assert.ok(labels.some((n) => n.startsWith('__') && n !== '__name__'), 'there is an internal label to hide');
  await page.goto(profd.base + '/');
  await page.waitForSelector('#fleet-body tr[data-service]');
  assert.deepEqual(await visibleInternal(page), [], 'the first screen');
  await page.goto(profd.base + '/?' + qs({ query: 'heap' }));
  await waitPoints(page);
  assert.deepEqual(await visibleInternal(page), [], 'the timeline and its legend');
  // the explorer
  await page.click('#explore');
  await page.waitForSelector('#explorer-names button[data-name]');
  const names = await page.evaluate(() => [...document.querySelectorAll('#explorer-names button[data-name]')].map((b) => b.getAttribute('data-name')));
  assert.ok(names.length && names.every((n) => !n.startsWith('__')), names.join(', '));
  assert.deepEqual(await visibleInternal(page), [], 'the label explorer');
  // autocomplete of label names, inside the braces
  const input = page.locator('#selector');
  await input.fill('');
  await input.pressSequentially('heap{');
  await page.waitForSelector('#suggest li');
  const sugg = await page.evaluate(() => [...document.querySelectorAll('#suggest li')].map((li) => li.textContent));
  assert.ok(sugg.length && sugg.every((s) => !/^__/.test(s)), 'suggested: ' + sugg.join(' | '));
  assert.deepEqual(await visibleInternal(page), [], 'the autocomplete');
  await shot(t, 'no-internal-suggest');
  await page.keyboard.press('Escape');
  // the selector still accepts them
  await input.fill('{__name__="heap", service="diffsvc"}');
  await page.click('#run');
  await waitPoints(page, 7);
  await clickPoint(page, { index: 0 });
  await waitFrame(page);
  assert.deepEqual(await visibleInternal(page), [], 'an opened profile');
  await shot(t, 'no-internal-profile');
});

test('a 121,871-node flame graph says how many nodes were trimmed, the max is a setting', { timeout: 180000 }, async (t) => {
  const kept = bigTree.nodes, all = bigTree.nodes_total;
  assert.ok(all > 100000 && kept === 100000, `${kept} of ${all}`);
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="bigsvc"}', from: iso(now - 45 * MIN), to: iso(now - 5 * MIN) }));
  await waitPoints(page, 1);
  await clickPoint(page, { index: 0 });
  await waitFrame(page);
  const text = await page.textContent('#trimmed-text');
  assert.equal(text, (all - kept).toLocaleString('en-US') + ' nodes trimmed (max 100,000)');
  assert.ok(await page.isVisible('#flame-trimmed'));
  await shot(t, 'trimmed');
  await page.selectOption('#max-nodes', '10000');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('maxnodes') === '10000');
  await page.waitForFunction((n) => document.getElementById('trimmed-text').textContent === n, (all - 10000).toLocaleString('en-US') + ' nodes trimmed (max 10,000)');
  await page.selectOption('#max-nodes', '0');
  await page.waitForFunction((n) => document.getElementById('trimmed-text').textContent === n, 'all ' + all.toLocaleString('en-US') + ' nodes drawn');
});

test('every panel says when it is loading', { timeout: 180000 }, async (t) => {
  let release;
  const gate = new Promise((r) => { release = r; });
  await page.route('**/api/v1/query_range**', async (route) => { await gate; await route.continue(); });
  await page.route('**/api/v1/profile_types**', async (route) => { await gate; await route.continue(); });
  await page.goto(fleetd.base + '/');
  await page.waitForSelector('#fleet.loading[aria-busy="true"]');
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="diffsvc"}' }));
  await page.waitForSelector('#timeline-panel.loading[aria-busy="true"]:not([hidden])');
  const badge = await page.evaluate(() => getComputedStyle(document.getElementById('timeline-panel'), '::after').content);
  assert.equal(badge, '"loading…"');
  await shot(t, 'loading');
  release();
  await waitPoints(page, 7);
  await page.waitForSelector('#timeline-panel:not(.loading)[aria-busy="false"]');
  await page.unroute('**/api/v1/query_range**');
  await page.unroute('**/api/v1/profile_types**');
});

// The sum of sample type `type` over every sample of a pprof file, as
// `go tool pprof -raw` (Debian's Go) lists them.
async function pprofTotal(file, type) {
  const r = await run('go', ['tool', 'pprof', '-raw', file], { env: goEnv(dir) }, 120000);
  assert.equal(r.code, 0, `go tool pprof -raw ${file}\n${r.stderr}`);
  const lines = r.stdout.split('\n');
  const at = lines.indexOf('Samples:');
  assert.ok(at >= 0, r.stdout.slice(0, 500));
  const col = lines[at + 1].trim().split(/\s+/).findIndex((h) => h.split('/')[0] === type);
  assert.ok(col >= 0, `${type} in ${lines[at + 1]}`);
  let total = 0, n = 0;
  for (const l of lines.slice(at + 2)) {
    if (/^\S/.test(l)) break; // "Locations"
    const m = /^\s*(-?\d+(?:\s+-?\d+)*):/.exec(l);
    if (m) { total += Number(m[1].trim().split(/\s+/)[col]); n++; }
  }
  assert.ok(n > 0, 'samples listed');
  return total;
}

// Reads a flamebearer profile as Pyroscope's reader does (pkg/og/structs/
// flamebearer: Validate, then the delta-encoded x offsets decoded level by
// level) and checks that it is a tree: each node inside one node of the level
// above, children within their parent's total, total = self + children.
// Returns {nodes: [{name, total, self, level}]} (single format: the total of
// each; double: left + right).
function readFlamebearer(fb) {
  assert.equal(fb.version, 1);
  for (const k of Object.keys(fb)) assert.ok(['version', 'flamebearer', 'metadata', 'timeline', 'leftTicks', 'rightTicks', 'groups', 'heatmap'].includes(k), 'unknown member ' + k);
  const { names, levels, numTicks, maxSelf } = fb.flamebearer;
  const md = fb.metadata;
  assert.ok(['single', 'double'].includes(md.format), md.format);
  assert.equal(typeof md.spyName, 'string');
  assert.ok(Number.isInteger(md.sampleRate) && md.sampleRate > 0, 'sampleRate');
  assert.ok(['samples', 'objects', 'goroutines', 'bytes', 'lock_samples', 'lock_nanoseconds', 'trace_samples', 'exceptions', 'nanoseconds'].includes(md.units), md.units);
  assert.equal(typeof md.name, 'string');
  const step = md.format === 'single' ? 4 : 7, sides = md.format === 'single' ? [0] : [0, 3];
  assert.ok(Array.isArray(names) && names.length > 0 && names.every((n) => typeof n === 'string' && n.length > 0), 'names');
  assert.ok(Array.isArray(levels) && levels.length > 0, 'levels');
  const nodes = [];
  let prev = null, selfSum = [0, 0], mx = 0;
  levels.forEach((lv, li) => {
    assert.ok(lv.length % step === 0 && lv.every(Number.isInteger), `level ${li}: groups of ${step} integers`);
    const dec = lv.slice();
    for (const o of sides) { let end = 0; for (let j = o; j < dec.length; j += step) { dec[j] += end; end = dec[j] + dec[j + 1]; } }
    const cur = [];
    for (let j = 0; j < dec.length; j += step) {
      const ni = dec[j + step - 1];
      assert.ok(ni >= 0 && ni < names.length, `name index ${ni}`);
      const node = { name: names[ni], level: li, x: sides.map((o) => dec[j + o]), tot: sides.map((o) => dec[j + o + 1]), self: sides.map((o) => dec[j + o + 2]), kids: sides.map(() => 0) };
      sides.forEach((_, si) => { selfSum[si] += node.self[si]; mx = Math.max(mx, node.self[si]); });
      if (prev) {
        // its parent: the node of the level above whose span holds it (on a side where it has a value)
        const si = node.tot[0] > 0 || sides.length === 1 ? 0 : 1;
        const par = prev.find((p) => p.x[si] <= node.x[si] && node.x[si] + node.tot[si] <= p.x[si] + p.tot[si] && p.tot[si] > 0);
        assert.ok(par, `level ${li} ${node.name}: inside a node of level ${li - 1}`);
        sides.forEach((_, k) => { par.kids[k] += node.tot[k]; });
      }
      cur.push(node);
      nodes.push(node);
    }
    prev = cur;
  });
  for (const n of nodes) sides.forEach((_, k) => assert.equal(n.self[k] + n.kids[k], n.tot[k], `${n.name}: total = self + children`));
  const total = md.format === 'single' ? selfSum[0] : selfSum[0] + selfSum[1];
  assert.equal(numTicks, total, 'numTicks is the sum of self values');
  assert.equal(maxSelf, mx, 'maxSelf');
  if (md.format === 'double') { assert.equal(fb.leftTicks, selfSum[0]); assert.equal(fb.rightTicks, selfSum[1]); }
  return { nodes: nodes.map((n) => ({ name: n.name, level: n.level, total: n.tot.reduce((a, b) => a + b, 0) })) };
}

test('export as flamebearer JSON: the merged view and the comparison, in the shape Pyroscope exports and reads', { timeout: 240000 }, async (t) => {
  // a merge of A's 4 profiles
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="diffsvc"}', from: iso(now - 45 * MIN), to: iso(now - 5 * MIN), sel: aTimes[0] + '-' + aTimes[3] }));
  await waitFrame(page, 'main.foo');
  assert.equal(await page.textContent('#export-flamebearer'), 'Flamebearer JSON');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export-flamebearer')]);
  const file = path.join(dir, 'merge.flamebearer.json');
  await dl.saveAs(file);
  assert.match(dl.suggestedFilename(), /\.flamebearer\.json$/);
  const fb = JSON.parse(fs.readFileSync(file, 'utf8'));
  const read = readFlamebearer(fb);
  assert.equal(fb.metadata.format, 'single');
  assert.equal(fb.metadata.units, 'bytes');
  assert.match(fb.metadata.name, /^heap:inuse_space:bytes:/);
  // the same numbers as the view's pprof (the "Download merged pprof" link) read by go tool pprof
  const proto = await http(profd.base + await page.getAttribute('#download', 'href'));
  assert.equal(proto.status, 200);
  fs.writeFileSync(path.join(dir, 'merge.pb.gz'), proto.buf);
  const total = await pprofTotal(path.join(dir, 'merge.pb.gz'), 'inuse_space');
  t.diagnostic(`flamebearer numTicks ${fb.flamebearer.numTicks}, go tool pprof -raw inuse_space sum ${total}, ${read.nodes.length} nodes`);
  assert.equal(fb.flamebearer.numTicks, total);
  // the top function of the table is in names; main.foo's frame a fifth of the total (5 of 50 MiB)
  const top = await page.getAttribute('#top-table tbody tr:first-child', 'data-fn');
  assert.ok(fb.flamebearer.names.includes(top), `top function ${top} in names`);
  const foo = read.nodes.filter((n) => n.name === 'main.foo').reduce((a, n) => a + n.total, 0);
  assert.ok(Math.abs(foo / total - 0.1) < 0.01, `main.foo ${foo} of ${total}`);

  // the comparison: Pyroscope's "double" format, leftTicks A's total and rightTicks B's
  await page.goto(profd.base + diffURL());
  await waitDiff(page);
  const [dl2] = await Promise.all([page.waitForEvent('download'), page.click('#export-flamebearer')]);
  const file2 = path.join(dir, 'diff.flamebearer.json');
  await dl2.saveAs(file2);
  const fb2 = JSON.parse(fs.readFileSync(file2, 'utf8'));
  const read2 = readFlamebearer(fb2);
  assert.equal(fb2.metadata.format, 'double');
  const urls = [...(await page.textContent('#pprof-cmd')).matchAll(/'(http[^']+)'/g)].map((m) => m[1]);
  assert.equal(urls.length, 2, 'the pprof command names A and B');
  const sideTotal = async (u, name) => {
    const r = await http(u);
    assert.equal(r.status, 200);
    fs.writeFileSync(path.join(dir, name), r.buf);
    return pprofTotal(path.join(dir, name), 'inuse_space');
  };
  const [ta, tb] = [await sideTotal(urls[0], 'a.merge.pb.gz'), await sideTotal(urls[1], 'b.merge.pb.gz')];
  t.diagnostic(`diff: leftTicks ${fb2.leftTicks} (A by go tool pprof ${ta}), rightTicks ${fb2.rightTicks} (B ${tb})`);
  assert.equal(fb2.leftTicks, ta);
  assert.equal(fb2.rightTicks, tb);
  assert.ok(read2.nodes.some((n) => n.name === 'main.foo'));
  // a wrong report name is a clear 400 naming it
  const bad = await http(profd.base + '/api/v1/query?' + qs({ query: 'heap', report: 'flamebearers' }));
  assert.equal(bad.status, 400);
  assert.match(bad.text, /flamebearer/);
});

test('two selectors: the timeline draws A\'s and B\'s own line, each side\'s range chosen on its line; the same from the URL', { timeout: 240000 }, async (t) => {
  const qa = 'heap{service="twosvc", env="a"}', qb = 'heap{service="twosvc", env="b"}';
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="twosvc"}', from: iso(now - 45 * MIN), to: iso(now - 5 * MIN) }));
  await waitPoints(page, 7);
  await page.click('#compare');
  await page.waitForSelector('#cmp-bar:not([hidden])');
  await page.fill('#cmp-qa', qa);
  await page.fill('#cmp-qb', qb);
  await page.click('#cmp-apply');
  await page.waitForFunction(() => { const t = document.getElementById('timeline').timeline; return t && t.lines && t.lines.length === 2; });
  await waitPoints(page, 7);
  const type = await page.inputValue('#sample-type');
  assert.equal(type, 'inuse_space');
  // each line: the API's query_range of its selector (the sum over its series at each time)
  const expected = async (sel) => {
    const d = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: sel, from: String((now - 45 * MIN) / 1000), to: String((now - 5 * MIN) / 1000) }));
    const acc = new Map();
    for (const s of d) {
      const i = s.sample_types.findIndex((st) => st.type === type);
      s.timestamps.forEach((ts, j) => acc.set(ts, (acc.get(ts) || 0) + s.totals[j][i]));
    }
    const ts = [...acc.keys()].sort((x, y) => x - y);
    return { series: d.length, ts, vs: ts.map((x) => acc.get(x)) };
  };
  const ea = await expected(qa), eb = await expected(qb);
  assert.deepEqual(ea.ts, aTimes);
  assert.deepEqual(eb.ts, bTimes);
  const lines = () => page.evaluate(() => document.getElementById('timeline').timeline.lines);
  const got = await lines();
  assert.deepEqual(got.map((l) => [l.side, l.selector]), [['a', qa], ['b', qb]]);
  assert.deepEqual({ ts: got[0].ts, vs: got[0].vs }, { ts: ea.ts, vs: ea.vs }, 'A\'s line is query_range of query_a');
  assert.deepEqual({ ts: got[1].ts, vs: got[1].vs }, { ts: eb.ts, vs: eb.vs }, 'B\'s line is query_range of query_b');
  assert.notEqual(got[0].color, got[1].color, 'A and B in their own colours');
  // drawn: the canvas holds each side's colour at each of its points (after uPlot's paint)
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const painted = await page.evaluate(() => {
    const box = document.getElementById('timeline'), c = box.timeline, cv = box.querySelector('canvas');
    const br = box.getBoundingClientRect(), cr = cv.getBoundingClientRect(), k = cv.width / cr.width;
    const g = cv.getContext('2d');
    const rgb = (css) => { const e = document.createElement('span'); e.style.color = css; document.body.appendChild(e); const m = getComputedStyle(e).color.match(/\d+/g).map(Number); e.remove(); return m; };
    return c.lines.map((l) => {
      const want = rgb(l.color);
      return c.profiles.filter((p) => p.series === (l.side === 'a' ? 0 : 1)).map((p) => {
        const x = Math.round((br.left + box.clientLeft + p.px - cr.left) * k), y = Math.round((br.top + box.clientTop + p.py - cr.top) * k);
        const px = g.getImageData(x, y, 1, 1).data;
        return Math.max(Math.abs(px[0] - want[0]), Math.abs(px[1] - want[1]), Math.abs(px[2] - want[2]));
      });
    });
  });
  t.diagnostic('colour distance at each point, A: ' + painted[0].join(',') + ' B: ' + painted[1].join(','));
  assert.equal(painted[0].length, 4);
  assert.equal(painted[1].length, 3);
  for (const d of painted.flat()) assert.ok(d <= 40, 'the point is painted in its side\'s colour: ' + painted.join(' | '));
  // the legend names each selector
  const legend = await page.evaluate(() => [...document.querySelectorAll('#legend li[data-side]')].map((li) => li.textContent));
  assert.equal(legend.length, 2);
  assert.ok(legend[0].startsWith('A (base) ' + qa), legend[0]);
  assert.ok(legend[1].startsWith('B ' + qb), legend[1]);

  // B's range chosen on B's line, then A's on A's: each side keeps its own
  const drag = async (side, i0, i1) => {
    const pts = await page.evaluate((s) => { const box = document.getElementById('timeline'), r = box.getBoundingClientRect();
      return box.timeline.profiles.filter((p) => p.series === s).map((p) => ({ x: r.left + box.clientLeft + p.px, y: r.top + box.clientTop + p.py })); }, side === 'a' ? 0 : 1);
    await page.mouse.move(pts[i0].x, pts[i0].y);
    await page.mouse.down();
    await page.mouse.move((pts[i0].x + pts[i1].x) / 2, pts[i0].y, { steps: 4 });
    await page.mouse.move(pts[i1].x + 2, pts[i1].y, { steps: 4 });
    await page.mouse.up();
  };
  await drag('b', 0, 1);
  await page.waitForFunction((b) => new URLSearchParams(location.search).get('b') === b, bTimes[0] + '-' + bTimes[1]);
  assert.equal(new URL(page.url()).searchParams.get('a'), null, 'A is still the whole window');
  await drag('a', 1, 3);
  await page.waitForFunction((a) => new URLSearchParams(location.search).get('a') === a, aTimes[1] + '-' + aTimes[3]);
  assert.equal(new URL(page.url()).searchParams.get('b'), bTimes[0] + '-' + bTimes[1], 'B kept its range');
  await waitDiff(page);
  const chips = () => page.evaluate(() => [...document.querySelectorAll('#selection .chip')].map((c) => c.textContent));
  const before = { lines: await lines(), chips: await chips(), legend: await page.evaluate(() => document.getElementById('legend').textContent) };
  assert.match(before.chips[0], /3 profiles/, 'A: 3 of its profiles');
  assert.match(before.chips[1], /2 profiles/, 'B: 2 of its profiles');
  await shot(t, 'two-selectors-timeline');

  // reloaded from the URL: the same lines, legend and ranges
  const p2 = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  p2.on('pageerror', (e) => pageErrors.push(e.message));
  p2.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
  await p2.goto(page.url());
  await p2.waitForFunction(() => { const t = document.getElementById('timeline').timeline; return t && t.lines && t.lines.length === 2; });
  await waitDiff(p2);
  const after = { lines: await p2.evaluate(() => document.getElementById('timeline').timeline.lines),
    chips: await p2.evaluate(() => [...document.querySelectorAll('#selection .chip')].map((c) => c.textContent)),
    legend: await p2.evaluate(() => document.getElementById('legend').textContent) };
  assert.deepEqual(after, before, 'the URL gives the same timeline');
  await shot(t, 'two-selectors-timeline-reloaded', p2);
  // dark mode: the lines take the dark theme's A and B colours
  await p2.emulateMedia({ colorScheme: 'dark' });
  await p2.reload();
  await p2.waitForFunction(() => { const t = document.getElementById('timeline').timeline; return t && t.lines && t.lines.length === 2; });
  const dark = await p2.evaluate(() => document.getElementById('timeline').timeline.lines.map((l) => l.color));
  t.diagnostic('dark colours ' + dark.join(', ') + ' light ' + before.lines.map((l) => l.color).join(', '));
  assert.notDeepEqual(dark, before.lines.map((l) => l.color), 'the dark theme\'s own A and B colours');
  assert.notEqual(dark[0], dark[1]);
  await shot(t, 'two-selectors-timeline-dark', p2);
  await p2.close();
  // leaving the comparison: the query's own series again
  await page.click('#compare');
  await page.waitForFunction(() => document.querySelectorAll('#legend li[data-side]').length === 0 && document.querySelectorAll('#legend li[data-key]').length === 4);
});

test('exports: the flame graph as PNG, the view as folded stacks', { timeout: 180000 }, async (t) => {
  await page.goto(profd.base + '/?' + qs({ query: 'heap{service="diffsvc"}', from: iso(now - 45 * MIN), to: iso(now - 5 * MIN) }));
  await waitPoints(page, 7);
  await clickPoint(page, { index: 0 });
  await waitFrame(page, 'main.foo');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
  const file = path.join(dir, 'flame.png');
  await dl.saveAs(file);
  const png = fs.readFileSync(file);
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
  assert.match(dl.suggestedFilename(), /\.png$/);
  const href = await page.getAttribute('#export-folded', 'href');
  const folded = await http(profd.base + href);
  assert.equal(folded.status, 200);
  assert.match(folded.text, /main\.foo \d+/);
  assert.deepEqual(pageErrors, [], 'no page or console error in any test');
});
