// End-to-end tests of operating profd as one operates Prometheus (issue 28):
//  - file_sd watching bounded: a broken SD file with profd's own log in the
//    same folder is logged and counted once, not once per log line; other
//    files of the folder wake nothing; the SD file's own changes still do.
//
//   PROFD_BIN=build/profd node --test tests/e2e/operate.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  Proc, apiData, freePort, http, killAll, profdBin, sleep, tempDir, waitFor,
} from './lib.mjs';

let dir;

before(() => { dir = tempDir('profd-operate-'); });
after(async () => {
  await killAll();
  if (process.env.PD_KEEP_TMP !== '1') fs.rmSync(dir, { recursive: true, force: true });
});

const write = (name, text) => {
  const p = path.join(dir, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, text);
  return p;
};

// One sample value of /metrics (0 when absent).
async function metric(base, name, labels = '') {
  const r = await http(base + '/metrics');
  assert.equal(r.status, 200);
  const line = r.text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}}` : `${name} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

// `profd serve` whose stdout and stderr go to logPath (appended), as a
// service manager would redirect them; waits for /-/ready.
async function startLoggingProfd({ storage, config, logPath, extraArgs = [] }) {
  const port = await freePort();
  const fd = fs.openSync(logPath, 'a');
  const args = ['serve', `--storage.path=${storage}`, `--web.listen-address=127.0.0.1:${port}`,
    ...(config ? [`--config.file=${config}`] : []), ...extraArgs];
  const p = new Proc('profd', profdBin(), args, { stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  p.port = port;
  p.base = `http://127.0.0.1:${port}`;
  await waitFor('profd to answer /-/ready', async () => {
    if (p.exited) throw new Error(`profd exited early\n${fs.readFileSync(logPath, 'utf8').slice(-4000)}`);
    const r = await http(p.base + '/-/ready', { timeoutMs: 2000 }).catch(() => null);
    return r && r.status === 200;
  }, 30000, 150);
  return p;
}

const noProfiles = `    profiling_config:
      pprof_config:
        allocs: {enabled: false}
        block: {enabled: false}
        goroutine: {enabled: false}
        mutex: {enabled: false}
        threadcreate: {enabled: false}
        cpu: {enabled: false}
`;

test('file_sd: a broken file beside profd\'s own log is logged once per change, not in a loop', async () => {
  const sd = path.join(dir, 'sd');
  const logPath = path.join(sd, 'profd.log');
  write('sd/targets.json', '[{"targets": ["127.0.0.1:1"], "labels": {broken');
  const cfg = write('sd.yml', `global:
  scrape_interval: 1h
scrape_configs:
  - job_name: sd
    file_sd_configs:
      - files: ['${sd}/*.json']
${noProfiles}`);
  const profd = await startLoggingProfd({ storage: path.join(dir, 'data-sd'), config: cfg, logPath });
  const fails = () => metric(profd.base, 'profd_sd_refresh_failures_total', 'mechanism="file"');
  const warnings = () => fs.readFileSync(logPath, 'utf8').split('\n')
    .filter((l) => l.includes('level=warn') && l.includes('file_sd')).length;
  await waitFor('the broken file to be counted', async () => (await fails()) >= 1, 20000);
  // The old watcher re-read on every change in the folder: each warning it
  // wrote to profd.log woke it again (tens of thousands a second). Let it run
  // while requests make profd write (more log lines in the folder).
  for (let i = 0; i < 20; i++) {
    await http(profd.base + '/api/v1/targets');
    await http(profd.base + '/no/such/path');
    await sleep(250);
  }
  // Other files of the folder, written many times, wake nothing.
  for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(sd, 'notes.txt'), `note ${i}\n`);
  fs.writeFileSync(path.join(sd, '.targets.json.swp'), 'editor state');
  await sleep(3000);
  let w = warnings(), f = await fails();
  assert.ok(w >= 1 && w < 10, `${w} file_sd warnings in the log (want 1..9)\n` +
    fs.readFileSync(logPath, 'utf8').slice(-3000));
  assert.ok(f >= 1 && f < 10, `profd_sd_refresh_failures_total{mechanism="file"} = ${f} (want 1..9)`);
  assert.equal(f, w, 'each failure counted is logged once');

  // The SD file's own change is still seen: fixed, its target appears.
  fs.writeFileSync(path.join(sd, 'targets.json'), JSON.stringify([{ targets: ['127.0.0.1:1'], labels: { env: 'fixed' } }]));
  await waitFor('the fixed file\'s target', async () => {
    const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets;
    return ts.some((t) => t.labels.env === 'fixed');
  }, 20000);
  // Broken again, differently: counted again, once (a write may be read twice).
  const before2 = await fails();
  fs.writeFileSync(path.join(sd, 'targets.json'), '{not a list');
  await waitFor('the new breakage to be counted', async () => (await fails()) > before2, 20000);
  await sleep(3000);
  f = await fails();
  assert.ok(f - before2 <= 2, `one broken write counted ${f - before2} times`);
  // the previous targets are kept
  const ts = (await apiData(profd.base, '/api/v1/targets')).activeTargets;
  assert.ok(ts.some((t) => t.labels.env === 'fixed'), 'the targets of the last good read stay');
  await profd.stop();
});
