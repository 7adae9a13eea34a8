// Helpers of the adaptive capture tests (issue 18): builds and starts
// tests/e2e/leaky (a real Go program with net/http/pprof that leaks fast),
// and a watchdog that SIGKILLs a process when its RSS crosses a limit, as
// the kernel's OOM killer would.
import fs from 'node:fs';
import path from 'node:path';
import { Proc, SRC, goEnv, http, run, waitFor } from './lib.mjs';

export async function buildLeaky(dir) {
  const out = path.join(dir, 'leaky');
  const r = await run('go', ['build', '-o', out, '.'], { cwd: path.join(SRC, 'tests', 'e2e', 'leaky'), env: goEnv(dir) }, 180000);
  if (r.code !== 0) throw new Error(`go build of tests/e2e/leaky failed (exit ${r.code})\n${r.stdout}${r.stderr}`);
  return out;
}

// Starts leaky on addrs (an array of host:port) with args; waits for /debug/pprof/.
export async function startLeaky(bin, addrs, args = [], name = 'leaky') {
  const p = new Proc(name, bin, [`-listen=${addrs.join(',')}`, ...args]);
  p.addrs = addrs;
  await waitFor(`${name} to serve /debug/pprof/`, async () => {
    if (p.exited) throw new Error(`${name} exited early\n${p.tail()}`);
    for (const a of addrs) {
      const r = await http(`http://${a}/debug/pprof/`, { timeoutMs: 30000 }).catch(() => null);
      if (!r || r.status !== 200) return false;
    }
    return true;
  }, 20000, 100);
  return p;
}

// RSS of pid in bytes (0 when gone).
export function rssBytes(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

// Polls proc's RSS every 20 ms; SIGKILLs it when over limit bytes. Resolves
// {killedAt (ms), rss} then, or rejects after timeoutMs.
export function watchdog(proc, limit, timeoutMs) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const iv = setInterval(() => {
      const rss = rssBytes(proc.child.pid);
      if (rss > limit) {
        proc.child.kill('SIGKILL');
        clearInterval(iv);
        resolve({ killedAt: Date.now(), rss });
      } else if (proc.exited || Date.now() - t0 > timeoutMs) {
        clearInterval(iv);
        reject(new Error(`watchdog: ${proc.name} did not reach ${limit} bytes of RSS in ${timeoutMs} ms (RSS ${rss})`));
      }
    }, 20);
  });
}
