// The source view's debuginfod setup (issue 31 item 7), shared by
// tests/e2e/source_debuginfod.test.mjs and tests/ui/source.test.mjs:
//   - tests/e2e/source/hotline.c + cold.c built with clang -g, stripped;
//   - Debian's debuginfod on loopback scanning (-F) a directory with the
//     .debug file and hotline.c (at the absolute path DWARF names); cold.c
//     is deleted after the build, so its source is "not found";
//   - profd-agent (eBPF, root) pushing every process' CPU to profd.
// clang is asked for DWARF 4: with clang 14's default DWARF 5, Debian 12's
// debuginfod (0.188) indexes the CU's headers but not the CU's own file, so
// /buildid/ID/source/.../hotline.c answers 404 (seen while writing this).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, freePort, http, run, waitFor } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE_DIR = path.join(here, 'source');

async function must(what, cmd, args, opts = {}) {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${cmd} ${args.join(' ')}\n${r.stdout}${r.stderr}`);
  return r;
}

// Builds the program into dir and serves its debug info and hotline.c with
// debuginfod. Returns { bin, bid, src (hotline.c's absolute path, as DWARF
// names it), cold (cold.c's), durl, hotLine (the line marked HOT) }.
export async function debuginfodTarget(dir) {
  const files = path.join(dir, 'debuginfod-files');
  const srcDir = path.join(files, 'src');
  const priv = path.join(dir, 'private-src');
  fs.mkdirSync(srcDir, { recursive: true });
  fs.mkdirSync(priv, { recursive: true });
  const src = path.join(srcDir, 'hotline.c'), cold = path.join(priv, 'cold.c');
  fs.copyFileSync(path.join(SOURCE_DIR, 'hotline.c'), src);
  fs.copyFileSync(path.join(SOURCE_DIR, 'cold.c'), cold);
  const bin = path.join(files, 'hotline');
  await must('clang', 'clang', ['-O0', '-g', '-gdwarf-4', '-fno-omit-frame-pointer', '-Wl,--build-id', '-o', bin, src, cold]);
  await must('objcopy', 'objcopy', ['--only-keep-debug', bin, bin + '.debug']);
  await must('strip', 'strip', ['--strip-all', bin]);
  // debuginfod -F serves any source file a DWARF names that exists on its
  // host, scanned tree or not: cold.c is gone before it starts
  fs.rmSync(cold);
  const nm = await run('nm', [bin]);
  if (/hot_line/.test(nm.stdout)) throw new Error('the stripped program still has hot_line in a symbol table');
  const re = await must('readelf -n', 'readelf', ['-n', bin]);
  const bid = (re.stdout.match(/Build ID: ([0-9a-f]+)/) || [])[1];
  if (!bid) throw new Error(`${bin} has no build ID\n${re.stdout}`);
  const hotLine = fs.readFileSync(src, 'utf8').split('\n').findIndex((l) => l.includes('/* HOT */')) + 1;

  const dport = await freePort();
  const dgd = new Proc('debuginfod', 'debuginfod', ['-d', path.join(dir, 'debuginfod.sqlite'), '-p', String(dport),
    '-F', files, '-t', '1'], { env: { ...process.env, DEBUGINFOD_URLS: '' } });
  const durl = `http://127.0.0.1:${dport}`;
  await waitFor('debuginfod to serve hotline.c by build ID', async () => {
    if (dgd.exited) throw new Error(`debuginfod exited\n${dgd.tail()}`);
    const r = await http(`${durl}/buildid/${bid}/source${src}`, { timeoutMs: 10000 }).catch(() => null);
    return r && r.status === 200;
  }, 120000, 500);
  return { bin, bid, src, cold, durl, hotLine };
}

// Starts profd-agent pushing to base. Returns { agent, skipWhy }: skipWhy
// says why the kernel refused it (not root, no BPF), else null.
export async function startAgent(base) {
  const bin = process.env.PROFD_AGENT_BIN;
  if (!bin || !fs.existsSync(bin)) {
    throw new Error(`PROFD_AGENT_BIN=${bin} does not exist (the profd-agent binary; ctest sets it)`);
  }
  const agent = new Proc('profd-agent', bin, [`--server=${base}`, '--frequency=99', '--upload-interval=2s', '--log.level=debug']);
  await waitFor('profd-agent to start sampling or refuse', async () =>
    agent.exited || /msg="?upload/.test(agent.out), 120000, 250);
  if (agent.exited) {
    if (/profd-agent started/.test(agent.out)) throw new Error(`profd-agent failed after starting\n${agent.tail()}`);
    return { agent, skipWhy: `the kernel refused profd-agent's BPF program or perf events: ${agent.out.trim().slice(0, 400)}` };
  }
  return { agent, skipWhy: null };
}
