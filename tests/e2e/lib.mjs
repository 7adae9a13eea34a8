// Helpers shared by the end-to-end tests (tests/e2e) and the browser test
// (tests/ui): free loopback ports, child processes that are always killed,
// bounded waits, profd and the Go demo target.
//
// Environment:
//   PROFD_BIN    the profd binary (required)
//   PD_SRC       the source tree (default: two levels above this file)
//   PD_TESTDATA  the shared testdata (default: PD_SRC/../shared/testdata)
import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SRC = path.resolve(process.env.PD_SRC || path.join(here, '..', '..'));
export const TESTDATA = path.resolve(process.env.PD_TESTDATA || path.join(SRC, '..', 'shared', 'testdata'));

export function profdBin() {
  const bin = process.env.PROFD_BIN;
  if (!bin) throw new Error('PROFD_BIN is not set (the path of the profd binary; ctest sets it)');
  if (!fs.existsSync(bin)) throw new Error(`PROFD_BIN=${bin} does not exist`);
  return bin;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// A loopback port nobody listens on right now.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A wait only bounds a hang: on a busy machine (CI, other builds beside the
// tests) anything can take many seconds, so no wait gives up before this
// (issue 34). A test that must finish sooner says so in its ctest TIMEOUT.
export const MIN_WAIT_MS = 120000;

// Polls fn until it returns a truthy value; throws after timeoutMs (at least
// MIN_WAIT_MS) with `what` and the last error/value in the message.
export async function waitFor(what, fn, timeoutMs, intervalMs = 250) {
  timeoutMs = Math.max(timeoutMs, MIN_WAIT_MS);
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${why})`);
    }
    await sleep(intervalMs);
  }
}

/* ---------------------------------------------------------------- processes */

const children = new Set();

// A child process whose stdout+stderr are kept (the last 256 KiB) for
// messages. Every child is killed by killAll() and at exit.
export class Proc {
  constructor(name, cmd, args, opts = {}) {
    this.name = name;
    this.out = '';
    this.exited = null; // {code, signal} once exited
    this.child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    children.add(this);
    const keep = (d) => {
      this.out += d.toString();
      if (this.out.length > 262144) this.out = this.out.slice(-131072);
    };
    if (this.child.stdout) this.child.stdout.on('data', keep); // null when stdio redirects to a file
    if (this.child.stderr) this.child.stderr.on('data', keep);
    this.exitPromise = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exited = { code, signal };
        children.delete(this);
        resolve(this.exited);
      });
      this.child.on('error', (e) => {
        this.out += `\n[spawn error: ${e.message}]`;
        this.exited = { code: -1, signal: null, error: e };
        children.delete(this);
        resolve(this.exited);
      });
    });
  }

  get pid() { return this.child.pid; }

  tail(n = 4000) { return `--- last output of ${this.name} ---\n${this.out.slice(-n)}`; }

  // Waits for exit; throws after timeoutMs (at least MIN_WAIT_MS: a hang
  // guard). Resolves to {code, signal}.
  async wait(timeoutMs) {
    timeoutMs = Math.max(timeoutMs || 0, MIN_WAIT_MS);
    let timer;
    const t = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms\n${this.tail()}`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exitPromise, t]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(signal = 'SIGKILL') {
    if (!this.exited) {
      try { this.child.kill(signal); } catch (e) { /* already gone */ }
    }
  }

  // SIGTERM, then SIGKILL if it has not exited after graceMs (at least
  // MIN_WAIT_MS: a clean stop under load can take long; only a hang fails).
  async stop(graceMs = MIN_WAIT_MS) {
    if (this.exited) return this.exited;
    this.kill('SIGTERM');
    try {
      return await this.wait(graceMs);
    } catch (e) {
      this.kill('SIGKILL');
      await this.exitPromise;
      throw e;
    }
  }
}

export async function killAll() {
  const all = [...children];
  for (const p of all) p.kill('SIGKILL');
  await Promise.all(all.map((p) => p.exitPromise));
}
process.on('exit', () => { for (const p of children) p.kill('SIGKILL'); });

// Runs a command to completion; resolves {code, stdout, stderr}.
export function run(cmd, args, opts = {}, timeoutMs = 180000) {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 << 20, killSignal: 'SIGKILL', ...opts }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) + (err && typeof err.code !== 'number' ? `\n[${err.message}]` : '') });
    });
  });
}

/* ---------------------------------------------------------------- HTTP */

// GET/POST a URL; resolves {status, text, json} (json null when not JSON).
// opts.timeoutMs: abort after it (default 120 s, a hang guard).
export async function http(url, opts = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), opts.timeoutMs || 120000);
  try {
    const resp = await fetch(url, { ...opts, signal: ctl.signal });
    const buf = Buffer.from(await resp.arrayBuffer());
    const text = buf.toString('utf8');
    let json = null;
    try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
    return { status: resp.status, text, json, buf, headers: resp.headers };
  } finally {
    clearTimeout(timer);
  }
}

// GET an API path on base; returns `data` of a success envelope or throws.
export async function apiData(base, pathAndQuery) {
  const r = await http(base + pathAndQuery);
  if (r.status !== 200 || !r.json || r.json.status !== 'success') {
    throw new Error(`GET ${pathAndQuery}: HTTP ${r.status}: ${r.text.slice(0, 500)}`);
  }
  return r.json.data;
}

export function qs(params) {
  return Object.entries(params).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
}

/* ---------------------------------------------------------------- profd */

// Starts `profd serve` on a free loopback port and waits until /-/ready.
// opts: {storage, config (path or null), port, extraArgs}.
export async function startProfd({ storage, config = null, port = null, extraArgs = [], name = 'profd' }) {
  port = port || (await freePort());
  const args = ['serve', `--storage.path=${storage}`, `--web.listen-address=127.0.0.1:${port}`];
  if (config) args.push(`--config.file=${config}`);
  args.push(...extraArgs);
  const p = new Proc(name, profdBin(), args);
  p.port = port;
  p.base = `http://127.0.0.1:${port}`;
  await waitFor(`${name} to answer /-/ready on port ${port}`, async () => {
    if (p.exited) throw new Error(`${name} exited early (${JSON.stringify(p.exited)})\n${p.tail()}`);
    const r = await http(p.base + '/-/ready', { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 30000, 150).catch((e) => { p.kill(); throw new Error(`${e.message}\n${p.tail()}`); });
  return p;
}

/* ---------------------------------------------------------------- Go demo */

// Environment for `go`: caches and HOME inside dir, so the tests work as any user.
export function goEnv(dir) {
  return {
    ...process.env,
    HOME: dir, GOCACHE: path.join(dir, 'gocache'), GOPATH: path.join(dir, 'gopath'),
    PPROF_TMPDIR: path.join(dir, 'pprof'), GO111MODULE: 'on', GOFLAGS: '', GOTOOLCHAIN: 'local',
  };
}

// Builds examples/demo into dir; returns the binary path. Fails (does not
// skip) when `go` is missing: the end-to-end test needs a real Go target.
export async function buildDemo(dir) {
  const out = path.join(dir, 'demo');
  const r = await run('go', ['build', '-o', out, '.'], { cwd: path.join(SRC, 'examples', 'demo'), env: goEnv(dir) }, 120000);
  if (r.code !== 0) {
    throw new Error(`go build of examples/demo failed (exit ${r.code}); is golang-go installed? ` +
      `(scripts/install-deps.sh)\n${r.stdout}${r.stderr}`);
  }
  return out;
}

// Starts the demo on a free port and waits until /debug/pprof/ answers.
export async function startDemo(bin) {
  const port = await freePort();
  const p = new Proc('demo', bin, [`-listen=127.0.0.1:${port}`]);
  p.port = port;
  p.addr = `127.0.0.1:${port}`;
  await waitFor('the Go demo to serve /debug/pprof/', async () => {
    if (p.exited) throw new Error(`demo exited early\n${p.tail()}`);
    const r = await http(`http://${p.addr}/debug/pprof/`, { timeoutMs: 30000 }).catch(() => null);
    return r && r.status === 200;
  }, 20000, 100);
  return p;
}
