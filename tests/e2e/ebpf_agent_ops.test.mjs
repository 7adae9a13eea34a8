// Issue 29's operations of profd-agent, end to end with the real agent
// (eBPF), real profd and real programs (tests/e2e/ebpf/hotspin.c built by
// clang under two names, keepme and dropme):
//   (c) --config.file relabel_configs: service_name from __meta_process_exe,
//       dropme dropped — only the kept one is stored, under the new name,
//       with no "__" label left;
//   (d) the agent's own /metrics (--web.listen-address): counters move;
//   (e) SIGHUP reloads --config.file: a new replacement renames the kept
//       program from the next upload on; a broken file is refused (logged
//       naming the file, counted, last_reload_successful 0) and the rules in
//       use keep working; the first file back, reloaded again;
//   (b) SIGKILL and restart: the stored profiles of keepme reach to within
//       the upload interval in progress at the kill (profile timestamps),
//       and go on after the restart;
//   (a) profd stopped and restarted (same storage and port): the profiles
//       the agent sampled while profd was down arrive afterwards (their
//       timestamps lie between the stop and the restart); with a tiny
//       --buffer.max-bytes the drop counter rises and the buffer gauge never
//       passes the bound.
// No assertion on a duration: waits are for events (pushes, failures,
// stored timestamps). Needs root (or CAP_BPF + CAP_PERFMON); when the kernel
// refuses the BPF program every test skips with the agent's message.
//
//   PROFD_BIN=build/profd PROFD_AGENT_BIN=build/profd-agent node --test tests/e2e/ebpf_agent_ops.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, apiData, freePort, http, killAll, profdBin, qs, run, startProfd, tempDir, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SRCDIR = path.join(here, 'ebpf');
const INTERVAL_MS = 2000;

let dir, profd, agent, agentArgs, metricsBase, cfgFile, cfgText, skipWhy = null;

function agentBin() {
  const bin = process.env.PROFD_AGENT_BIN;
  if (!bin || !fs.existsSync(bin)) {
    throw new Error(`PROFD_AGENT_BIN=${bin} does not exist (the profd-agent binary; ctest sets it; ` +
      'it is built when clang, bpftool and libbpf-dev are installed: scripts/install-deps.sh)');
  }
  return bin;
}

// the agent's /metrics as {"name{labels}": value}
async function agentMetrics(base = metricsBase) {
  const r = await http(`${base}/metrics`, { timeoutMs: 30000 });
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const m = {};
  for (const line of r.text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return m;
}

// SIGTERM; when the process has not exited after a hang guard of 120 s,
// the failure names what each of its threads waits in (kernel stacks)
async function stopOrExplain(p) {
  p.kill('SIGTERM');
  let timer;
  const hung = new Promise((resolve) => { timer = setTimeout(() => resolve('hung'), 120000); });
  const r = await Promise.race([p.exitPromise, hung]);
  clearTimeout(timer);
  if (r !== 'hung') return r;
  let stacks = '';
  for (const t of fs.readdirSync(`/proc/${p.pid}/task`)) {
    const rd = (f) => { try { return fs.readFileSync(`/proc/${p.pid}/task/${t}/${f}`, 'utf8'); } catch (e) { return `(${e.code})`; } };
    stacks += `thread ${t} ${rd('comm').trim()} wchan=${rd('wchan')}:\n${rd('stack')}\n`;
  }
  p.kill('SIGKILL');
  throw new Error(`${p.name} did not exit after SIGTERM\n${stacks}\n${p.tail()}`);
}

// starts an agent; resolves once it has done its first upload (or exited)
async function startAgent(name, args) {
  const p = new Proc(name, agentBin(), args);
  await waitFor(`${name} to start sampling or refuse`, async () =>
    p.exited || /msg="?upload/.test(p.out), 120000, 200);
  return p;
}

// stored timestamps (ms) of a service's process_cpu series
async function times(svc) {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: `process_cpu{service_name="${svc}"}`, from: '0', to: String(Math.ceil(Date.now() / 1000) + 3600),
  }));
  return data.length ? data[0].timestamps : [];
}

before(async () => {
  profdBin();
  agentBin();
  dir = tempDir('profd-ebpf-ops-');
  const keep = path.join(dir, 'keepme'), drop = path.join(dir, 'dropme');
  const r = await run('clang', ['-O0', '-g', '-fno-omit-frame-pointer', '-o', keep, path.join(SRCDIR, 'hotspin.c')]);
  assert.equal(r.code, 0, r.stderr);
  fs.copyFileSync(keep, drop);
  fs.chmodSync(drop, 0o755);
  new Proc('keepme', keep, []);
  new Proc('dropme', drop, []);

  const cfg = cfgFile = path.join(dir, 'agent.yml');
  // the last rule keeps this test's programs only: the agent sees every
  // process of the host, also another run's keepme (two make tests at once,
  // e.g. the host's and a Debian 12 chroot's)
  const here = dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  fs.writeFileSync(cfg, cfgText = [
    'relabel_configs:',
    '  - source_labels: [__meta_process_exe]',
    '    regex: .*/(keepme)',
    '    target_label: service_name',
    '    replacement: kept-$1',
    '  - source_labels: [__meta_process_exe, __meta_process_commandline]',
    '    regex: .*/dropme;.*',
    '    action: drop',
    '  - source_labels: [__meta_process_exe]',
    `    regex: '${here}/.*'`,
    '    action: keep',
    '',
  ].join('\n'));
  profd = await startProfd({ storage: path.join(dir, 'data') });
  const mport = await freePort();
  metricsBase = `http://127.0.0.1:${mport}`;
  agentArgs = [`--server=${profd.base}`, '--frequency=49', `--upload-interval=${INTERVAL_MS / 1000}s`,
    `--config.file=${cfg}`, `--web.listen-address=127.0.0.1:${mport}`, '--log.level=debug'];
  agent = await startAgent('profd-agent', agentArgs);
  if (agent.exited) {
    assert.equal(agent.exited.code, 1, `profd-agent exited ${JSON.stringify(agent.exited)}\n${agent.tail()}`);
    assert.doesNotMatch(agent.out, /profd-agent started/, `profd-agent failed after starting\n${agent.tail()}`);
    skipWhy = `the kernel refused profd-agent's BPF program or perf events: ${agent.out.trim().slice(0, 400)}`;
  }
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('relabel_configs: service_name from __meta_process_exe, dropme dropped, no "__" label stored', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await waitFor('kept-keepme stored', async () => (await times('kept-keepme')).length >= 2, 240000, 500)
    .catch((e) => { throw new Error(`${e.message}\n${agent.tail()}`); });
  const series = await apiData(profd.base, '/api/v1/series?' + qs({ 'match[]': 'process_cpu{service_name="kept-keepme"}' }));
  assert.equal(series.length, 1, JSON.stringify(series));
  assert.equal(path.basename(series[0].exe), 'keepme');
  for (const name of Object.keys(series[0])) {
    assert.ok(name === '__name__' || !name.startsWith('__'), `label ${name} kept after relabeling`);
  }
  // neither program under its own name, and nothing of dropme at all
  const names = await apiData(profd.base, '/api/v1/label/service_name/values');
  assert.ok(!names.includes('keepme'), `keepme stored under its own name: ${names}`);
  assert.ok(!names.includes('dropme'), `dropme stored: ${names}`);
  const exes = await apiData(profd.base, '/api/v1/label/exe/values');
  assert.ok(!exes.some((e) => e.endsWith('/dropme')), `a dropme profile stored: ${exes}`);
  // the merged profile of the kept one is its program's
  const top = await http(`${profd.base}/api/v1/query?` + qs({ mode: 'merge', query: 'process_cpu{service_name="kept-keepme"}',
    from: '0', to: String(Math.ceil(Date.now() / 1000) + 60), report: 'top' }));
  assert.equal(top.status, 200, top.text);
  assert.match(top.text, /hot_spin/);
  const m = await agentMetrics();
  assert.ok(m['profd_agent_profiles_dropped_total{reason="relabel"}'] >= 1, JSON.stringify(m));
});

test('/metrics of the agent: counters move', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const a = await agentMetrics();
  for (const k of ['profd_agent_samples_total', 'profd_agent_pushes_total', 'profd_agent_profiles_pushed_total',
    'profd_agent_pushed_bytes_total', 'profd_agent_uploads_total', 'profd_agent_processes_seen_total',
    'profd_agent_push_failures_total', 'profd_agent_buffer_bytes', 'profd_agent_buffer_max_bytes',
    'profd_agent_profiles_dropped_total{reason="buffer_full"}']) {
    assert.ok(k in a, `${k} missing from /metrics`);
  }
  assert.equal(a.profd_agent_buffer_max_bytes, 64 * 1024 * 1024);
  const b = await waitFor('two more pushes', async () => {
    const m = await agentMetrics();
    return m.profd_agent_pushes_total >= a.profd_agent_pushes_total + 2 ? m : null;
  }, 120000, 250);
  for (const k of ['profd_agent_samples_total', 'profd_agent_profiles_pushed_total', 'profd_agent_pushed_bytes_total',
    'profd_agent_uploads_total', 'profd_agent_processes_seen_total']) {
    assert.ok(b[k] > a[k], `${k} did not move: ${a[k]} -> ${b[k]}`);
  }
  const other = await http(`${metricsBase}/nope`);
  assert.equal(other.status, 404);
});

test('SIGHUP reloads --config.file; a broken file is refused and the rules in use go on', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const m0 = await agentMetrics();
  assert.equal(m0['profd_agent_config_reloads_total{result="success"}'], 0, JSON.stringify(m0));
  assert.equal(m0['profd_agent_config_reloads_total{result="failure"}'], 0);
  assert.equal(m0.profd_agent_config_last_reload_successful, 1);
  assert.ok(m0.profd_agent_config_last_reload_success_timestamp_seconds > 0);
  // 1. a new name for the kept program: stored under it from the next upload on
  fs.writeFileSync(cfgFile, cfgText.replace('replacement: kept-$1', 'replacement: hup-$1'));
  agent.kill('SIGHUP');
  await waitFor('the reload counted', async () =>
    (await agentMetrics())['profd_agent_config_reloads_total{result="success"}'] === 1, 60000, 200);
  await waitFor('hup-keepme stored', async () => (await times('hup-keepme')).length >= 1, 120000, 500)
    .catch((e) => { throw new Error(`${e.message}\n${agent.tail()}`); });
  assert.match(agent.out, /msg="?configuration reloaded"? file=\S*agent\.yml relabel_rules=3/);
  const m1 = await agentMetrics();
  assert.equal(m1.profd_agent_config_last_reload_successful, 1);
  assert.ok(m1.profd_agent_config_last_reload_success_timestamp_seconds >= m0.profd_agent_config_last_reload_success_timestamp_seconds);
  // 2. a broken file: refused, logged with its name and the error, counted
  fs.writeFileSync(cfgFile, cfgText.replace('action: drop', 'action: explode'));
  agent.kill('SIGHUP');
  await waitFor('the failed reload counted', async () =>
    (await agentMetrics())['profd_agent_config_reloads_total{result="failure"}'] === 1, 60000, 200);
  const failedAt = Date.now();
  const m2 = await agentMetrics();
  assert.equal(m2.profd_agent_config_last_reload_successful, 0);
  assert.equal(m2['profd_agent_config_reloads_total{result="success"}'], 1);
  assert.match(agent.out, /level=error msg="reload failed, keeping the old configuration" file=\S*agent\.yml err="[^"]*agent\.yml:\d+:\d+: [^"]*explode/);
  assert.equal(agent.exited, null, 'the agent exited on a broken file');
  // the rules in use (hup-) go on: a profile of an interval that began
  // after the refusal is stored under hup-keepme, none under kept-keepme;
  // dropme is still dropped
  await waitFor('hup-keepme stored after the refused reload', async () =>
    (await times('hup-keepme')).some((ts) => ts >= failedAt), 120000, 500)
    .catch((e) => { throw new Error(`${e.message}\n${agent.tail()}`); });
  assert.ok(!(await times('kept-keepme')).some((ts) => ts >= failedAt), 'kept-keepme stored after the rename');
  const names = await apiData(profd.base, '/api/v1/label/service_name/values');
  assert.ok(!names.includes('dropme') && !names.includes('keepme'), `${names}`);
  // 3. the first file back (the next tests use its names)
  fs.writeFileSync(cfgFile, cfgText);
  const backAt = Date.now();
  agent.kill('SIGHUP');
  await waitFor('the third reload counted', async () =>
    (await agentMetrics())['profd_agent_config_reloads_total{result="success"}'] === 2, 60000, 200);
  assert.equal((await agentMetrics()).profd_agent_config_last_reload_successful, 1);
  await waitFor('kept-keepme stored again', async () =>
    (await times('kept-keepme')).some((ts) => ts >= backAt), 120000, 500);
});

test('SIGKILL and restart: at most the upload interval in progress is lost', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  // kill right after a push was taken: the interval in progress is the loss
  const a = await agentMetrics();
  await waitFor('a push', async () => (await agentMetrics()).profd_agent_pushes_total > a.profd_agent_pushes_total, 120000, 100);
  const killedAt = Date.now();
  agent.kill('SIGKILL');
  await agent.exitPromise;
  const before = (await times('kept-keepme')).filter((ts) => ts < killedAt);
  assert.ok(before.length >= 2, `profiles before the kill: ${before}`);
  const last = before[before.length - 1];
  // a profile's timestamp is its interval's start; consecutive ones are an
  // interval apart, so the last stored profile started at most two intervals
  // before the kill (its own, then the one in progress that the kill lost);
  // one more interval of slack for a drain the busy machine ran late
  assert.ok(killedAt - last <= 3 * INTERVAL_MS,
    `last stored profile at ${last}, killed at ${killedAt}: more than the interval in progress lost\n${agent.tail()}`);
  const restartedAt = Date.now();
  agent = await startAgent('profd-agent (restarted)', agentArgs);
  assert.equal(agent.exited, null, agent.tail());
  await waitFor('profiles after the restart', async () =>
    (await times('kept-keepme')).some((ts) => ts >= restartedAt), 120000, 250);
});

test('profd stopped and restarted: what was sampled meanwhile arrives', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const a = await agentMetrics();
  const stoppedAt = Date.now();
  const port = profd.port;
  const st = await profd.stop();
  assert.equal(st.code, 0, profd.tail());
  // the agent keeps sampling and buffering: wait for two failed pushes and
  // two intervals buffered
  const down = await waitFor('push failures while profd is down', async () => {
    const m = await agentMetrics();
    return m.profd_agent_push_failures_total >= a.profd_agent_push_failures_total + 2 &&
      m.profd_agent_uploads_total >= a.profd_agent_uploads_total + 3 && m.profd_agent_buffer_bytes > 0 ? m : null;
  }, 180000, 250);
  assert.equal(down['profd_agent_profiles_dropped_total{reason="buffer_full"}'],
    a['profd_agent_profiles_dropped_total{reason="buffer_full"}'], 'dropped while far below the bound');
  const restartedAt = Date.now();
  profd = await startProfd({ storage: path.join(dir, 'data'), port });
  // profiles whose interval started while profd was down arrive
  await waitFor('profiles sampled while profd was down', async () => {
    const ts = await times('kept-keepme');
    return ts.some((x) => x > stoppedAt && x < restartedAt);
  }, 240000, 500).catch((e) => { throw new Error(`${e.message}\n${agent.tail()}`); });
  await waitFor('the buffer to empty', async () => (await agentMetrics()).profd_agent_buffer_bytes === 0, 240000, 250);
  const b = await agentMetrics();
  assert.ok(b.profd_agent_pushes_total > down.profd_agent_pushes_total);
});

test('a tiny --buffer.max-bytes with profd unreachable: the oldest are dropped and counted, the buffer stays bounded', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const nowhere = await freePort(); // nothing listens there
  const mport = await freePort();
  const base = `http://127.0.0.1:${mport}`;
  const bound = 64 * 1024;
  const small = await startAgent('profd-agent (tiny buffer)', [`--server=http://127.0.0.1:${nowhere}`, '--frequency=49',
    '--upload-interval=1s', `--buffer.max-bytes=${bound / 1024}K`, '--upload.max-bytes=16K', `--web.listen-address=127.0.0.1:${mport}`,
    '--log.level=debug']);
  assert.equal(small.exited, null, small.tail());
  let first = null, maxSeen = 0;
  await waitFor('the buffer_full drop counter to rise twice', async () => {
    const m = await agentMetrics(base);
    maxSeen = Math.max(maxSeen, m.profd_agent_buffer_bytes);
    assert.ok(m.profd_agent_buffer_bytes <= bound, `buffer ${m.profd_agent_buffer_bytes} over ${bound}`);
    const d = m['profd_agent_profiles_dropped_total{reason="buffer_full"}'];
    if (first === null && d > 0) first = d;
    return first !== null && d > first;
  }, 240000, 250).catch((e) => { throw new Error(`${e.message}\n${small.tail()}`); });
  const m = await agentMetrics(base);
  assert.equal(m.profd_agent_buffer_max_bytes, bound);
  assert.ok(m['profd_agent_dropped_bytes_total{reason="buffer_full"}'] > 0);
  assert.equal(m.profd_agent_pushes_total, 0);
  assert.ok(m.profd_agent_push_failures_total > 0);
  assert.ok(maxSeen > 0, 'nothing was ever buffered');
  // no request passes --upload.max-bytes, so the buffer holds several
  assert.ok(m.profd_agent_buffer_requests >= 1, JSON.stringify(m));
  const st = await stopOrExplain(small);
  assert.equal(st.code, 0, small.tail());
});

test('bad --config.file and --web.listen-address: exit 2 naming the file and line / the flag', async () => {
  const bad = path.join(dir, 'bad.yml');
  fs.writeFileSync(bad, 'relabel_configs:\n  - source_labels: [__meta_process_exe]\n    action: explode\n');
  let r = await run(agentBin(), [`--config.file=${bad}`]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3:13: unknown relabel action "explode"`));
  fs.writeFileSync(bad, 'relabel_configs:\n  - regex: "("\n');
  r = await run(agentBin(), [`--config.file=${bad}`]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /bad\.yml:2:12: invalid regex "\("/);
  fs.writeFileSync(bad, 'scrape_configs: []\n');
  r = await run(agentBin(), [`--config.file=${bad}`]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /bad\.yml:1:1: unknown key "scrape_configs"/);
  r = await run(agentBin(), [`--config.file=${path.join(dir, 'missing.yml')}`]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /missing\.yml: No such file or directory/);
  r = await run(agentBin(), ['--buffer.max-bytes=lots']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--buffer\.max-bytes=lots/);
  r = await run(agentBin(), ['--upload.max-bytes=12']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--upload\.max-bytes=12/);
  // checked before the BPF program is loaded
  r = await run(agentBin(), ['--web.listen-address=nohost', '--server=http://127.0.0.1:1']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--web\.listen-address=nohost/);
});
