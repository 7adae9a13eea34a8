// End-to-end test of POST /ingest?format=speedscope (issue 11) with a real
// producer: `node --cpu-prof` profiles a real program (busy.cjs), and
// speedscope's own release (npm speedscope 1.25.0, in Debian's chromium
// through playwright-core) imports that V8 profile and exports it with its
// Export button — the file a user uploads. profd must accept it unchanged,
// file it as Pyroscope does (cpu, service_name, profile_name), keep every
// nanosecond the file charges (the test folds the file's events itself),
// and `go tool pprof -top` on the merge must show the hot function on top.
//
//   PROFD_BIN=build/profd node --test tests/e2e/speedscope/speedscope.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, goEnv, killAll, profdBin, qs, run, startProfd, tempDir } from '../lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const HOT = 'profdSpeedscopeBusy';
const APP = 'speedscope-e2e';
const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';

let dir, profd, file, ssJson, t0, t1;

// A static server for speedscope's release and the V8 profile (speedscope
// fetches #profileURL= with XHR: same origin).
function serve(roots) {
  const srv = http.createServer((req, res) => {
    const rel = decodeURIComponent(req.url.split('?')[0]);
    for (const root of roots) {
      const f = path.join(root, rel);
      if (f.startsWith(root) && fs.existsSync(f) && fs.statSync(f).isFile()) {
        const ext = path.extname(f);
        const ct = { '.js': 'text/javascript', '.html': 'text/html', '.css': 'text/css',
          '.json': 'application/json', '.wasm': 'application/wasm' }[ext] || 'application/octet-stream';
        res.writeHead(200, { 'content-type': ct });
        fs.createReadStream(f).pipe(res);
        return;
      }
    }
    res.writeHead(404);
    res.end();
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

before(async () => {
  profdBin();
  const release = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
  if (!fs.existsSync(path.join(release, 'index.html')) ||
      !fs.existsSync(path.join(here, 'node_modules', 'playwright-core'))) {
    throw new Error('speedscope or playwright-core is not installed in tests/e2e/speedscope/node_modules: ' +
      'run scripts/install-deps.sh --test (or `npm ci` in tests/e2e/speedscope)');
  }
  dir = tempDir('profd-speedscope-');
  // 1. a real V8 CPU profile of a real program
  const profDir = path.join(dir, 'cpuprof');
  const prog = new Proc('busy', process.execPath,
    ['--cpu-prof', `--cpu-prof-dir=${profDir}`, '--cpu-prof-name=busy.cpuprofile', path.join(here, 'busy.cjs')],
    { env: { ...process.env, DURATION_MS: '1500' } });
  const ex = await prog.wait(60000);
  assert.equal(ex.code, 0, prog.tail());
  // 2. speedscope imports it and exports its own file format
  const srv = await serve([release, profDir]);
  const port = srv.address().port;
  const { chromium } = await import(path.join(here, 'node_modules', 'playwright-core', 'index.mjs'));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ acceptDownloads: true });
    const prof = `http://127.0.0.1:${port}/busy.cpuprofile`;
    await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=${encodeURIComponent(prof)}&title=busy`);
    const exportButton = page.getByText('Export', { exact: false }).first();
    await exportButton.waitFor({ timeout: 120000 });
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 120000 }), exportButton.click()]);
    file = path.join(dir, 'busy.speedscope.json');
    await dl.saveAs(file);
  } finally {
    await browser.close();
    srv.close();
  }
  ssJson = JSON.parse(fs.readFileSync(file, 'utf8'));
  // 3. profd takes the file as Pyroscope's /ingest does
  profd = await startProfd({ storage: path.join(dir, 'data') });
  t0 = Math.floor(Date.now() / 1000) - 5;
  const r = await fetch(`${profd.base}/ingest?` + qs({ name: `${APP}{env=e2e}`, format: 'speedscope',
    spyName: 'speedscope', from: t0 + 1, until: t0 + 3 }), {
    method: 'POST', body: fs.readFileSync(file), headers: { 'content-type': 'application/json' } });
  assert.equal(r.status, 200, `ingest: HTTP ${r.status} ${await r.text()}`);
  t1 = Math.ceil(Date.now() / 1000) + 5;
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('speedscope exported a real evented profile (the producer is real)', () => {
  assert.equal(ssJson.$schema, 'https://www.speedscope.app/file-format-schema.json');
  assert.match(ssJson.exporter, /^speedscope@/);
  assert.ok(ssJson.profiles.length >= 1);
  assert.ok(ssJson.shared.frames.some((f) => f.name === HOT), 'the hot function is a frame');
});

test('one cpu series labelled as Pyroscope labels it, profile_name from the file', async () => {
  const series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': `{service_name="${APP}"}` }));
  const names = new Set(ssJson.profiles.map((p) => p.name));
  assert.equal(series.length, names.size, JSON.stringify(series));
  for (const s of series) {
    assert.equal(s.__name__, 'cpu');
    assert.equal(s.env, 'e2e');
    assert.equal(s.pyroscope_spy, 'speedscope');
    assert.ok(names.has(s.profile_name), JSON.stringify(s));
  }
});

// The nanoseconds a speedscope file charges, folded here from the file:
// evented: the time between consecutive events while a frame is open;
// sampled: the weights.
function fileTotalNs() {
  const mul = { nanoseconds: 1, microseconds: 1e3, milliseconds: 1e6, seconds: 1e9 };
  let total = 0, parts = 0;
  for (const p of ssJson.profiles) {
    assert.ok(p.unit in mul, `unit ${p.unit}`);
    if (p.type === 'evented') {
      let depth = 0, last = p.startValue;
      for (const ev of p.events) {
        if (depth > 0) { total += Math.round((ev.at - last) * mul[p.unit]); parts++; }
        depth += ev.type === 'O' ? 1 : -1;
        last = ev.at;
      }
    } else {
      for (const w of p.weights) { total += Math.round(w * mul[p.unit]); parts++; }
    }
  }
  return { total, parts };
}

test('every nanosecond the file charges is stored', async () => {
  const { total, parts } = fileTotalNs();
  assert.ok(total > 1e9, `the program ran 1.5 s: ${total} ns`);
  const r = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: `cpu{service_name="${APP}"}`,
    from: t0, to: t1, report: 'top', limit: 1 }));
  // each charged interval is rounded once, here and in profd
  assert.ok(Math.abs(r.total - total) <= parts, `stored ${r.total} ns, the file charges ${total} ns`);
});

test('go tool pprof reads the merge and the hot function is on top', { timeout: 180000 }, async () => {
  const url = `${profd.base}/api/v1/query?` +
    qs({ mode: 'merge', query: `cpu{service_name="${APP}"}`, from: t0, to: t1, report: 'proto' });
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const out = await run('go', ['tool', 'pprof', '-top', url], { env: goEnv(gd), cwd: gd }, 60000);
  assert.equal(out.code, 0, `go tool pprof exit ${out.code}\n${out.stdout}\n${out.stderr}`);
  const rows = out.stdout.split('\n').filter((l) => /^\s*[\d.]+\w*\s+[\d.]+%/.test(l));
  assert.ok(rows.length > 0, out.stdout);
  assert.equal(rows[0].trim().split(/\s+/).pop(), HOT, out.stdout);
  assert.match(out.stdout, /Type: cpu/);
});
