// Issue 26 item 2 for scrapes: profd scrapes a real Go program
// (tests/e2e/labelled, built with Debian's golang-go) whose CPU work is
// partly inside pprof.Do(pprof.Labels("endpoint", "/checkout")). As with
// Grafana Alloy's pyroscope.scrape + Pyroscope, the label becomes a series
// label: {endpoint="/checkout"} selects a cpu series of the target holding
// the labelled function and not the other; the rest of the profile stays in
// the target's series without the label.
//
//   PROFD_BIN=build/profd node --test tests/e2e/scrape_labels.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, freePort, goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
let dir, profd, t0;

before(async () => {
  profdBin();
  dir = tempDir('profd-scrape-labels-');
  const bin = path.join(dir, 'labelled');
  const r = await run('go', ['build', '-o', bin, '.'], { cwd: path.join(here, 'labelled'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/e2e/labelled (is golang-go installed?)\n${r.stdout}${r.stderr}`);
  const port = await freePort();
  const target = new Proc('labelled', bin, [`-listen=127.0.0.1:${port}`]);
  await waitFor('the Go target to serve /debug/pprof/', async () => {
    if (target.exited) throw new Error(`target exited early\n${target.tail()}`);
    const h = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 2000 }).catch(() => null);
    return h && h.status === 200;
  }, 20000, 100);
  const config = path.join(dir, 'profd.yml');
  fs.writeFileSync(config, `global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: labelled
    profiling_config:
      pprof_config:
        cpu: {enabled: true, seconds: 1}
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate'].map((t) => `        ${t}: {enabled: false}`).join('\n')}
    static_configs:
      - targets: ["127.0.0.1:${port}"]
`);
  t0 = Math.floor(Date.now() / 1000) - 5;
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

async function top(sel) {
  const gd = path.join(dir, 'gotool');
  fs.mkdirSync(gd, { recursive: true });
  const url = `${profd.base}/api/v1/query?` + qs({ mode: 'merge', query: sel, from: t0, to: Math.ceil(Date.now() / 1000) + 5, report: 'proto' });
  const r = await run('go', ['tool', 'pprof', '-top', url], { env: goEnv(gd), cwd: gd }, 90000);
  assert.equal(r.code, 0, `go tool pprof exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('a scraped CPU profile with pprof.Do labels is split into series by them', { timeout: 120000 }, async () => {
  let series = [];
  await waitFor('a cpu series with endpoint="/checkout"', async () => {
    series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': 'cpu{job="labelled"}', start: t0, end: Math.ceil(Date.now() / 1000) + 5 }));
    return series.some((s) => s.endpoint === '/checkout') && series.some((s) => !('endpoint' in s));
  }, 60000, 500);
  for (const s of series) assert.ok(s.instance, JSON.stringify(s));
  const values = await apiData(profd.base, '/api/v1/label/endpoint/values');
  assert.deepEqual(values, ['/checkout']);
  const labelled = await top('cpu{job="labelled",endpoint="/checkout"}');
  assert.match(labelled, /main\.checkoutWork/, labelled);
  assert.doesNotMatch(labelled, /main\.backgroundWork/, labelled);
  const rest = await top('cpu{job="labelled",endpoint=""}');
  assert.match(rest, /main\.backgroundWork/, rest);
  assert.doesNotMatch(rest, /main\.checkoutWork/, rest);
});
