// Issue 31 item 7, the source view over --ui.source-dir: a real Go program
// (tests/e2e/source/goapp, Debian's Go 1.19, net/http/pprof) scraped by
// profd, its source copied to another directory than the one it was built
// in, profd told where with a PREFIX=DIR mapping. GET /api/v1/source:
//   - main.hotLines: the file from the mapped directory, the HOT line with
//     the largest self, per-line flat values equal to `go tool pprof -list`
//     on the same merged profile;
//   - main.escapeUp, whose recorded file is ../../../../etc/passwd (a //line
//     directive), and main.escapeLink, whose file is a symlink to
//     /etc/passwd inside a source dir: 404, never a byte of /etc/passwd;
//   - bad parameters: 400 naming each, counted in
//     profd_rejected_input_total{reason="query_bad_param"}.
//
//   PROFD_BIN=build/profd node --test tests/e2e/source_dirs.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Proc, freePort, goEnv, http, killAll, profdBin, qs, run, startProfd, tempDir, waitFor } from './lib.mjs';
import { SOURCE_DIR } from './source_lib.mjs';

let dir, profd, app, buildDir, mirror, linkDir, to;
const SEL = 'cpu{job="srcapp"}';
const params = (fn, extra = {}) => ({ query: SEL, mode: 'merge', from: '0', to: String(to), function: fn, ...extra });
const url = (fn, extra = {}) => `${profd.base}/api/v1/source?` + qs(params(fn, extra));

before(async () => {
  profdBin();
  dir = tempDir('profd-srcdir-');
  // built in one place, its source mirrored in another
  buildDir = path.join(dir, 'build', 'srcapp');
  fs.cpSync(path.join(SOURCE_DIR, 'goapp'), buildDir, { recursive: true });
  const bin = path.join(dir, 'srcapp');
  const b = await run('go', ['build', '-o', bin, '.'], { cwd: buildDir, env: goEnv(dir) }, 180000);
  assert.equal(b.code, 0, `go build\n${b.stdout}${b.stderr}`);
  mirror = path.join(dir, 'mirror', 'srcapp');
  fs.cpSync(buildDir, mirror, { recursive: true });
  // the built tree goes: only the mirror has the source now
  fs.rmSync(path.join(dir, 'build'), { recursive: true, force: true });
  // a second dir with a symlink out of it, under the name escapeLink's frames carry
  linkDir = path.join(dir, 'links');
  fs.mkdirSync(linkDir);
  fs.symlinkSync('/etc/passwd', path.join(linkDir, 'linked.go'));

  const port = await freePort();
  app = new Proc('srcapp', bin, ['-listen', `127.0.0.1:${port}`]);
  await waitFor('srcapp to serve /debug/pprof/', async () => {
    if (app.exited) throw new Error(`srcapp exited\n${app.tail()}`);
    const r = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 10000 }).catch(() => null);
    return r && r.status === 200;
  }, 60000, 200);
  const cfg = path.join(dir, 'profd.yml');
  fs.writeFileSync(cfg, `global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
  - job_name: srcapp
    profiling_config:
      pprof_config:
        cpu: {enabled: true, seconds: 1}
${['allocs', 'block', 'goroutine', 'heap', 'mutex', 'threadcreate'].map((t) => `        ${t}: {enabled: false}`).join('\n')}
    static_configs:
      - targets: ["127.0.0.1:${port}"]
`);
  profd = await startProfd({ storage: path.join(dir, 'data'), config: cfg,
    extraArgs: [`--ui.source-dir=${buildDir}=${mirror}`, `--ui.source-dir=${linkDir}`] });
  // enough CPU profiles of every function, then a fixed window for the rest
  // (the window the checks below use is the one that satisfied this: a
  // later, shorter one could leave out the profile that made the second)
  await waitFor('main.hotLines (1 s of CPU), escapeUp and escapeLink in the profiles', async () => {
    const t = Math.floor(Date.now() / 1000) - 1;
    const r = await http(`${profd.base}/api/v1/query?` + qs({ query: SEL, mode: 'merge', from: '0', to: String(t), report: 'top', limit: '0' }));
    if (r.status !== 200) return false;
    const rows = r.json.data.rows;
    const flat = (fn) => (rows.find((x) => x.function === fn) || { flat: 0 }).flat;
    if (!(flat('main.hotLines') >= 1e9 && flat('main.escapeUp') > 0 && flat('main.escapeLink') > 0)) return false;
    to = t;
    return true;
  }, 300000, 2000);
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

// `go tool pprof -list=RE URL`: {line: flat ns} of the listed function
async function pprofList(fn) {
  const u = `${profd.base}/api/v1/query?` + qs({ query: SEL, mode: 'merge', from: '0', to: String(to), report: 'proto' });
  // pprof's own mapping of a build path to a source tree: -trim_path + -source_path
  const r = await run('go', ['tool', 'pprof', `-trim_path=${buildDir}`, `-source_path=${mirror}`,
    `-list=^${fn.replace(/\./g, '\\.')}$`, u], { env: goEnv(dir) }, 120000);
  assert.equal(r.code, 0, r.stderr);
  const unit = { ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9, mins: 60e9, hrs: 3600e9 };
  const out = {};
  for (const l of r.stdout.split('\n')) {
    const m = l.match(/^\s*(\.|[\d.]+(?:ns|us|µs|ms|s|mins|hrs))\s+(\.|[\d.]+(?:ns|us|µs|ms|s|mins|hrs))\s+(\d+):/);
    if (!m || m[1] === '.') continue;
    const v = m[1].match(/^([\d.]+)(.*)$/);
    out[+m[3]] = Math.round(parseFloat(v[1]) * unit[v[2]]);
  }
  return { out, text: r.stdout };
}

test('main.hotLines: its file from --ui.source-dir PREFIX=DIR, the HOT line largest, flat per line as go tool pprof -list', { timeout: 300000 }, async () => {
  const r = await http(url('main.hotLines'));
  assert.equal(r.status, 200, r.text.slice(0, 800));
  const d = r.json.data;
  assert.equal(d.file, path.join(buildDir, 'main.go'), 'the file as the Go profile names it (where it was built)');
  assert.deepEqual(d.source, { origin: 'directory', path: path.join(mirror, 'main.go') });
  assert.deepEqual(d.sample_type, { type: 'cpu', unit: 'nanoseconds' });
  const text = fs.readFileSync(path.join(mirror, 'main.go'), 'utf8').replace(/\n$/, '').split('\n');
  assert.deepEqual(d.lines.map((l) => l.text), text);
  const hot = text.findIndex((l) => l.includes('// HOT')) + 1;
  const bySelf = d.lines.filter((l) => l.self).sort((a, b) => b.self - a.self);
  assert.equal(bySelf[0].line, hot, JSON.stringify(bySelf));
  assert.equal(d.hottest, hot);
  assert.ok(d.self >= 1e9, `a second of CPU at least: ${d.self}`);
  // the same merged profile through go tool pprof -list: the same flat per line
  const { out, text: listing } = await pprofList('main.hotLines');
  const mine = Object.fromEntries(d.lines.filter((l) => l.self).map((l) => [l.line, l.self]));
  // pprof prints 3 significant digits: compare within its rounding
  assert.deepEqual(Object.keys(mine).sort(), Object.keys(out).sort(), listing);
  for (const [line, v] of Object.entries(out)) {
    assert.ok(Math.abs(mine[line] - v) <= Math.max(1e6, v * 0.006), `line ${line}: profd ${mine[line]} ns, pprof ${v} ns\n${listing}`);
  }
});

test('files outside the source dirs are never read: a ".." path and a symlink out answer 404', async () => {
  const passwd = fs.readFileSync('/etc/passwd', 'utf8').split('\n')[0];
  const up = await http(url('main.escapeUp'));
  assert.equal(up.status, 404, up.text);
  assert.match(up.json.error, /main\.escapeUp/);
  assert.match(up.json.error, /"\.\." component \(refused\)/);
  const link = await http(url('main.escapeLink'));
  assert.equal(link.status, 404, link.text);
  assert.match(link.json.error, /main\.escapeLink/);
  assert.ok(link.json.error.includes(`resolves to /etc/passwd, outside ${fs.realpathSync(linkDir)} (refused)`), link.json.error);
  for (const r of [up, link]) assert.ok(!r.text.includes(passwd), 'a line of /etc/passwd in the answer');
});

test('bad parameters: 400 naming the parameter, counted', async () => {
  const metric = async () => {
    const m = await http(`${profd.base}/metrics`);
    const l = m.text.split('\n').find((x) => x.startsWith('profd_rejected_input_total{reason="query_bad_param"}'));
    return l ? +l.split(' ').pop() : 0;
  };
  const before = await metric();
  const cases = [
    [{ function: '' }, 'function'],
    [{ file: '../../../etc/passwd' }, 'file'],
    [{ file: '/src/../../etc/passwd' }, 'file'],
    [{ mode: 'diff' }, 'mode'],
    [{ query: 'cpu{job=' }, 'query'],
    [{ sample_index: 'bogus' }, 'sample_index'],
    [{ from: 'yesterday' }, 'from'],
    [{ agg: 'max' }, 'agg'],
  ];
  for (const [extra, param] of cases) {
    const r = await http(`${profd.base}/api/v1/source?` + qs({ ...params('main.hotLines'), ...extra }));
    assert.equal(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
    assert.equal(r.json.errorType, 'bad_data');
    assert.ok(r.json.error.includes(`invalid parameter "${param}"`), `${JSON.stringify(extra)}: ${r.json.error}`);
  }
  // no query at all
  const r = await http(`${profd.base}/api/v1/source?function=main.hotLines`);
  assert.equal(r.status, 400);
  assert.match(r.json.error, /invalid parameter "query"/);
  assert.ok(await metric() > before, 'profd_rejected_input_total{reason="query_bad_param"} counted them');
  // a file the function does not have: 404 naming it
  const nf = await http(url('main.hotLines', { file: '/nowhere/main.go' }));
  assert.equal(nf.status, 404);
  assert.match(nf.json.error, /has no frames in file "\/nowhere\/main\.go"/);
});
