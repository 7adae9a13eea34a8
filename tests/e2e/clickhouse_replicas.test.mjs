// Issue 35 item 4 (replicas): profd on ClickHouse with --clickhouse.replicated.
//
// One ZooKeeper (Debian's `zookeeper` 3.8, standalone) and two real
// clickhouse-server 18.16 processes — the two replicas of the one shard of
// cluster `profd` (docs/clickhouse.md#replicas' config.xml) — on free
// loopback ports, data dirs written here. profd (both URLs, the first one
// the replica it uses) takes real pushes from 4 pushers (profefe's API, the
// shared testdata's Go CPU profiles); replica A is SIGKILLed mid-way, then:
//   - 0 pushes refused: every push answers 200 (profd fails over to B);
//     the kill comes right after A wrote a batch's profile rows and before
//     profd heard so (a proxy in front of A drops the answer): profd sends
//     that INSERT again, to B, and ClickHouse's deduplication makes it land
//     once;
//   - reads answer while A is down (query_range, a merge), every profile
//     pushed after the kill among them;
//   - A restarted catches up from B (its local tables hold what B's hold);
//   - every acknowledged profile readable, through profd on B and through a
//     profd on A alone: the timestamps are exactly the acknowledged set (0
//     lost, 0 duplicates) and the merge's totals (summed from the samples
//     rows) equal the sum of the acknowledged profiles' totals (a samples
//     block written twice would add to it).
// Skipped (exit 77) where clickhouse-server, zookeeper or java is missing:
// `scripts/install-deps.sh --test` installs them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  Proc, SRC, TESTDATA, apiData, freePort, http, killAll, profdBin, qs, startProfd, tempDir, waitFor,
} from './lib.mjs';
import { CH_BIN, chPorts, chQuery, startClickHouse } from './ch.mjs';

const ZK_JAR = '/usr/share/java/zookeeper.jar';
const JAVA = '/usr/bin/java';
if (!CH_BIN || !fs.existsSync(ZK_JAR) || !fs.existsSync(JAVA)) {
  console.log('SKIP: needs clickhouse-server, zookeeper and java (Debian 12: apt-get install ' +
    'clickhouse-server zookeeper, or scripts/install-deps.sh --test)');
  process.exit(77);
}

const dir = tempDir('pd-chrep-');
after(async () => {
  await killAll();
  if (!process.env.PD_KEEP) fs.rmSync(dir, { recursive: true, force: true });
});

/* ---------------------------------------------------------------- ZooKeeper */

async function startZooKeeper(port) {
  const d = path.join(dir, 'zk');
  fs.mkdirSync(path.join(d, 'data'), { recursive: true });
  // tickTime 500 ms: sessions may be as short as 1 s (2 ticks), so the
  // killed replica's session (ClickHouse's session_timeout_ms below) ends
  // within seconds
  fs.writeFileSync(path.join(d, 'zoo.cfg'), `tickTime=500
dataDir=${d}/data
clientPort=${port}
clientPortAddress=127.0.0.1
admin.enableServer=false
maxSessionTimeout=60000
`);
  const cp = [ZK_JAR, '/usr/share/java/slf4j-api.jar', '/usr/share/java/slf4j-nop.jar']
    .filter((f) => fs.existsSync(f)).join(':');
  const p = new Proc('zookeeper', 'nice', [JAVA, '-Xmx256m', '-cp', cp,
    'org.apache.zookeeper.server.ZooKeeperServerMain', path.join(d, 'zoo.cfg')], { cwd: d });
  p.port = port;
  return p;
}

/* ---------------------------------------------------------------- ClickHouse */

// The production layout's config.xml lines as docs/clickhouse.md#replicas
// gives them (the xml block after `<!-- replicas: config.xml -->`), for
// replica `name` ('a' or 'b'; the docs' ch-a, ch-b) of the one shard whose
// replicas listen on tcp ports `replicas`: the docs' hosts and ports become
// loopback ones, nothing else changes (each replacement must apply: the
// docs and this test cannot drift apart).
function docConfig(name, replicas, zkPort) {
  const md = fs.readFileSync(path.join(SRC, 'docs', 'clickhouse.md'), 'utf8');
  const m = /<!-- replicas: config\.xml -->\n```xml\n([\s\S]*?)\n```/.exec(md);
  assert.ok(m, 'docs/clickhouse.md has the replicas config block');
  let xml = m[1];
  const sub = (from, to) => {
    assert.ok(xml.includes(from), `docs/clickhouse.md's replicas config has ${from}`);
    xml = xml.split(from).join(to);
  };
  sub('<host>zk1</host><port>2181</port>', `<host>127.0.0.1</host><port>${zkPort}</port>`);
  sub('<replica>ch-a</replica></macros>', `<replica>ch-${name}</replica></macros>`);
  sub('<interserver_http_host>ch-a</interserver_http_host>', '<interserver_http_host>127.0.0.1</interserver_http_host>');
  sub('<host>ch-a</host><port>9000</port>', `<host>127.0.0.1</host><port>${replicas[0]}</port>`);
  sub('<host>ch-b</host><port>9000</port>', `<host>127.0.0.1</host><port>${replicas[1]}</port>`);
  return xml;
}

// Replica `name` of shard 01 of cluster profd, whose replicas are `replicas`
// (tcp ports): the config of docs/clickhouse.md#replicas.
function startReplica(name, ports, replicas, zkPort) {
  return startClickHouse(dir, name, ports, { config: docConfig(name, replicas, zkPort) });
}

const ports = chPorts;

const zk = await startZooKeeper(await freePort());
const pA = await ports();
const pB = await ports();
const replicas = [pA.tcp, pB.tcp];
let chA = await startReplica('a', pA, replicas, zk.port);
const chB = await startReplica('b', pB, replicas, zk.port);
// ClickHouse connects to ZooKeeper lazily: wait until both see it
for (const ch of [chA, chB]) {
  await waitFor(`${ch.name} to reach ZooKeeper`, async () => {
    if (zk.exited) throw new Error(`zookeeper exited\n${zk.tail()}`);
    return chQuery(ch, "SELECT count() FROM system.zookeeper WHERE path = '/'").then(() => true, () => false);
  }, 60000, 500);
}

// profd reaches replica A through this TCP proxy. Armed, it lets the next `INSERT INTO profiles_v4` reach A
// and, when A answers, drops the answer and closes profd's connection, then
// calls onCut (which kills A): the rows are on A, profd does not know it —
// the INSERT must be sent again (to B) and land once.
function cutProxy(port) {
  const px = { armed: false, cut: 0, onCut: null };
  px.server = net.createServer((client) => {
    const up = net.connect(port, '127.0.0.1');
    let insert = false;
    client.on('data', (d) => {
      // profd keeps its connections: one carries request after request, and
      // each request's first chunk (request line and headers, one write of
      // curl's) names its statement
      const head = d.toString('latin1', 0, Math.min(d.length, 4096));
      if (/^(POST|GET) /.test(head)) insert = /^POST [^ ]*query=INSERT%20INTO%20profiles_v4/.test(head);
      up.write(d);
    });
    up.on('data', (d) => {
      if (px.armed && insert) {
        px.armed = false;
        px.cut++;
        client.destroy();
        up.destroy();
        if (px.onCut) px.onCut();
        return;
      }
      client.write(d);
    });
    up.on('end', () => client.end());
    client.on('end', () => up.end());
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
  });
  return new Promise((resolve) => px.server.listen(0, '127.0.0.1', () => {
    px.url = `http://127.0.0.1:${px.server.address().port}`;
    resolve(px);
  }));
}
const proxyA = await cutProxy(pA.http);
after(() => proxyA.server.close());

const chArgs = (urls, extra = []) => ['--storage.backend=clickhouse', ...urls.map((u) => `--clickhouse.url=${u}`),
  '--clickhouse.database=profd', '--clickhouse.cluster=profd', '--clickhouse.replicated', ...extra];

/* ---------------------------------------------------------------- data */

const NOW = Date.now();
const T0 = NOW - 3600 * 1000;
const FROM = (T0 - 60000) / 1000;
const TO = (NOW + 1000) / 1000;
const SERIES = path.join(TESTDATA, 'pprof', 'go-demo-series');
const FILES = fs.readdirSync(SERIES).filter((f) => /^cpu-\d+\.pb\.gz$/.test(f)).sort()
  .map((f) => fs.readFileSync(path.join(SERIES, f)));
assert.ok(FILES.length >= 10, `real CPU profiles in ${SERIES}`);

const PUSHERS = 4;
const PER_PUSHER = 40;
const KILL_AFTER = 50; // acknowledged pushes before replica A is killed

async function push(profd, k, i) {
  const at = T0 + i * 1000 + k; // one series per pusher, a distinct ms each
  const params = { service: 'rep', type: 'cpu', instance_id: `p${k}`, created_at: new Date(at).toISOString() };
  const r = await http(`${profd.base}/api/0/profiles?${qs(params)}`,
    { method: 'POST', body: FILES[(i + k) % FILES.length], timeoutMs: 180000 });
  return { k, i, at, status: r.status, text: r.text };
}

// Every point of every series of `rep` as "instance ts" -> totals[0].
async function points(profd) {
  const d = await apiData(profd.base, '/api/v1/query_range?' + qs({ query: 'cpu{service="rep"}', from: FROM, to: TO }));
  const out = new Map();
  for (const s of d) {
    const inst = s.labels.instance_id;
    s.timestamps.forEach((ts, j) => {
      const key = `${inst} ${ts}`;
      assert.ok(!out.has(key), `one point per (series, time): ${key} twice`);
      out.set(key, s.totals[j][0]);
    });
  }
  return out;
}

async function mergeTotal(profd) {
  const d = await apiData(profd.base, '/api/v1/query?' + qs({ mode: 'merge', query: 'cpu{service="rep"}', from: FROM, to: TO, report: 'meta' }));
  return d.totals ? d.totals[0] : d;
}

test('two replicas of one shard: one killed under 4 pushers loses no push, no read', async () => {
  const profd = await startProfd({ storage: path.join(dir, 'unused'), name: 'profd',
    extraArgs: [...chArgs([proxyA.url, chB.url]), '--web.threads=8'] });
  const engines = await chQuery(chA, "SELECT name, engine FROM system.tables WHERE database = 'profd' AND (name LIKE '%v3%' OR name LIKE '%v4%' OR name LIKE 'stack_samples%' OR name LIKE 'locations%') ORDER BY name");
  for (const t of ['profiles_v3_local', 'profiles_v4_local', 'samples_v3_local', 'stack_samples_v1_local', 'stacks_v3_local', 'locations_v1_local', 'series_v3_local', 'series_index_v3_local'])
    assert.match(engines, new RegExp(`${t}\\tReplicated`), `${t} is replicated:\n${engines}`);
  assert.match(engines, /profiles_v4\tDistributed/);

  const results = [];
  let acked = 0;
  let killedAt = null; // the index of the kill among the pushes started
  let started = 0;
  const killed = (async () => {
    await waitFor(`${KILL_AFTER} acknowledged pushes`, async () => acked >= KILL_AFTER, 600000, 20);
    // the next profiles INSERT lands on A, its answer is lost, A is killed
    const cut = new Promise((resolve) => { proxyA.onCut = resolve; });
    proxyA.armed = true;
    await cut;
    killedAt = started;
    chA.kill('SIGKILL');
    await chA.wait(60000);
  })();
  await Promise.all([...Array(PUSHERS).keys()].map(async (k) => {
    for (let i = 0; i < PER_PUSHER; i++) {
      const order = started++;
      const r = await push(profd, k, i);
      r.afterKill = killedAt !== null && order >= killedAt;
      results.push(r);
      if (r.status === 200) acked++;
    }
  }));
  await killed;
  const refused = results.filter((r) => r.status !== 200);
  console.log(`pushes: ${results.length}, acknowledged ${acked}, refused ${refused.length}, ` +
    `started after the kill ${results.filter((r) => r.afterKill).length}`);
  assert.equal(refused.length, 0, `0 pushes refused with a replica down: ${refused.slice(0, 3).map((r) => `${r.status} ${r.text.slice(0, 300)}`).join('\n')}`);
  assert.ok(results.some((r) => r.afterKill), 'pushes went on after the kill');
  assert.equal(proxyA.cut, 1, 'one INSERT INTO profiles_v4 reached A and lost its answer');
  // profd was on A (its first URL): the kill cost it failed attempts, then B took over
  const metrics = (await http(`${profd.base}/metrics`)).text;
  const errs = Number((/^profd_clickhouse_errors_total (\S+)/m.exec(metrics) || [])[1]);
  assert.ok(errs >= 1, `the failover is counted in profd_clickhouse_errors_total: ${errs}`);
  console.log(`profd_clickhouse_errors_total ${errs}`);

  // reads answer while A is down; every push started after the kill is there
  const down = await points(profd);
  for (const r of results.filter((x) => x.afterKill))
    assert.ok(down.has(`p${r.k} ${r.at}`), `pushed after the kill, readable with A down: p${r.k} ${r.at}`);
  const mergeDown = await http(`${profd.base}/api/v1/query?` + qs({ mode: 'merge', query: 'cpu{service="rep"}', from: FROM, to: TO, report: 'top', limit: 5 }), { timeoutMs: 120000 });
  assert.equal(mergeDown.status, 200, `a merge answers with A down: ${mergeDown.text.slice(0, 300)}`);
  console.log(`with A down: ${down.size} of ${acked} acknowledged readable`);

  // A returns (same data dir and ports) and catches up from B
  chA = await startReplica('a', pA, replicas, zk.port);
  const local = async (ch, t) => Number(await chQuery(ch, `SELECT count() FROM profd.${t}_local`));
  // caught up: both replicas hold one profiles row per acknowledged push
  // (equal counts alone can be a moment of a fetch still under way: B
  // fetches from A the part whose answer was cut), then equal samples rows
  const nAcked = results.filter((r) => r.status === 200).length;
  await waitFor('both replicas to hold every acknowledged profile', async () =>
    (await local(chA, 'profiles_v4')) === nAcked && (await local(chB, 'profiles_v4')) === nAcked, 180000, 500);
  await waitFor('replica a to catch up on stack_samples_v1', async () =>
    (await local(chA, 'stack_samples_v1')) === (await local(chB, 'stack_samples_v1')), 180000, 500);
  const nProfiles = await local(chB, 'profiles_v4');
  console.log(`after A returned: profiles_v4_local a=${await local(chA, 'profiles_v4')} b=${nProfiles}, ` +
    `stack_samples_v1_local a=${await local(chA, 'stack_samples_v1')} b=${await local(chB, 'stack_samples_v1')}`);

  // every acknowledged profile readable, once: through profd (B) and a profd on A alone
  const readerA = await startProfd({ storage: path.join(dir, 'unused2'), name: 'profd-a', extraArgs: chArgs([chA.url]) });
  const want = new Set(results.filter((r) => r.status === 200).map((r) => `p${r.k} ${r.at}`));
  for (const reader of [profd, readerA]) {
    const got = await points(reader);
    const lost = [...want].filter((k) => !got.has(k));
    const extra = [...got.keys()].filter((k) => !want.has(k));
    assert.equal(lost.length, 0, `${reader.name}: acknowledged and lost: ${lost.slice(0, 5)}`);
    assert.equal(extra.length, 0, `${reader.name}: stored but never acknowledged: ${extra.slice(0, 5)}`);
    const sum = [...got.values()].reduce((a, b) => a + b, 0);
    const merged = await mergeTotal(reader);
    assert.equal(merged, sum, `${reader.name}: the merge of the samples rows equals the acknowledged profiles' totals (no block twice)`);
    console.log(`${reader.name}: ${got.size} profiles = ${want.size} acknowledged; merge total ${merged} = sum of totals ${sum}`);
  }
  assert.equal(nProfiles, want.size, 'one profiles row per acknowledged push on each replica');

  // the flag and the tables must agree: without --clickhouse.replicated,
  // profd refuses this database naming the flag (a later migration would
  // add unreplicated tables)
  const bare = chArgs([chB.url]).filter((a) => a !== '--clickhouse.replicated');
  const wrong = new Proc('profd-unreplicated', profdBin(), ['serve', `--storage.path=${path.join(dir, 'unused3')}`,
    `--web.listen-address=127.0.0.1:${await freePort()}`, ...bare]);
  const ex = await wrong.wait(60000);
  assert.notEqual(ex.code, 0, 'profd without --clickhouse.replicated on replicated tables exits');
  assert.match(wrong.out, /is Replicated\w*MergeTree: start profd with --clickhouse.replicated/, wrong.tail());
  await readerA.stop();
  await profd.stop();
});
