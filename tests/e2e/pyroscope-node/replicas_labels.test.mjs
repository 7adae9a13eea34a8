// Issue 26 items 1 and 2 with the real Pyroscope Node.js SDK
// (@pyroscope/nodejs, unchanged, in producer.mjs): two replicas of one app
// with identical tags, started at the same instant (START_AT) so that their
// first wall and heap uploads carry the same whole-second `from`, each
// doing busy work in a function of its own name; part of the work runs
// under the SDK's wrapWithLabels({endpoint: '/checkout'}).
//   - 0 uploads refused (no 409), every heap upload stored;
//   - the merge of the colliding second holds both replicas' samples (both
//     functions in the flame graph of SelectMergeStacktraces);
//   - the wrapWithLabels label is a series label: /api/v1/series,
//     /api/v1/labels and /api/v1/label/endpoint/values (the UI's label
//     explorer), Connect LabelNames/LabelValues/Series, and
//     SelectMergeStacktraces with {endpoint="/checkout"} in the selector
//     shows the labelled function and not the unlabelled replicas' work.
//
//   PROFD_BIN=build/profd node --test tests/e2e/pyroscope-node/replicas_labels.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, http, killAll, profdBin, qs, startProfd, tempDir } from '../lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const APP = 'pyro-replicas';

let dir, profd, ups, t0, t1;

async function connectJson(method, req) {
  const r = await http(`${profd.base}/querier.v1.QuerierService/${method}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req), timeoutMs: 60000,
  });
  assert.equal(r.status, 200, `${method}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  return r.json;
}

before(async () => {
  profdBin();
  if (!fs.existsSync(path.join(here, 'node_modules', '@pyroscope', 'nodejs'))) {
    throw new Error('@pyroscope/nodejs is not installed in tests/e2e/pyroscope-node/node_modules: run ' +
      'scripts/install-deps.sh --test (or `npm ci` in tests/e2e/pyroscope-node)');
  }
  dir = tempDir('profd-pyro-replicas-');
  profd = await startProfd({ storage: path.join(dir, 'data') });
  t0 = Math.floor(Date.now() / 1000) - 5;
  // both SDKs start 300 ms into a whole second, ~2 s from now (node's start-up)
  const startAt = (Math.floor(Date.now() / 1000) + 3) * 1000 + 300;
  const prods = ['a', 'b'].map((r) => new Proc(`replica-${r}`, process.execPath, [path.join(here, 'producer.mjs')], {
    env: {
      ...process.env, PROFD_URL: profd.base, FLUSHES: '2', FLUSH_MS: '2000', APP_NAME: APP,
      START_AT: String(startAt), REPLICA: r, LABELS: '1',
    },
    cwd: here,
  }));
  ups = [];
  for (const p of prods) {
    const ex = await p.wait(150000);
    assert.equal(ex.code, 0, `the Pyroscope SDK producer ${p.name} failed\n${p.tail()}\n${profd.tail()}`);
    ups.push(p.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)));
  }
  t1 = Math.ceil(Date.now() / 1000) + 5;
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const kindOf = (u) => (/[?&]sampleRate=/.test(u.url) ? 'wall' : 'memory');
const fromOf = (u) => Number(new URL(u.url).searchParams.get('from'));

// The (kind, from) both replicas uploaded: the collisions of this run.
function collisions() {
  const a = new Set(ups[0].map((u) => `${kindOf(u)} ${fromOf(u)}`));
  return [...new Set(ups[1].map((u) => `${kindOf(u)} ${fromOf(u)}`))].filter((k) => a.has(k));
}

test('two replicas with identical tags: uploads at the same second, none refused', () => {
  for (const [i, list] of ups.entries()) {
    assert.ok(list.length >= 4, `replica ${i} uploaded wall and heap twice: ${JSON.stringify(list)}`);
    for (const u of list) assert.ok(u.status >= 200 && u.status < 300, `${u.url}: HTTP ${u.status} ${u.body}`);
  }
  const c = collisions();
  assert.ok(c.some((k) => k.startsWith('wall ')) && c.some((k) => k.startsWith('memory ')),
    `both replicas uploaded wall and heap with one same from (the SDKs started at once): ${JSON.stringify(c)}`);
});

test('every heap upload of both replicas is stored (two at one second are both kept)', async () => {
  const r = await apiData(profd.base, '/api/v1/query_range?' +
    qs({ query: `memory{service_name="${APP}"}`, from: t0, to: t1 }));
  assert.equal(r.length, 1, JSON.stringify(r));
  const heapUploads = ups.flat().filter((u) => kindOf(u) === 'memory');
  assert.equal(r[0].timestamps.length, heapUploads.length, JSON.stringify(r[0].timestamps));
  // the second of a colliding pair sits 1 ms after the first
  for (const k of collisions().filter((x) => x.startsWith('memory '))) {
    const ms = Number(k.split(' ')[1]) * 1000;
    assert.ok(r[0].timestamps.includes(ms) && r[0].timestamps.includes(ms + 1), `${ms} and ${ms + 1} in ${r[0].timestamps}`);
  }
});

let wallType;
test('the merge of the colliding second holds both replicas\' samples (Connect SelectMergeStacktraces)', async () => {
  const pt = await connectJson('ProfileTypes', { start: t0 * 1000, end: t1 * 1000 });
  wallType = (pt.profileTypes || []).map((t) => t.ID).find((id) => id.startsWith('wall:') && /:cpu:/.test(id)) ||
    (pt.profileTypes || []).map((t) => t.ID).find((id) => id.startsWith('wall:'));
  assert.ok(wallType, JSON.stringify(pt));
  const sec = Number(collisions().find((k) => k.startsWith('wall ')).split(' ')[1]);
  const fg = await connectJson('SelectMergeStacktraces', {
    profileTypeID: wallType, labelSelector: `{service_name="${APP}"}`, start: sec * 1000, end: sec * 1000 + 999,
  });
  const names = (fg.flamegraph && fg.flamegraph.names) || [];
  for (const fn of ['profdReplicaWorkA', 'profdReplicaWorkB']) {
    assert.ok(names.some((n) => n.includes(fn)), `${fn} in the merge of second ${sec}: ${JSON.stringify(names)}`);
  }
});

test('wrapWithLabels\' label is a series label: /api/v1/series, labels, label values', async () => {
  const series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': '{endpoint="/checkout"}', start: t0, end: t1 }));
  assert.ok(series.length >= 1, 'a series selected by the sample label');
  for (const s of series) {
    assert.equal(s.service_name, APP);
    assert.equal(s.__name__, 'wall', 'only the wall profiler carries labels');
    assert.equal(s.region, 'eu-1', 'the push\'s tags stay');
  }
  const names = await apiData(profd.base, '/api/v1/labels?' + qs({ start: t0, end: t1 }));
  assert.ok(names.includes('endpoint'), JSON.stringify(names));
  const values = await apiData(profd.base, '/api/v1/label/endpoint/values?' + qs({ start: t0, end: t1 }));
  assert.deepEqual(values, ['/checkout']);
});

test('the Connect querier selects by it: LabelNames, LabelValues, Series, SelectMergeStacktraces', async () => {
  const ms = { start: t0 * 1000, end: t1 * 1000 };
  const ln = await connectJson('LabelNames', { matchers: [`{service_name="${APP}"}`], ...ms });
  assert.ok((ln.names || []).includes('endpoint'), JSON.stringify(ln));
  const lv = await connectJson('LabelValues', { name: 'endpoint', matchers: [`{service_name="${APP}"}`], ...ms });
  assert.deepEqual(lv.names, ['/checkout']);
  const se = await connectJson('Series', { matchers: [`{service_name="${APP}",endpoint="/checkout"}`], ...ms });
  assert.ok((se.labelsSet || []).length >= 1, JSON.stringify(se));
  const fg = await connectJson('SelectMergeStacktraces', {
    profileTypeID: wallType, labelSelector: `{service_name="${APP}",endpoint="/checkout"}`, ...ms,
  });
  const names = (fg.flamegraph && fg.flamegraph.names) || [];
  assert.ok(names.some((n) => n.includes('profdPyroCheckout')), `the labelled work: ${JSON.stringify(names)}`);
  for (const fn of ['profdReplicaWorkA', 'profdReplicaWorkB']) {
    assert.ok(!names.some((n) => n.includes(fn)), `${fn} ran outside wrapWithLabels: ${JSON.stringify(names)}`);
  }
  // and the rest of the wall profile is the series without the label
  const rest = await connectJson('SelectMergeStacktraces', {
    profileTypeID: wallType, labelSelector: `{service_name="${APP}",endpoint=""}`, ...ms,
  });
  const rn = (rest.flamegraph && rest.flamegraph.names) || [];
  assert.ok(rn.some((n) => n.includes('profdReplicaWorkA')), JSON.stringify(rn));
  assert.ok(!rn.some((n) => n.includes('profdPyroCheckout')), JSON.stringify(rn));
});
