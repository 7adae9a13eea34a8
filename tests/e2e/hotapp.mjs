// Builds and starts tests/e2e/hotapp (a Go program with CPU in
// main.hotTagged under pprof.Do endpoint labels) for the recording rules
// tests (issue 30).
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, freePort, goEnv, http, run, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export async function buildHotapp(dir) {
  const bin = path.join(dir, 'hotapp');
  const r = await run('go', ['build', '-o', bin, '.'], { cwd: path.join(here, 'hotapp'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/e2e/hotapp (is golang-go installed?)\n${r.stdout}${r.stderr}`);
  return bin;
}

export async function startHotapp(bin, args = []) {
  const port = await freePort();
  const p = new Proc('hotapp', bin, [`-listen=127.0.0.1:${port}`, ...args]);
  await waitFor('the Go target to serve /debug/pprof/', async () => {
    if (p.exited) throw new Error(`hotapp exited early\n${p.tail()}`);
    const h = await http(`http://127.0.0.1:${port}/debug/pprof/`, { timeoutMs: 2000 }).catch(() => null);
    return h && h.status === 200;
  }, 30000, 100);
  p.addr = `127.0.0.1:${port}`;
  return p;
}

