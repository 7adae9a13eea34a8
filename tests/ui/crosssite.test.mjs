// Issue 20 item 4, "Cross-site": a page on another origin (a local node HTTP
// server on another port, loaded in Debian's headless chromium) tries to
// push (profefe's API, Pyroscope's /ingest, a form post), to trigger
// /-/reload and to read profiles; DNS rebinding is simulated by chromium
// resolving a foreign name to 127.0.0.1 (--host-resolver-rules) and by a
// foreign Host header. All refused, counted in /metrics, nothing stored or
// reloaded. Meanwhile the UI itself (same origin) works under the CSP, with
// no CSP violation reported, every reply carries the security headers, a
// link from the other site into the UI opens it, and clients that send no
// Origin (node's http, as curl and the SDKs) still push.
//
//   PROFD_BIN=build/profd node --test tests/ui/crosssite.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { clickPoint, waitPoints } from './timelib.mjs';
import { waitFrame } from './flamelib.mjs';
import { TESTDATA, freePort, http as get, killAll, qs, startProfd, tempDir, waitFor } from '../e2e/lib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const HEAP = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));

let dir, profd, browser, evil, evilPort;

async function metric(name, labels) {
  const r = await get(`${profd.base}/metrics`);
  const line = r.text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

// A raw request with a chosen Host header (fetch() will not set Host).
function rawRequest(method, p, headers = {}, body = null) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: profd.port, method, path: p, headers, agent: false }, (res) => {
      const c = [];
      res.on('data', (d) => c.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(c).toString() }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

// The attacker's page: every way a page can send a request to profd.
function evilPage(target) {
  return `<!doctype html><html><body><h1>not profd</h1>
<a id="link" href="${target}/">open profd</a>
<form id="f" method="POST" action="${target}/-/reload" target="sink"></form>
<iframe name="sink"></iframe>
<script>
window.results = {};
const T = ${JSON.stringify(target)};
const settle = (name, p) => p.then((r) => { results[name] = 'status ' + r.status + ' type ' + r.type; },
                                   (e) => { results[name] = 'error ' + e.message; });
window.attack = async () => {
  await Promise.all([
    settle('push_profefe', fetch(T + '/api/0/profiles?service=evil&type=heap', { method: 'POST', mode: 'no-cors', body: new Blob(['x']) })),
    settle('push_ingest', fetch(T + '/ingest?name=evil.cpu&format=folded', { method: 'POST', mode: 'no-cors', body: 'main;evil 100' })),
    settle('push_json', fetch(T + '/push.v1.PusherService/Push', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"series":[]}' })),
    settle('reload', fetch(T + '/-/reload', { method: 'POST', mode: 'no-cors' })),
    settle('read', fetch(T + '/api/v1/labels').then(async (r) => { results.readBody = await r.text(); return r; })),
    settle('read_nocors', fetch(T + '/api/v1/labels', { mode: 'no-cors' })),
    new Promise((resolve) => { const i = new Image(); i.onload = () => { results.img = 'loaded'; resolve(); };
      i.onerror = () => { results.img = 'error'; resolve(); }; i.src = T + '/static/favicon.svg'; }),
  ]);
  document.getElementById('f').submit();
  await new Promise((r) => setTimeout(r, 1000));
};
</script></body></html>`;
}

before(async () => {
  dir = tempDir('profd-crosssite-');
  const config = path.join(dir, 'profd.yaml');
  fs.writeFileSync(config, 'scrape_configs: []\n');
  // lifecycle on: /-/reload would work for a same-origin client, so a
  // refusal below is the cross-site rule's, not the flag's
  profd = await startProfd({ storage: path.join(dir, 'data'), config, extraArgs: ['--web.enable-lifecycle'] });
  evilPort = await freePort();
  evil = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(evilPage(profd.base));
  });
  await new Promise((r) => evil.listen(evilPort, '127.0.0.1', r));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--host-resolver-rules=MAP rebind.test 127.0.0.1'],
    timeout: 120000,
  });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (evil) evil.close();
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('a page on another origin cannot push, reload or read; a link into the UI works', { timeout: 180000 }, async () => {
  const reasons = ['cross_origin', 'cross_site', 'browser_simple_write'];
  const before0 = {};
  for (const r of reasons) before0[r] = await metric('profd_http_rejected_total', `reason="${r}"`);
  const reload0 = await metric('profd_http_requests_total', 'handler="/-/reload",code="200"');

  const page = await browser.newPage();
  page.setDefaultTimeout(120000);
  await page.goto(`http://127.0.0.1:${evilPort}/`);
  await page.evaluate(() => window.attack());
  const results = await page.evaluate(() => window.results);
  console.log(JSON.stringify(results));
  // a CORS read fails in the page: profd grants no other origin
  assert.match(results.read, /^error/, `cross-origin read: ${results.read}`);
  assert.equal(results.readBody, undefined);
  // the image from profd is refused (Sec-Fetch-Site: same-site, dest image;
  // Cross-Origin-Resource-Policy too)
  assert.equal(results.img, 'error');

  let after0 = {};
  await waitFor('the refusals to be counted', async () => {
    for (const r of reasons) after0[r] = await metric('profd_http_rejected_total', `reason="${r}"`);
    // profefe, ingest, push json, reload, read, read no-cors, image, form
    const n = reasons.reduce((s, r) => s + after0[r] - before0[r], 0);
    if (n >= 8) return true;
    throw new Error(`${n} refusals counted: ${JSON.stringify(after0)}`);
  }, 15000, 250);
  console.log(`refused: ${JSON.stringify(Object.fromEntries(reasons.map((r) => [r, after0[r] - before0[r]])))}`);
  assert.ok(after0.cross_origin - before0.cross_origin >= 5, 'requests with a foreign Origin are refused');
  // nothing stored, nothing reloaded
  const sr = await get(`${profd.base}/api/v1/series?` + qs({ 'match[]': '{service_name=~"evil.*"}' }));
  assert.equal(sr.status, 200, sr.text);
  assert.deepEqual(sr.json.data, []);
  const labels = await get(`${profd.base}/api/v1/label/service/values`);
  assert.ok(!/evil/.test(labels.text), labels.text);
  assert.equal(await metric('profd_http_requests_total', 'handler="/-/reload",code="200"'), reload0);

  // a link from the other site into the UI is a top-level navigation: served
  await Promise.all([page.waitForURL(`${profd.base}/`), page.click('#link')]);
  await page.locator('#selector').waitFor();
  assert.match(await page.title(), /profd/);
  await page.close();

  // the same requests without a browser's marks (curl, SDKs): accepted
  const ok = await get(`${profd.base}/api/0/profiles?service=native&type=heap`, {
    method: 'POST', body: HEAP, headers: { 'Content-Type': 'application/octet-stream' } });
  assert.equal(ok.status, 200, ok.text);
  const rl = await get(`${profd.base}/-/reload`, { method: 'POST' });
  assert.equal(rl.status, 200, rl.text);
});

test('DNS rebinding: a foreign Host is refused (421), in chromium and by hand', { timeout: 180000 }, async () => {
  const n0 = await metric('profd_http_rejected_total', 'reason="host_not_allowed"');
  // chromium resolves rebind.test to 127.0.0.1: to the browser the page and
  // profd are one origin, so only the Host check stands in the way
  const page = await browser.newPage();
  const resp = await page.goto(`http://rebind.test:${profd.port}/`);
  assert.equal(resp.status(), 421);
  assert.match(await resp.text(), /Host "rebind\.test:\d+" is not served here/);
  await page.close();
  for (const [method, p, body] of [['GET', '/api/v1/series', null], ['GET', '/-/healthy', null],
    ['POST', '/api/0/profiles?service=rebind&type=heap', HEAP]]) {
    const r = await rawRequest(method, p, { Host: `attacker.example:${profd.port}`, 'Content-Type': 'application/octet-stream' }, body);
    assert.equal(r.status, 421, `${method} ${p}: ${r.status} ${r.text}`);
    assert.match(r.text, /attacker\.example/);
  }
  // the loopback names are served
  for (const h of [`127.0.0.1:${profd.port}`, `localhost:${profd.port}`, `[::1]:${profd.port}`]) {
    const r = await rawRequest('GET', '/-/healthy', { Host: h });
    assert.equal(r.status, 200, `Host ${h}: ${r.status} ${r.text}`);
  }
  assert.ok(await metric('profd_http_rejected_total', 'reason="host_not_allowed"') - n0 >= 4);
});

test('the UI under its CSP: no violation, security headers on every reply', { timeout: 180000 }, async () => {
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    const r = await get(`${profd.base}/api/0/profiles?` + qs({ service: 'csp', type: 'heap',
      created_at: new Date(now - (3 - i) * 60000).toISOString().replace(/\.\d+Z$/, 'Z') }),
    { method: 'POST', body: HEAP, headers: { 'Content-Type': 'application/octet-stream' } });
    assert.equal(r.status, 200, r.text);
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(120000);
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  const consoleCsp = [];
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) consoleCsp.push(m.text()); });
  const seen = [];
  page.on('response', (r) => { if (r.url().startsWith(profd.base)) seen.push(r); });
  // timeline, a merge of the range (flame graph, top table), the call graph,
  // the label explorer, targets and status pages
  await page.goto(`${profd.base}/?` + qs({ query: 'heap{service="csp"}' }));
  await waitPoints(page);
  await clickPoint(page, { index: 0 });
  await waitFrame(page);
  await page.waitForSelector('#top-table tbody tr[data-fn]');
  const midViolations = await page.evaluate(() => window.cspViolations);
  assert.deepEqual(midViolations, [], 'no CSP violation on the profile view');
  for (const p of ['/targets', '/status']) {
    await page.goto(profd.base + p);
    await page.waitForTimeout(1000);
  }
  const violations = await page.evaluate(() => window.cspViolations);
  assert.deepEqual(violations, [], 'no CSP violation on the last page');
  assert.deepEqual(consoleCsp, [], 'no CSP violation reported on the console');
  assert.ok(seen.length >= 5, `${seen.length} replies from profd`);
  for (const r of seen) {
    const h = await r.allHeaders();
    assert.equal(h['x-content-type-options'], 'nosniff', r.url());
    assert.equal(h['x-frame-options'], 'DENY', r.url());
    assert.match(h['content-security-policy'] || '', /frame-ancestors 'none'/, r.url());
    assert.match(h['content-security-policy'] || '', /script-src 'self'/, r.url());
  }
  await page.close();
  // replies the server makes itself carry them too (a refusal)
  const r = await rawRequest('GET', '/', { Host: 'attacker.example' });
  assert.equal(r.headers['x-frame-options'], 'DENY');
  assert.equal(r.headers['x-content-type-options'], 'nosniff');
});

test('/-/reload is off without --web.enable-lifecycle (403 naming the flag)', { timeout: 180000 }, async () => {
  const p2 = await startProfd({ storage: path.join(dir, 'data2'), name: 'profd-nolifecycle' });
  const r = await get(`${p2.base}/-/reload`, { method: 'POST' });
  assert.equal(r.status, 403);
  assert.match(r.text, /--web\.enable-lifecycle/);
  const m = await get(`${p2.base}/metrics`);
  assert.match(m.text, /profd_http_rejected_total\{reason="lifecycle_disabled"\} 1/);
});
