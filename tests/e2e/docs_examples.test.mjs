// Docs that cannot lie (issue 33 item 4): every example of README.md and
// docs/*.md marked runnable runs against a real profd, and every profd
// command line in the docs uses flags the binary has.
//
// A fenced block is runnable when the line right before its fence is an
// HTML comment (invisible on GitHub); the convention is documented in
// CONTRIBUTING.md ("Docs that cannot lie"):
//   <!-- test -->              ```yaml: `profd check config FILE` exits 0
//                              ```sh:   the block runs under bash -e, exit 0
//   <!-- test: file=NAME -->   ```yaml: checked, then kept as NAME in the work dir
//   <!-- test: web-config -->  ```yaml: `profd check web-config FILE` exits 0
//   <!-- test: rules -->       ```yaml: `promtool check rules FILE` exits 0
//   <!-- test: serve -->       ```sh:   its one profd command serves /-/ready,
//                                       then stops cleanly on SIGTERM
// Each page gets a work directory and a profd seeded by `profd push` with
// real profiles from ../shared/testdata ({service="api"}, heap and cpu);
// 127.0.0.1:10902 in a block is replaced by that profd's address.
//
// Two more checks, on every fenced block and inline code span (marked or
// not): each `profd ...` command line only uses flags its command's --help
// prints, and docs/flags.md lists exactly the flags of `profd --help`,
// `profd push --help`, `profd convert --help`, `profd debuginfo upload --help`
// and `profd tsdb import`.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SRC, TESTDATA, profdBin, tempDir, freePort, startProfd, run, Proc, http, killAll } from './lib.mjs';

after(killAll);

const DOC_ADDR = /(?:127\.0\.0\.1|localhost):10902/g;
const MARKER = /^<!--\s*test(?::\s*(.*?))?\s*-->\s*$/;

// The pages: README.md and docs/*.md (docs/format/ is reference text with no
// commands).
function docPages() {
  const docs = path.join(SRC, 'docs');
  const pages = [path.join(SRC, 'README.md')];
  for (const f of fs.readdirSync(docs).sort()) if (f.endsWith('.md')) pages.push(path.join(docs, f));
  return pages;
}

// Fenced blocks of a markdown file: {line (1-based, of the fence), lang,
// body, marker (null, or the text after "test:", '' for a bare test)}.
function fencedBlocks(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})\s*([A-Za-z0-9_-]*)/.exec(lines[i]);
    if (!open) continue;
    const fence = open[1];
    let j = i + 1;
    while (j < lines.length && !lines[j].startsWith(fence)) j++;
    let marker = null;
    const m = i > 0 ? MARKER.exec(lines[i - 1].trim()) : null;
    if (m) marker = (m[1] || '').trim();
    blocks.push({ line: i + 1, lang: open[2], body: lines.slice(i + 1, j).join('\n') + '\n', marker });
    i = j;
  }
  return blocks;
}

// Inline code spans that start with "profd " (outside fenced blocks).
function inlineCommands(file) {
  const out = [];
  let inFence = false;
  fs.readFileSync(file, 'utf8').split('\n').forEach((l, i) => {
    if (/^\s*`{3,}/.test(l)) { inFence = !inFence; return; }
    if (inFence) return;
    for (const m of l.matchAll(/`(profd [^`]+)`/g)) out.push({ line: i + 1, text: m[1] });
  });
  return out;
}

// Shell lines of a block with `\` continuations joined and comments dropped.
function shellLines(body) {
  const joined = body.replace(/\\\n/g, ' ');
  return joined.split('\n').map((l) => l.replace(/(^|\s)#.*$/, '').trim()).filter(Boolean);
}

// Minimal shell word split (single and double quotes, no expansions).
function words(line) {
  const out = [];
  for (const m of line.matchAll(/'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

/* ------------------------------------------------------------ flags */

const helpCache = new Map();
async function helpText(args) {
  const key = args.join(' ');
  if (!helpCache.has(key)) {
    const r = await run(profdBin(), args, {}, 20000);
    helpCache.set(key, r.stdout + r.stderr);
  }
  return helpCache.get(key);
}

// Every --flag token of a text (values and "[no-]" stripped).
function flagTokens(text) {
  const s = new Set();
  for (const m of text.matchAll(/--(\[no-\])?([a-z0-9][a-z0-9.-]*[a-z0-9])/g)) s.add(`--${m[2]}`);
  return s;
}

// The flags a command's --help declares: every flag of its usage lines
// ("usage: ..." and the "[--x]" lines continuing it) and the first flag of
// each option line ("  --x=V  what"); flags named in prose are not counted.
function helpFlags(text) {
  const s = new Set();
  for (const l of text.split('\n')) {
    const t = l.trim();
    if (t.startsWith('usage:') || t.startsWith('[')) for (const f of flagTokens(t)) s.add(f);
    else if (t.startsWith('--')) for (const f of flagTokens(t.split(/\s/)[0])) s.add(f);
  }
  return s;
}

// The flags of `profd serve`: the first flag of every option line of --help.
async function serveFlags() {
  const s = new Set();
  for (const l of (await helpText(['--help'])).split('\n')) {
    const m = /^\s+(?:-h, )?--(\[no-\])?([a-z0-9][a-z0-9.-]*[a-z0-9])/.exec(l);
    if (m) s.add(`--${m[2]}`);
  }
  return s;
}

async function tsdbImportHelp() {
  const own = await helpText(['tsdb', 'import', '--help']);
  return own.includes('--storage.path') ? own : helpText(['tsdb', '--help']);
}

// The command a profd command line runs, and the flags it knows.
async function commandOf(argv) {
  const a = argv.slice(1);
  if (a[0] === 'push') return { name: 'push', known: helpFlags(await helpText(['push', '--help'])) };
  if (a[0] === 'convert') return { name: 'convert', known: helpFlags(await helpText(['convert', '--help'])) };
  if (a[0] === 'debuginfo') return { name: 'debuginfo upload', known: helpFlags(await helpText(['debuginfo', 'upload', '--help'])) };
  if (a[0] === 'check' && a[1] === 'web-config') return { name: 'check web-config', known: new Set() };
  if (a[0] === 'check') return { name: 'check config', known: new Set() };
  if (a[0] === 'tsdb' && a[1] === 'import') return { name: 'tsdb import', known: helpFlags(await tsdbImportHelp()) };
  if (a[0] === 'tsdb') return { name: `tsdb ${a[1] || ''}`.trim(), known: new Set() };
  return { name: 'serve', known: await serveFlags() };
}

// Flags a profd command line uses that its command does not have.
async function unknownFlags(line) {
  const argv = words(line);
  const at = argv.indexOf('profd');
  if (at < 0) return [];
  const cmd = await commandOf(argv.slice(at));
  const bad = [];
  for (const raw of argv.slice(at + 1)) {
    if (['|', '&&', '||', ';', '>', '<'].includes(raw)) break;
    const w = raw.replace(/^\[+/, '');
    const m = /^--(?:no-)?([a-z0-9][a-z0-9.-]*)/.exec(w);
    if (!m || w === '--help' || w === '--version') continue;
    if (!cmd.known.has(`--${m[1]}`)) bad.push(`${w.split('=')[0]} (not in \`profd ${cmd.name === 'serve' ? '' : cmd.name + ' '}--help\`)`);
  }
  return bad;
}

test('every profd command line in the docs uses flags the binary has', async () => {
  const problems = [];
  for (const page of docPages()) {
    const rel = path.relative(SRC, page);
    for (const b of fencedBlocks(page)) {
      if (!['sh', 'bash', 'console', 'shell', ''].includes(b.lang)) continue;
      const lines = shellLines(b.body);
      for (const l of lines) {
        for (const part of l.split(/\s*(?:\||&&|\|\||;)\s*/)) {
          if (!/^(?:sudo\s+)?(?:\S+=\S+\s+)*profd(\s|$)/.test(part)) continue;
          for (const bad of await unknownFlags(part)) problems.push(`${rel}:${b.line}: ${part}\n    ${bad}`);
        }
      }
    }
    for (const c of inlineCommands(page)) {
      for (const bad of await unknownFlags(c.text)) problems.push(`${rel}:${c.line}: ${c.text}\n    ${bad}`);
    }
  }
  assert.equal(problems.length, 0, `flags the binary does not have:\n${problems.join('\n')}`);
});

// docs/flags.md: the flags in the first column of the tables of a section.
function flagsOfSection(md, heading) {
  const start = md.indexOf(`\n## ${heading}\n`);
  assert.ok(start >= 0, `docs/flags.md has no "## ${heading}" section`);
  const end = md.indexOf('\n## ', start + 4);
  const s = new Set();
  for (const l of md.slice(start, end < 0 ? undefined : end).split('\n')) {
    const cells = l.split(/(?<!\\)\|/);
    if (!l.startsWith('|') || cells.length < 3) continue;
    for (const f of flagTokens(cells[1])) s.add(f);
  }
  return s;
}

test('docs/flags.md lists exactly the flags of each command\'s --help', async () => {
  const md = fs.readFileSync(path.join(SRC, 'docs', 'flags.md'), 'utf8');
  const diffs = [];
  const compare = (what, help, docs) => {
    help.delete('--help');
    help.delete('--version');
    const missing = [...help].filter((f) => !docs.has(f));
    const extra = [...docs].filter((f) => !help.has(f));
    if (missing.length) diffs.push(`${what}: in --help, not in docs/flags.md: ${missing.join(' ')}`);
    if (extra.length) diffs.push(`${what}: in docs/flags.md, not in --help: ${extra.join(' ')}`);
  };
  compare('profd serve', await serveFlags(), flagsOfSection(md, 'profd serve'));
  compare('profd push', helpFlags(await helpText(['push', '--help'])), flagsOfSection(md, 'profd push'));
  compare('profd convert', helpFlags(await helpText(['convert', '--help'])), flagsOfSection(md, 'profd convert'));
  compare('profd debuginfo upload', helpFlags(await helpText(['debuginfo', 'upload', '--help'])),
    flagsOfSection(md, 'profd debuginfo upload'));
  const imp = md.split('\n').find((l) => l.startsWith('| `profd tsdb import'));
  assert.ok(imp, 'docs/flags.md has no `profd tsdb import` row');
  const impHelp = (await tsdbImportHelp()).split('\n').filter((l) => !/tsdb (analyze|check|repair)/.test(l)).join('\n');
  compare('profd tsdb import', helpFlags(impHelp), flagTokens(imp.split(/(?<!\\)\|/)[1]));
  assert.equal(diffs.length, 0, diffs.join('\n'));
});

/* ------------------------------------------------------------ links */

// GitHub's anchors of a markdown file: heading slugs and <a id="...">.
function anchorsOf(file) {
  const a = new Set();
  let inFence = false;
  for (const l of fs.readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*`{3,}/.test(l)) { inFence = !inFence; continue; }
    if (inFence) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l);
    if (h) a.add(h[1].toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
    for (const m of l.matchAll(/<a id="([^"]+)"/g)) a.add(m[1]);
  }
  return a;
}

test('every relative link of the docs points at a file and anchor that exist', () => {
  const bad = [];
  for (const page of [...docPages(), path.join(SRC, 'CONTRIBUTING.md')]) {
    let inFence = false;
    fs.readFileSync(page, 'utf8').split('\n').forEach((l, i) => {
      if (/^\s*`{3,}/.test(l)) { inFence = !inFence; return; }
      if (inFence) return;
      for (const m of l.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
        const t = m[1];
        if (/^[a-z]+:/.test(t)) continue;
        const [f, anchor] = t.split('#');
        const target = f ? path.resolve(path.dirname(page), f) : page;
        const where = `${path.relative(SRC, page)}:${i + 1}: ${t}`;
        if (!fs.existsSync(target)) { bad.push(`${where}: no such file`); continue; }
        if (anchor && target.endsWith('.md') && !anchorsOf(target).has(anchor)) bad.push(`${where}: no such anchor`);
      }
    });
  }
  assert.deepEqual(bad, []);
});

/* ------------------------------------------------------------ endpoints */

test('every route of src/api is in docs/api.md', () => {
  const api = fs.readFileSync(path.join(SRC, 'docs', 'api.md'), 'utf8');
  const missing = [];
  for (const f of fs.readdirSync(path.join(SRC, 'src', 'api')).filter((n) => n.endsWith('.c'))) {
    const src = fs.readFileSync(path.join(SRC, 'src', 'api', f), 'utf8');
    for (const m of src.matchAll(/return "(\/[^"]+)";/g)) {
      const route = m[1].replace(':id', 'ID').replace(':name', 'NAME');
      if (route === '/api/v1' || route === '/debug/pprof') continue; // prefixes (errors)
      if (!api.includes(route) && !api.includes(route.replace(/^\/api\/v1/, ''))) missing.push(`${route} (src/api/${f})`);
    }
  }
  assert.deepEqual(missing, [], 'routes the HTTP API page does not name');
});

/* ------------------------------------------------------------ runnable examples */

// A profd seeded with real profiles: {service="api"} heap and cpu, two of
// each, pushed with the real push CLI at recent times (the files are from
// ../shared/testdata; their own times would fall out of any retention).
async function seededProfd(work) {
  const p = await startProfd({
    storage: path.join(work, '.seed-store'),
    extraArgs: ['--web.enable-lifecycle', '--storage.retention.time=36500d'],
    name: 'profd (docs)',
  });
  const now = Math.floor(Date.now() / 1000);
  const seeds = [
    ['heap', 'go-demo-once/heap.pb.gz', 240],
    ['cpu', 'go-demo-once/profile.pb.gz', 200],
    ['heap', 'go-demo-series/heap-0030.pb.gz', 120],
    ['cpu', 'go-demo-series/cpu-0002.pb.gz', 60],
  ];
  for (const [type, file, ago] of seeds) {
    const r = await run(profdBin(), ['push', `--url=${p.base}`, '--service=api', '--instance-id=host7',
      `--type=${type}`, `--created-at=${now - ago}`, path.join(TESTDATA, 'pprof', file)]);
    assert.equal(r.code, 0, `seeding ${file}: ${r.stdout}${r.stderr}`);
  }
  // files the examples use, taken from a real process: profd's own profiles
  for (const [name, url] of [['heap.pb.gz', '/debug/pprof/heap'], ['cpu.pb.gz', '/debug/pprof/profile?seconds=1']]) {
    const r = await http(p.base + url, { timeoutMs: 20000 });
    assert.equal(r.status, 200, `${url}: ${r.text.slice(0, 200)}`);
    fs.writeFileSync(path.join(work, name), r.buf);
  }
  return p;
}

function workEnv(work) {
  const bin = path.join(work, '.bin');
  fs.mkdirSync(bin, { recursive: true });
  const link = path.join(bin, 'profd');
  if (!fs.existsSync(link)) fs.symlinkSync(path.resolve(profdBin()), link);
  return {
    ...process.env,
    PATH: `${bin}:${process.env.PATH}`,
    HOME: work,
    PPROF_TMPDIR: path.join(work, '.pprof'),
    GOCACHE: path.join(work, '.gocache'),
    GOFLAGS: '-mod=mod',
  };
}

async function makeCert(work) {
  if (fs.existsSync(path.join(work, 'server.crt'))) return;
  const r = await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'server.key', '-out', 'server.crt', '-days', '2', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1'], { cwd: work });
  assert.equal(r.code, 0, `openssl: ${r.stderr}`);
  fs.copyFileSync(path.join(work, 'server.crt'), path.join(work, 'ca.crt')); // a client CA for the examples
}

const SHELL_PRELUDE = `set -e -o pipefail
curl() { command curl --fail-with-body "$@"; }
`;

async function runShell(block, where, work, env, base) {
  const script = SHELL_PRELUDE + block.body.replace(DOC_ADDR, base.replace('http://', ''));
  const r = await run('bash', ['-c', script], { cwd: work, env }, 120000);
  assert.equal(r.code, 0,
    `${where}: the example failed (exit ${r.code}):\n${block.body}--- stdout ---\n${r.stdout.slice(-3000)}\n--- stderr ---\n${r.stderr.slice(-3000)}`);
  if (process.env.PD_DOCS_VERBOSE) console.log(`--- ${where}\n${r.stdout.slice(0, 1500)}\n${r.stderr.slice(0, 500)}`);
}

async function runServe(block, where, work, env) {
  const lines = shellLines(block.body);
  assert.equal(lines.length, 1, `${where}: a "serve" block holds one profd command`);
  const argv = words(lines[0]);
  assert.equal(argv[0], 'profd', `${where}: a "serve" block runs profd`);
  const port = await freePort();
  let args = argv.slice(1).map((a) => a
    .replace(/^(--web\.listen-address=).*$/, `$1127.0.0.1:${port}`)
    .replace(/^(--storage\.path=)\/.*$/, `$1${path.join(work, 'abs-store')}`));
  if (!args.some((a) => a.startsWith('--web.listen-address'))) args.push(`--web.listen-address=127.0.0.1:${port}`);
  if (!args.some((a) => a.startsWith('--storage.path'))) args.push(`--storage.path=${path.join(work, 'serve-store')}`);
  const p = new Proc(`${where} profd`, profdBin(), args, { cwd: work, env });
  try {
    const deadline = Date.now() + 120000; // a hang guard only (issue 34)
    for (;;) {
      if (p.exited) {
        assert.fail(`${where}: \`profd ${args.join(' ')}\` exited (${JSON.stringify(p.exited)}) instead of serving:\n${p.out.slice(0, 800)}`);
      }
      const r = await http(`http://127.0.0.1:${port}/-/ready`, { timeoutMs: 2000 }).catch(() => null);
      if (r && r.status === 200) break;
      assert.ok(Date.now() < deadline, `${where}: \`profd ${args.join(' ')}\` did not answer /-/ready within 120 s\n${p.tail()}`);
      await new Promise((res) => setTimeout(res, 150));
    }
    const ex = await p.stop(15000);
    assert.equal(ex.code, 0, `${where}: profd did not stop cleanly on SIGTERM: ${JSON.stringify(ex)}\n${p.tail()}`);
  } finally {
    p.kill();
  }
}

async function runYaml(block, where, work, env, kind, name, base) {
  const file = path.join(work, name);
  fs.writeFileSync(file, block.body.replace(DOC_ADDR, base.replace('http://', '')));
  let r;
  if (kind === 'web-config') {
    await makeCert(work);
    r = await run(profdBin(), ['check', 'web-config', file], { cwd: work, env });
  } else if (kind === 'rules') {
    r = await run('promtool', ['check', 'rules', file], { cwd: work, env });
  } else {
    r = await run(profdBin(), ['check', 'config', file], { cwd: work, env });
  }
  assert.equal(r.code, 0, `${where}: the ${kind} example does not load (exit ${r.code}):\n${block.body}---\n${r.stdout.slice(-2000)}${r.stderr.slice(-2000)}`);
}

const pages = docPages();
const runnable = pages.map((p) => ({ page: p, blocks: fencedBlocks(p).filter((b) => b.marker !== null) }));

test('the docs mark runnable examples (a marker names a known kind)', () => {
  let n = 0;
  const bad = [];
  for (const { page, blocks } of runnable) {
    for (const b of blocks) {
      n++;
      const ok = (b.lang === 'yaml' && (b.marker === '' || /^file=[\w.-]+$/.test(b.marker) || ['web-config', 'rules'].includes(b.marker))) ||
        (b.lang === 'sh' && ['', 'serve'].includes(b.marker));
      if (!ok) bad.push(`${path.relative(SRC, page)}:${b.line}: marker "${b.marker}" before a \`\`\`${b.lang} block`);
    }
  }
  assert.deepEqual(bad, []);
  assert.ok(n >= 40, `only ${n} runnable examples found: the markers were lost?`);
});

for (const { page, blocks } of runnable) {
  if (blocks.length === 0) continue;
  const rel = path.relative(SRC, page);
  test(`runnable examples of ${rel} (${blocks.length})`, { timeout: 600000 }, async () => {
    const work = tempDir('profd-docs-');
    const env = workEnv(work);
    const seed = await seededProfd(work);
    try {
      let k = 0;
      for (const b of blocks) {
        const where = `${rel}:${b.line}`;
        k++;
        if (b.lang === 'sh' && b.marker === 'serve') await runServe(b, where, work, env);
        else if (b.lang === 'sh') await runShell(b, where, work, env, seed.base);
        else {
          const file = b.marker.startsWith('file=') ? b.marker.slice(5) : `example-${k}.yml`;
          const kind = ['web-config', 'rules'].includes(b.marker) ? b.marker : 'config';
          await runYaml(b, where, work, env, kind, file, seed.base);
        }
      }
    } finally {
      await seed.stop().catch(() => seed.kill());
    }
    fs.rmSync(work, { recursive: true, force: true });
  });
}
