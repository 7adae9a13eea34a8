// Browser test of the UI's handling of cumulative profiles (issue 12 items
// 2 and 3): the real Go demo (examples/demo) scraped by the real profd for
// its allocs profile (served cumulative: marked __delta__="false"); Debian's
// chromium (headless, playwright-core) opens the timeline:
//  - the Counters toggle is shown (a cumulative sample type is loaded), the
//    timeline asks for deltas (no delta=false): its first point (the
//    series' first profile) sits at 0;
//  - "raw" asks delta=false, puts it in the URL and draws the counters
//    (the first point is no longer at 0);
//  - a merge shown as a gauge type (inuse_space) asks agg=avg, as
//    alloc_space (cumulative) it asks no agg (sum) — the API then answers
//    with deltas (X-Profd-Delta) — and Merge: sum overrides the default.
//
//   PROFD_BIN=build/profd node --test tests/ui/cumulative.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { apiData, buildDemo, killAll, qs, startDemo, startProfd, tempDir, waitFor } from '../e2e/lib.mjs';
import { pointCount, profiles, waitPoints } from './timelib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
let dir, profd, browser, page, demo;
const requests = [];
const pageErrors = [];

before(async () => {
  dir = tempDir('profd-ui-cum-');
  demo = await startDemo(await buildDemo(dir));
  const config = path.join(dir, 'profd.yaml');
  fs.writeFileSync(config, `scrape_configs:\n  - job_name: demo\n    scrape_interval: 1s\n    scrape_timeout: 1s\n` +
    `    static_configs:\n      - targets: ["${demo.addr}"]\n    profiling_config:\n      pprof_config:\n` +
    ['block', 'goroutine', 'heap', 'mutex', 'threadcreate', 'cpu'].map((t) => `        ${t}: {enabled: false}\n`).join(''));
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
  await waitFor('5 allocs profiles', async () => {
    const d = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'allocs', delta: 'false' }));
    return d.length === 1 && d[0].timestamps.length >= 5;
  }, 60000, 500);
  demo.kill('SIGKILL'); // a fixed set of profiles from here on
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 120000,
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const last = (re) => [...requests].reverse().find((u) => re.test(u));

test('cumulative allocs: deltas by default, a raw toggle, avg for gauges in merges', { timeout: 180000 }, async () => {
  const raw = (await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'allocs', delta: 'false' })))[0];
  const n = raw.timestamps.length;
  const from = raw.timestamps[0] - 500, to = raw.timestamps[n - 1] + 500;
  const win = `from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`;
  await page.goto(`${profd.base}/?query=allocs&type=alloc_space&${win}`);
  await waitPoints(page);
  assert.equal(await page.locator('#counters-field').isVisible(), true, 'the toggle shows for a cumulative type');
  assert.equal(await page.locator('#counters').inputValue(), 'delta');
  assert.ok(!/delta=false/.test(last(/query_range/)), 'the default timeline asks for deltas');
  await waitFor('n points', async () => (await pointCount(page)) === n, 10000);
  // y of the first point: the axis' 0 for deltas (no delta before the first profile)
  const y0 = async () => { const p = await profiles(page); return p.length ? p[0].py : null; };
  const yDelta = await y0();

  await page.selectOption('#counters', 'raw');
  await waitFor('the raw counters drawn', async () => (await y0()) !== yDelta, 10000);
  assert.equal(await pointCount(page), n);
  assert.match(last(/query_range/), /delta=false/);
  assert.equal(new URL(page.url()).searchParams.get('delta'), 'false');
  await page.selectOption('#counters', 'delta');
  await waitFor('deltas again', async () => (await y0()) === yDelta, 10000);
  assert.equal(new URL(page.url()).searchParams.get('delta'), null);

  // a merge of the whole window, shown as alloc_space (cumulative): sum (no
  // agg), and the API takes deltas; as inuse_space (a gauge): agg=avg
  const sel = `sel=${from}-${to}`;
  await page.goto(`${profd.base}/?query=allocs&type=alloc_space&${win}&${sel}`);
  await waitFor('a merge request', async () => !!last(/mode=merge/), 15000);
  let u = last(/mode=merge/);
  assert.ok(!/agg=/.test(u), `no agg for a cumulative type: ${u}`);
  const r = await fetch(u);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-profd-delta'), 'true');
  requests.length = 0;
  await page.selectOption('#sample-type', 'inuse_space');
  await waitFor('a merge request as inuse_space', async () => !!last(/mode=merge.*sample_index=inuse_space|sample_index=inuse_space.*mode=merge/), 15000);
  u = last(/sample_index=inuse_space/);
  assert.match(u, /agg=avg/, `avg for a gauge: ${u}`);
  assert.match(await page.locator('#agg option[value=""]').innerText(), /averaged/);
  requests.length = 0;
  await page.selectOption('#agg', 'sum');
  await waitFor('a merge request with agg=sum', async () => !!last(/mode=merge.*agg=sum/), 15000);
  assert.equal(new URL(page.url()).searchParams.get('agg'), 'sum');
  assert.deepEqual(pageErrors, []);
});
