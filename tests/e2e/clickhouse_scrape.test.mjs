// Scrapes into ClickHouse go in batches (issue 35, helper scrapebatch): the
// scrapes that end together are stored with one call of the scrape loop's
// store thread, which on ClickHouse is one batch — not one batch per
// profile — and each target's outcome stays its own.
//
// One real clickhouse-server (Debian's 18.16, loopback, free ports); 8
// targets, each a node HTTP listener on a free port serving the real Go
// heap profiles of the shared testdata, and a 9th serving a body that is no
// profile. Every target answers at the next whole 2 s of the clock (a
// "wave"), so the scrapes due in the same 2 s end together. Asserted on
// counts, never on time: every ClickHouse batch is one storage call of the
// scrape loop; there are fewer calls than profiles stored (stored one by
// one, as before, they were as many — how many fewer depends on how close
// together the scrapes end on a busy machine, so no ratio is asserted: one
// CI run saw 27 profiles in 14 calls); the bad
// target is down with bad_profile while the others are up; every profile
// counted is stored.
// Skipped (exit 77) where clickhouse-server is not installed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { TESTDATA, apiData, http as get, killAll, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { CH_BIN, chPorts, startClickHouse } from './ch.mjs';

if (!CH_BIN) {
  console.log('SKIP: clickhouse-server is not installed (Debian 12: apt-get install clickhouse-server)');
  process.exit(77);
}

const N = 8, WAVE = 2000;
const dir = tempDir('pd-chscrape-');
const servers = [];
after(async () => {
  await killAll();
  for (const s of servers) s.close();
  if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true });
});

const gd = path.join(TESTDATA, 'pprof', 'go-demo-series');
const bodies = fs.readdirSync(gd).filter((f) => f.startsWith('heap-')).sort().map((f) => fs.readFileSync(path.join(gd, f)));

async function target(body) {
  let k = 0;
  const srv = http.createServer((req, res) => {
    if (req.url !== '/debug/pprof/heap') { res.writeHead(404); res.end(); return; }
    const b = body || bodies[k++ % bodies.length];
    setTimeout(() => { res.writeHead(200); res.end(b); }, WAVE - (Date.now() % WAVE));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
  return `127.0.0.1:${srv.address().port}`;
}

function metric(text, name, labels = '') {
  let v = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(labels ? `${name}{` : `${name} `) && line.includes(labels)) v += Number(line.split(' ').pop());
  return v;
}

test('a round of scrapes is one ClickHouse batch; each target keeps its outcome', { timeout: 600000 }, async () => {
  const ch = await startClickHouse(dir, 'ch', await chPorts());
  const good = [];
  for (let i = 0; i < N; i++) good.push(await target(null));
  const bad = await target(Buffer.from('this is not a profile'));
  const off = '{enabled: false}';
  const cfg = path.join(dir, 'profd.yaml');
  fs.writeFileSync(cfg, `global: {scrape_interval: 4s, scrape_timeout: 4s}
scrape_configs:
  - job_name: fleet
    profiling_config:
      pprof_config: {allocs: ${off}, block: ${off}, goroutine: ${off}, mutex: ${off}, threadcreate: ${off}, cpu: ${off}}
    static_configs:
      - targets: [${[...good, bad].map((t) => `'${t}'`).join(', ')}]
`);
  const p = await startProfd({ storage: path.join(dir, 'p'), config: cfg, name: 'profd-ch',
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=scrapes'] });

  // three waves' worth of profiles of every good target
  const text = await waitFor('24 scraped profiles stored', async () => {
    const t = (await get(`${p.base}/metrics`)).text;
    return metric(t, 'profd_ingested_profiles_total', 'source="scrape"') >= 3 * N && t;
  }, 120000, 500);
  const stored = metric(text, 'profd_ingested_profiles_total', 'source="scrape"');
  const batches = metric(text, 'profd_clickhouse_batches_total');
  const calls = metric(text, 'profd_scrape_store_batches_total');
  // (a call whose batch is done may not have returned yet: one batch more)
  assert.ok(calls <= batches && batches <= calls + 1, `${batches} ClickHouse batches for ${calls} storage calls of the scrape loop: want one each`);
  assert.ok(calls < stored, `${stored} profiles stored in ${calls} calls (${batches} batches): stored one by one they were ${stored}`);
  assert.ok(metric(text, 'profd_clickhouse_inserted_profiles_total') >= stored);

  // the bad target failed on its own; the others are up
  assert.ok(metric(text, 'profd_scrapes_total', 'outcome="bad_profile"') >= 1);
  assert.equal(metric(text, 'profd_scrapes_total', 'outcome="error"'), 0);
  assert.equal(metric(text, 'profd_scrapes_total', 'outcome="timeout"'), 0);
  const ts = await apiData(p.base, '/api/v1/targets');
  const down = ts.activeTargets.filter((t) => t.health === 'down').map((t) => t.labels.instance);
  assert.deepEqual(down, [bad]);
  for (const t of ts.activeTargets)
    if (t.labels.instance !== bad) assert.equal(t.health, 'up', `${t.labels.instance}: ${t.lastError}`);

  // what was counted is stored: the profiles read back per target
  await p.stop();
  const q = await startProfd({ storage: path.join(dir, 'q'), name: 'profd-read',
    extraArgs: ['--storage.backend=clickhouse', `--clickhouse.url=${ch.url}`, '--clickhouse.database=scrapes'] });
  const now = Date.now() / 1000;
  const r = await get(`${q.base}/api/v1/query_range?` + qs({ query: 'heap{job="fleet"}', from: now - 600, to: now + 60 }));
  assert.equal(r.status, 200, r.text);
  const per = Object.fromEntries(r.json.data.map((s) => [s.labels.instance, new Set(s.timestamps).size]));
  assert.equal(Object.keys(per).length, N, JSON.stringify(per));
  const total = Object.values(per).reduce((a, b) => a + b, 0);
  assert.ok(total >= stored, `${total} profiles read back, ${stored} counted stored`);
  assert.equal(per[bad], undefined);
  await q.stop();
});
