// Issue 29 end to end: profd-agent (eBPF, every process on the host) pushes
// process_cpu profiles to profd, and profd names frames that arrive as
// addresses. Real programs, real tools:
//   - a clang -O0 -fno-omit-frame-pointer C program spinning in hot_spin()
//     (tests/e2e/ebpf/hotspin.c): named on the agent from its .symtab;
//   - the same program stripped, its .debug served by Debian's debuginfod on
//     loopback (DEBUGINFOD_URLS of profd): named by profd;
//   - a variant stripped, first shown as binary+offset, then named after
//     `profd debuginfo upload` of its .debug — the profiles stored before
//     the upload too;
//   - a clang -O2 program whose static inline mix_step() is inlined into
//     inline_caller() (tests/e2e/ebpf/inlined.c; checked with eu-addr2line
//     -i), stripped, its .debug uploaded: profd names the address with two
//     lines, mix_step above inline_caller (go tool pprof -raw, -traces, and
//     the flame graph JSON);
//   - a Go program (main.hotLoop), node --perf-basic-prof (the JS function,
//     from /tmp/perf-PID.map), dd reading /dev/zero (kernel frames, vfs_read);
//     each its own service with its own stacks;
//   - last: profd restarted with those uploaded .debug files deleted still
//     names the stored profiles from its results cache (symbols.cache).
// Answers are read with `go tool pprof -top/-traces` on profd's URLs.
// Needs root (or CAP_BPF + CAP_PERFMON); when the agent cannot load its BPF
// program or open perf events, every test skips with the agent's message.
//
//   PROFD_BIN=build/profd PROFD_AGENT_BIN=build/profd-agent node --test tests/e2e/ebpf_agent.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, freePort, goEnv, http, killAll, profdBin, qs, run, sleep, startProfd, tempDir, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SRCDIR = path.join(here, 'ebpf');

let dir, profd, agent, skipWhy = null, upBid = null, dbgdBid = null, inlBid = null;

function agentBin() {
  const bin = process.env.PROFD_AGENT_BIN;
  if (!bin || !fs.existsSync(bin)) {
    throw new Error(`PROFD_AGENT_BIN=${bin} does not exist (the profd-agent binary; ctest sets it; ` +
      'it is built when clang, bpftool and libbpf-dev are installed: scripts/install-deps.sh)');
  }
  return bin;
}

async function must(what, cmd, args, opts = {}) {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${cmd} ${args.join(' ')}\n${r.stdout}${r.stderr}`);
  return r;
}

async function buildId(file) {
  const r = await must('readelf -n', 'readelf', ['-n', file]);
  const m = r.stdout.match(/Build ID: ([0-9a-f]+)/);
  if (!m) throw new Error(`${file} has no build ID\n${r.stdout}`);
  return m[1];
}

const sel = (svc) => `process_cpu{service_name="${svc}"}`;
const mergeUrl = (svc, report) => `${profd.base}/api/v1/query?` +
  qs({ mode: 'merge', query: sel(svc), from: '0', to: String(Math.ceil(Date.now() / 1000) + 3600), report });

// `go tool pprof -traces` of a service's merged profile: [[leaf, caller, ...], ...]
async function traces(svc) {
  const r = await run('go', ['tool', 'pprof', '-traces', mergeUrl(svc, 'proto')], { env: goEnv(dir) }, 120000);
  if (r.code !== 0) throw new Error(`go tool pprof -traces for ${svc}: ${r.stderr}`);
  const out = [];
  for (const block of r.stdout.split(/^-+\+-+$/m).slice(1)) {
    // "      50ms   hot_spin" then one caller a line, indented
    const lines = block.split('\n').filter((l) => l.trim());
    if (!lines.length) continue;
    const first = lines[0].match(/^\s*\S+\s+(.*)$/);
    const fns = [first ? first[1].trim() : '', ...lines.slice(1).map((l) => l.trim())].filter(Boolean);
    if (fns.length) out.push(fns);
  }
  return out;
}

// `go tool pprof -top -flat`: the function with the most flat samples
async function topFunction(svc) {
  const r = await run('go', ['tool', 'pprof', '-top', '-nodecount=5', mergeUrl(svc, 'proto')], { env: goEnv(dir) }, 120000);
  if (r.code !== 0) throw new Error(`go tool pprof -top for ${svc}: ${r.stderr}`);
  const rows = r.stdout.split('\n').filter((l) => /^\s*\d/.test(l) && /%/.test(l));
  if (!rows.length) return { name: null, out: r.stdout };
  const cols = rows[0].trim().split(/\s+/);
  return { name: cols.slice(5).join(' '), out: r.stdout };
}

// waits until svc's merged profile has `leaf` on top (most flat samples)
// with `caller` right under it in some trace
// (ancestor: caller anywhere above leaf rather than right under it)
async function waitTop(svc, leaf, caller, ancestor = false) {
  let last = '';
  await waitFor(`${svc}: ${leaf} on top${caller ? ` called by ${caller}` : ''}`, async () => {
    const t = await topFunction(svc).catch((e) => ({ name: null, out: e.message }));
    last = t.out;
    if (t.name !== leaf && !(leaf instanceof RegExp && leaf.test(t.name || ''))) return false;
    if (!caller) return true;
    const tr = await traces(svc);
    last = JSON.stringify(tr.slice(0, 5));
    return tr.some((fns) => fns.some((f, i) => (leaf instanceof RegExp ? leaf.test(f) : f === leaf) &&
      (ancestor ? fns.indexOf(caller, i + 1) > i : fns[i + 1] === caller)));
  }, 240000, 2000).catch((e) => { throw new Error(`${e.message}\nlast answer:\n${last}\n${agent.tail()}\n${profd.tail()}`); });
}

before(async () => {
  profdBin();
  agentBin();
  dir = tempDir('profd-ebpf-');
  const cc = ['-O0', '-g', '-fno-omit-frame-pointer', '-Wl,--build-id'];
  const hot = path.join(dir, 'hotspin');
  await must('clang', 'clang', [...cc, '-o', hot, path.join(SRCDIR, 'hotspin.c')]);
  // stripped copies: one named through debuginfod, one through an upload
  const dbgDir = path.join(dir, 'debuginfod-files');
  fs.mkdirSync(dbgDir);
  const dbgd = path.join(dir, 'hotspin_dbgd');
  fs.copyFileSync(hot, dbgd);
  await must('objcopy', 'objcopy', ['--only-keep-debug', dbgd, path.join(dbgDir, 'hotspin_dbgd.debug')]);
  await must('strip', 'strip', ['--strip-all', dbgd]);
  dbgdBid = await buildId(dbgd);
  const upl = path.join(dir, 'hotspin_upl');
  await must('clang', 'clang', [...cc, '-DVARIANT=3', '-o', upl, path.join(SRCDIR, 'hotspin.c')]);
  await must('objcopy', 'objcopy', ['--only-keep-debug', upl, path.join(dir, 'hotspin_upl.debug')]);
  await must('strip', 'strip', ['--strip-all', upl]);
  upBid = await buildId(upl);
  assert.notEqual(upBid, dbgdBid);
  const nm = await run('nm', [dbgd]);
  assert.doesNotMatch(nm.stdout, /hot_spin/, 'the stripped copy still has hot_spin in a symbol table');

  // -O2 with a static inline function really inlined (eu-addr2line -i says
  // so of some address of inline_caller; there is no mix_step symbol), then
  // stripped: only profd's DWARF reading can show mix_step. -gdwarf-aranges
  // for eu-addr2line (it finds no CU without them; profd does).
  const inl = path.join(dir, 'inlined');
  await must('clang', 'clang', ['-O2', '-g', '-gdwarf-aranges', '-fno-omit-frame-pointer', '-Wl,--build-id',
    '-o', inl, path.join(SRCDIR, 'inlined.c')]);
  const syms = (await must('nm', 'nm', ['-S', inl])).stdout;
  assert.doesNotMatch(syms, /mix_step/, 'mix_step was not inlined: it has a symbol');
  const m = syms.match(/^([0-9a-f]+) ([0-9a-f]+) T inline_caller$/m);
  assert.ok(m, `no inline_caller in nm -S:\n${syms}`);
  const lo = parseInt(m[1], 16), size = parseInt(m[2], 16);
  const addrs = [];
  for (let a = lo; a < lo + size; a++) addrs.push('0x' + a.toString(16));
  const a2l = (await must('eu-addr2line', 'eu-addr2line', ['-i', '-f', '-e', inl, ...addrs])).stdout;
  assert.match(a2l, /^mix_step inlined at .*inlined\.c:\d+(:\d+)? in inline_caller$/m,
    `eu-addr2line -i shows no address of inline_caller inside mix_step:\n${a2l.slice(0, 2000)}`);
  await must('objcopy', 'objcopy', ['--only-keep-debug', inl, path.join(dir, 'inlined.debug')]);
  await must('strip', 'strip', ['--strip-all', inl]);
  inlBid = await buildId(inl);

  // Go program
  const goDir = path.join(dir, 'go');
  fs.cpSync(path.join(SRCDIR, 'hotloop'), goDir, { recursive: true });
  await must('go build', 'go', ['build', '-o', path.join(dir, 'hotloop'), '.'], { cwd: goDir, env: goEnv(dir) });

  // Debian's debuginfod on loopback, serving the .debug of hotspin_dbgd
  const dport = await freePort();
  const dgd = new Proc('debuginfod', 'debuginfod', ['-d', path.join(dir, 'debuginfod.sqlite'), '-p', String(dport),
    '-F', dbgDir, '-t', '1'], { env: { ...process.env, DEBUGINFOD_URLS: '' } });
  const durl = `http://127.0.0.1:${dport}`;
  await waitFor('debuginfod to serve the .debug file', async () => {
    if (dgd.exited) throw new Error(`debuginfod exited\n${dgd.tail()}`);
    const r = await http(`${durl}/buildid/${dbgdBid}/debuginfo`, { timeoutMs: 10000 }).catch(() => null);
    return r && r.status === 200;
  }, 120000, 500);

  process.env.DEBUGINFOD_URLS = durl;
  process.env.DEBUGINFOD_TIMEOUT = '30';
  profd = await startProfd({ storage: path.join(dir, 'data') });
  delete process.env.DEBUGINFOD_URLS;

  for (const [name, cmd, args] of [
    ['hotspin', hot, []], ['hotspin_dbgd', dbgd, []], ['hotspin_upl', upl, []],
    ['hotloop', path.join(dir, 'hotloop'), []], ['inlined', path.join(dir, 'inlined'), []],
    ['node', process.execPath, ['--perf-basic-prof', path.join(SRCDIR, 'hot.js')]],
    ['dd', 'dd', ['if=/dev/zero', 'of=/dev/null', 'bs=4096']],
  ]) new Proc(name, cmd, args);

  agent = new Proc('profd-agent', agentBin(), [`--server=${profd.base}`, '--frequency=99', '--upload-interval=2s',
    '--log.level=debug']);
  // the agent either loads (its first upload log line) or exits 1 naming why
  await waitFor('profd-agent to start sampling or refuse', async () =>
    agent.exited || /msg="?upload/.test(agent.out), 120000, 250);
  if (agent.exited) {
    assert.equal(agent.exited.code, 1, `profd-agent exited ${JSON.stringify(agent.exited)}\n${agent.tail()}`);
    // a refusal comes before "profd-agent started"; anything after it is a bug
    assert.doesNotMatch(agent.out, /profd-agent started/, `profd-agent failed after starting\n${agent.tail()}`);
    skipWhy = `the kernel refused profd-agent's BPF program or perf events: ${agent.out.trim().slice(0, 400)}`;
  }
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('hotspin (clang, frame pointers): hot_spin on top, called by spin_caller', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await waitTop('hotspin', 'hot_spin', 'spin_caller');
  const series = await http(`${profd.base}/api/v1/series?` + qs({ 'match[]': sel('hotspin') }));
  const s = series.json.data[0];
  assert.equal(s.comm, 'hotspin');
  assert.match(s.pid, /^\d+$/);
  assert.equal(path.basename(s.exe), 'hotspin');
  assert.ok(s.cgroup, JSON.stringify(s));
});

test('the stripped copy is named through debuginfod by build ID', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await waitTop('hotspin_dbgd', 'hot_spin', 'spin_caller');
  const m = await http(`${profd.base}/metrics`);
  assert.match(m.text, /profd_debuginfod_fetches_total\{result="found"\} [1-9]/);
  assert.ok(fs.existsSync(path.join(dir, 'data', 'debuginfo', dbgdBid, 'debuginfo')), 'not cached under the data dir');
});

test('a stripped program shows binary+offset, then its uploaded .debug names old profiles too', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await waitTop('hotspin_upl', /^hotspin_upl\+0x[0-9a-f]+$/);
  // profiles stored before the upload are named by it too (answers are
  // symbolized when made, the store keeps addresses)
  const up = await run(profdBin(), ['debuginfo', 'upload', `--url=${profd.base}`, path.join(dir, 'hotspin_upl.debug')]);
  assert.equal(up.code, 0, up.stderr);
  assert.match(up.stdout, new RegExp(`uploaded as ${upBid}`));
  await waitTop('hotspin_upl', 'hot_spin', 'spin_caller');
  // a file whose build ID is not the one in the URL is refused, nothing stored
  const bad = await http(`${profd.base}/api/v1/debuginfo/${'ab'.repeat(20)}`, {
    method: 'POST', body: fs.readFileSync(path.join(dir, 'hotspin_upl.debug')) });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error, /build ID is/);
  const notElf = await run(profdBin(), ['debuginfo', 'upload', `--url=${profd.base}`, path.join(SRCDIR, 'hotspin.c')]);
  assert.equal(notElf.code, 1);
  assert.match(notElf.stderr, /hotspin\.c: not an ELF file/);
});

// `go tool pprof -raw`: the locations, each "ID: ADDR M=N fn file:line
// s=0" then one "fn file:line s=0" line per further Line of the location
function rawLocations(text) {
  const locs = [];
  let inLocs = false, cur = null;
  for (const line of text.split('\n')) {
    if (/^Locations/.test(line)) { inLocs = true; continue; }
    if (inLocs && /^Mappings/.test(line)) break;
    if (!inLocs) continue;
    const head = line.match(/^\s*\d+: 0x[0-9a-f]+ M=\d+ (\S+) (\S+) s=/);
    const more = line.match(/^\s+(\S+) (\S+) s=/);
    if (head) locs.push(cur = [{ fn: head[1], at: head[2] }]);
    else if (more && cur) cur.push({ fn: more[1], at: more[2] });
  }
  return locs;
}

test('inlined frames (clang -O2, stripped, .debug uploaded): mix_step above inline_caller in one location', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const up = await run(profdBin(), ['debuginfo', 'upload', `--url=${profd.base}`, path.join(dir, 'inlined.debug')]);
  assert.equal(up.code, 0, up.stderr);
  assert.match(up.stdout, new RegExp(`uploaded as ${inlBid}`));
  // the source lines the two frames must name
  const src = fs.readFileSync(path.join(SRCDIR, 'inlined.c'), 'utf8').split('\n');
  const callLine = src.findIndex((l) => /h = mix_step\(h, i\)/.test(l)) + 1;
  const bodyFirst = src.findIndex((l) => /static inline unsigned long mix_step/.test(l)) + 1;
  const bodyLast = bodyFirst + 5;
  let last = '';
  await waitFor('a location of inlined with mix_step then inline_caller', async () => {
    const r = await run('go', ['tool', 'pprof', '-raw', mergeUrl('inlined', 'proto')], { env: goEnv(dir) }, 120000);
    last = r.stdout + r.stderr;
    if (r.code !== 0) return false;
    return rawLocations(r.stdout).some((l) => l.length === 2 && l[0].fn === 'mix_step' && l[1].fn === 'inline_caller');
  }, 240000, 2000).catch((e) => { throw new Error(`${e.message}\nlast -raw:\n${last.slice(0, 4000)}\n${profd.tail()}`); });
  const locs = rawLocations(last).filter((l) => l.length === 2 && l[0].fn === 'mix_step');
  for (const [inner, outer] of locs) {
    const [, f0, l0] = inner.at.match(/^(.*):(\d+)$/);
    const [, f1, l1] = outer.at.match(/^(.*):(\d+)$/);
    assert.match(f0, /\/inlined\.c$/);
    assert.match(f1, /\/inlined\.c$/);
    // the inner frame at a line of mix_step's body, the caller at the call
    assert.ok(Number(l0) >= bodyFirst && Number(l0) <= bodyLast, `mix_step at line ${l0}, not in ${bodyFirst}..${bodyLast}`);
    assert.equal(Number(l1), callLine, `inline_caller at line ${l1}, the call is at ${callLine}`);
  }
  // -traces: mix_step (marked inline by pprof) right above inline_caller, main under it
  const tr = await traces('inlined');
  assert.ok(tr.some((fns) => {
    const i = fns.indexOf('mix_step (inline)');
    return i >= 0 && fns[i + 1] === 'inline_caller' && fns.includes('main');
  }), JSON.stringify(tr.slice(0, 5)));
  // the flame graph (the UI's data): inline_caller's child mix_step
  const fg = await http(mergeUrl('inlined', 'flamegraph'));
  assert.equal(fg.status, 200, fg.text);
  const callers = [];
  const walk = (n) => { if (n.name === 'inline_caller') callers.push(n); (n.children || []).forEach(walk); };
  walk(fg.json.data || fg.json);
  assert.ok(callers.length, `no inline_caller node: ${fg.text.slice(0, 2000)}`);
  assert.ok(callers.some((c) => c.children.some((k) => k.name === 'mix_step' && k.value > 0)),
    JSON.stringify(callers).slice(0, 2000));
});

// Go omits the frame of a leaf function without locals (main.hotLoop), so a
// frame-pointer walk from inside it skips its direct caller (main.main):
// runtime.main is the ancestor every such stack keeps.
test('a Go program: main.hotLoop on top, its own service', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  await waitTop('hotloop', 'main.hotLoop', 'runtime.main', true);
});

test('node --perf-basic-prof: the JS function named from /tmp/perf-PID.map', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  let last = '';
  await waitFor('node: a trace through profdJsHot', async () => {
    const tr = await traces('node');
    last = JSON.stringify(tr.slice(0, 3));
    return tr.some((fns) => fns.some((f) => /profdJsHot/.test(f)));
  }, 240000, 2000).catch((e) => { throw new Error(`${e.message}\n${last}`); });
});

test('dd reading /dev/zero: kernel frames (vfs_read) under the user stack', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  let last = '';
  await waitFor('dd: a trace through vfs_read', async () => {
    const tr = await traces('dd');
    last = JSON.stringify(tr.slice(0, 3));
    return tr.some((fns) => fns.includes('vfs_read') && fns.indexOf('vfs_read') < fns.length - 1);
  }, 240000, 2000).catch((e) => { throw new Error(`${e.message}\n${last}`); });
});

test('without privileges: exit 1 naming CAP_BPF, CAP_PERFMON and kernel.perf_event_paranoid', async (t) => {
  if (process.getuid() !== 0) return t.skip('needs root to drop to another user (setpriv)');
  const r = await run('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', agentBin(),
    '--server=http://127.0.0.1:1']);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /CAP_BPF/);
  assert.match(r.stderr, /CAP_PERFMON/);
  assert.match(r.stderr, /kernel\.perf_event_paranoid/);
});

test('bad flags: exit 2 naming the flag', async () => {
  for (const [arg, what] of [['--frequency=0', /--frequency=0/], ['--upload-interval=soon', /--upload-interval=soon/],
    ['--server=ftp://x', /--server=ftp:\/\/x/], ['--bogus', /unknown argument --bogus/]]) {
    const r = await run(agentBin(), [arg]);
    assert.equal(r.code, 2, `${arg}: ${r.stderr}`);
    assert.match(r.stderr, what);
  }
});

// Issue 29 item 2: answers are cached per (build ID, address) on disk
// (STORAGE/debuginfo/BUILD_ID/symbols.cache). profd restarted with the
// uploaded .debug files deleted still names the stored profiles — inlined
// frames too — from the cache, and counts the hits.
test('a restarted profd names old profiles from symbols.cache, the uploaded .debug files deleted', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const storage = path.join(dir, 'data');
  agent.kill('SIGTERM'); // nothing new stored from here: every stored address gets asked below
  await agent.wait(60000);
  const restart = async (meanwhile = () => {}) => {
    profd.kill('SIGTERM');
    await profd.wait(60000);
    meanwhile();
    profd = await startProfd({ storage });
  };
  await restart();
  // every address stored so far named (and kept) while the .debug files are there
  await waitTop('hotspin_upl', 'hot_spin', 'spin_caller');
  assert.ok((await traces('inlined')).some((fns) => fns.includes('mix_step (inline)')));
  for (const bid of [upBid, inlBid]) {
    assert.ok(fs.existsSync(path.join(storage, 'debuginfo', bid, 'symbols.cache')), `no symbols.cache for ${bid}`);
  }
  await restart(() => {
    for (const bid of [upBid, inlBid]) fs.rmSync(path.join(storage, 'debuginfo', bid, 'debuginfo'));
  });
  await waitTop('hotspin_upl', 'hot_spin', 'spin_caller');
  const tr = await traces('inlined');
  assert.ok(tr.some((fns) => {
    const i = fns.indexOf('mix_step (inline)');
    return i >= 0 && fns[i + 1] === 'inline_caller';
  }), JSON.stringify(tr.slice(0, 5)));
  const m = await http(`${profd.base}/metrics`);
  const hits = m.text.match(/^profd_symbolize_cache_lookups_total\{result="hit"\} (\S+)$/m);
  assert.ok(hits && Number(hits[1]) > 0, `no cache hits counted:\n${m.text.split('\n').filter((l) => /symbolize/.test(l)).join('\n')}`);
});
