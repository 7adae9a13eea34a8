// Issue 33 items 2 and 5, through the real binary:
// - `profd --version` in Prometheus' layout, with the build's own facts (the
//   VERSION file, the source's git commit and branch when it is a checkout),
//   and the same facts in profd_build_info on /metrics,
//   /api/v1/status/buildinfo and profefe's /api/0/version;
// - every command and subcommand listed in `profd --help` and taking --help
//   and -h (usage on stdout, exit 0); an unknown command is one line naming it
//   and pointing to --help (exit 2);
// - `profd tsdb import` refuses a store a running profd holds (exit 1, the
//   lock file named; nothing written) and imports once it stopped;
// - `tsdb import` types profiles as `profd push` does (Go's block and mutex
//   profiles, alike but for the file name).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  SRC, TESTDATA, profdBin, tempDir, run, startProfd, apiData, http, killAll, qs,
} from './lib.mjs';

after(killAll);

const bin = profdBin();
const GO = path.join(TESTDATA, 'pprof', 'go-demo-once');

// The build facts the binary must report, found here independently of it.
function expectedBuild() {
  const version = fs.readFileSync(path.join(SRC, 'VERSION'), 'utf8').split('\n')[0].trim();
  return { version };
}

async function gitFact(args) {
  const r = await run('git', ['-C', SRC, ...args]);
  if (r.code !== 0) return null;
  // only when SRC is the top of its own checkout (as cmake/buildinfo.cmake)
  const top = await run('git', ['-C', SRC, 'rev-parse', '--show-toplevel']);
  if (top.code !== 0 || fs.realpathSync(top.stdout.trim()) !== fs.realpathSync(SRC)) return null;
  return r.stdout.trim();
}

function parseVersion(text) {
  const lines = text.split('\n');
  const m = /^profd, version (\S+) \(branch: (.*), revision: (.*)\)$/.exec(lines[0]);
  assert.ok(m, `first line in Prometheus' layout: ${lines[0]}`);
  const field = (name) => {
    const l = lines.find((x) => x.startsWith(`  ${name}:`));
    assert.ok(l, `a "${name}:" line in:\n${text}`);
    return l.slice(name.length + 3).trim();
  };
  return {
    version: m[1], branch: m[2], revision: m[3],
    buildUser: field('build user'), buildDate: field('build date'),
    compiler: field('compiler'), platform: field('platform'),
  };
}

test('--version: Prometheus layout, facts of this build; the same in /metrics, buildinfo and /api/0/version', async () => {
  const r = await run(bin, ['--version']);
  assert.equal(r.code, 0, r.stderr);
  const v = parseVersion(r.stdout);
  const exp = expectedBuild();
  assert.equal(v.version, exp.version, 'the VERSION file');
  const head = await gitFact(['rev-parse', 'HEAD']);
  if (head) {
    // built from this checkout: the commit at build time (HEAD unless a
    // commit came after the build, which ctest's build step rules out)
    assert.match(v.revision, /^[0-9a-f]{40}$/);
    const known = await run('git', ['-C', SRC, 'cat-file', '-e', `${v.revision}^{commit}`]);
    assert.equal(known.code, 0, `revision ${v.revision} is a commit of ${SRC}`);
    const branch = await gitFact(['rev-parse', '--abbrev-ref', 'HEAD']);
    assert.equal(v.branch, branch);
  } else {
    assert.equal(v.revision, 'unknown');
  }
  assert.match(v.buildDate, /^\d{8}-\d{2}:\d{2}:\d{2}$/, 'Prometheus\' 20060102-15:04:05');
  const [, y, mo, d] = /^(\d{4})(\d{2})(\d{2})/.exec(v.buildDate);
  const built = Date.UTC(+y, +mo - 1, +d);
  assert.ok(!process.env.SOURCE_DATE_EPOCH ? built <= Date.now() && built > Date.UTC(2020, 0, 1) : true,
    `build date ${v.buildDate} is a plausible past day`);
  assert.match(v.compiler, /^(gcc|clang) \d+\.\d+/);
  assert.match(v.platform, /^linux\/\w+$/);
  assert.ok(v.buildUser.length > 0);

  const storage = tempDir('profd-cli-ver-');
  const p = await startProfd({ storage });
  try {
    const bi = await apiData(p.base, '/api/v1/status/buildinfo');
    assert.deepEqual(bi, {
      version: v.version, revision: v.revision, branch: v.branch, buildUser: v.buildUser,
      buildDate: v.buildDate, compiler: v.compiler, platform: v.platform,
    });
    const m = await http(`${p.base}/metrics`);
    const lines = m.text.split('\n').filter((l) => l.startsWith('profd_build_info{'));
    assert.equal(lines.length, 1, m.text.slice(0, 2000));
    const labels = Object.fromEntries([...lines[0].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    assert.deepEqual(labels, {
      branch: v.branch, compiler: v.compiler, platform: v.platform, revision: v.revision, version: v.version,
    });
    assert.match(lines[0], /\} 1$/);
    assert.match(m.text, /# TYPE profd_build_info gauge/);
    const pv = await http(`${p.base}/api/0/version`);
    assert.equal(pv.status, 200);
    assert.deepEqual(pv.json.body, { version: v.version, commit: v.revision, build_time: v.buildDate });
  } finally {
    await p.stop();
  }
});

// Every command profd has (main.c, tsdb_cli.c); a new one must be added here
// and to `profd --help`.
const COMMANDS = [
  ['serve'], ['push'], ['convert'], ['check', 'config'], ['check', 'web-config'],
  ['tsdb', 'import'], ['tsdb', 'analyze'], ['tsdb', 'check'], ['tsdb', 'repair'],
];

test('every command is listed in --help and takes --help and -h', async () => {
  const top = await run(bin, ['--help']);
  assert.equal(top.code, 0);
  assert.equal(top.stderr, '');
  for (const c of COMMANDS) {
    assert.match(top.stdout, new RegExp(`^  ${c.join(' ')}\\s{2,}\\S`, 'm'), `"${c.join(' ')}" in profd --help`);
  }
  for (const c of [[], ['check'], ['tsdb'], ...COMMANDS]) {
    for (const h of ['--help', '-h']) {
      const r = await run(bin, [...c, h]);
      const what = `profd ${[...c, h].join(' ')}`;
      assert.equal(r.code, 0, `${what}: exit ${r.code}, stderr ${r.stderr}`);
      assert.equal(r.stderr, '', `${what}: nothing on stderr`);
      const name = c[0] === 'serve' || c.length === 0 ? 'profd' : `profd ${c.join(' ')}`;
      assert.ok(r.stdout.includes(`usage: ${name}`), `${what}: usage on stdout:\n${r.stdout}`);
    }
  }
  // --help after other arguments too
  const late = await run(bin, ['tsdb', 'import', '--storage.path=/nonexistent', '--help']);
  assert.equal(late.code, 0, late.stderr);
  assert.ok(!fs.existsSync('/nonexistent'));
});

test('an unknown command is one line naming it and pointing to --help (exit 2)', async () => {
  for (const [args, hint] of [
    [['frobnicate'], "'profd --help'"],
    [['tsdb', 'frobnicate'], "'profd tsdb --help'"],
    [['check', 'frobnicate'], "'profd check --help'"],
  ]) {
    const r = await run(bin, args);
    assert.equal(r.code, 2, `profd ${args.join(' ')}`);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, `one line: ${r.stderr}`);
    assert.ok(lines[0].includes('"frobnicate"') && lines[0].includes(hint), lines[0]);
  }
});

function copyAs(dir, from, name) {
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(GO, from), path.join(dir, name));
  return path.join(dir, name);
}

async function seriesNames(base, match) {
  const data = await apiData(base, `/api/v1/series?${qs({ 'match[]': match })}`);
  return data.map((s) => s.__name__).sort();
}

test('tsdb import refuses a store a running profd holds; types profiles as push', async () => {
  const storage = tempDir('profd-cli-lock-');
  const files = tempDir('profd-cli-files-');
  // Go's block and mutex profiles (same sample and period types), named as
  // net/http/pprof names them; a heap profile as control
  copyAs(files, 'block.pb.gz', 'block.pb.gz');
  copyAs(files, 'mutex.pb.gz', 'mutex.pb.gz');
  copyAs(files, 'heap.pb.gz', 'heap.pb.gz');
  // the testdata profiles are old: a retention that keeps them
  const keep = ['--storage.retention.time=100y'];
  const p = await startProfd({ storage, extraArgs: keep });
  let pushed;
  try {
    const before = fs.readdirSync(storage).sort();
    const r = await run(bin, ['tsdb', 'import', `--storage.path=${storage}`, '--storage.retention.time=100y',
      '--label', 'job=imported', files]);
    assert.equal(r.code, 1, `import into a running server's store: ${r.stdout}${r.stderr}`);
    assert.ok(r.stderr.includes(path.join(storage, 'lock')), `names the lock file: ${r.stderr}`);
    assert.match(r.stderr, /in use/);
    assert.deepEqual(fs.readdirSync(storage).sort(), before, 'nothing written into the store');
    // the same files pushed: the types push gives them
    const push = await run(bin, ['push', `--url=${p.base}`, '--service=pushed', ...['block', 'mutex', 'heap'].map((t) => path.join(files, `${t}.pb.gz`))]);
    assert.equal(push.code, 0, push.stdout + push.stderr);
    pushed = await seriesNames(p.base, '{service="pushed"}');
  } finally {
    await p.stop();
  }
  assert.deepEqual(pushed, ['block', 'heap', 'mutex']);
  const r = await run(bin, ['tsdb', 'import', `--storage.path=${storage}`, '--storage.retention.time=100y',
    '--label', 'job=imported', files]);
  assert.equal(r.code, 0, `import once profd stopped: ${r.stdout}${r.stderr}`);
  const p2 = await startProfd({ storage, extraArgs: keep });
  try {
    assert.deepEqual(await seriesNames(p2.base, '{job="imported"}'), pushed, 'import types as push');
  } finally {
    await p2.stop();
  }
});
