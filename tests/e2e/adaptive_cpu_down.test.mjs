// Issue 28 item 6: a target that dies while profd's CPU scrape (9 s by
// default) is in flight. The CPU attempt started before the heap profiles
// taken meanwhile by the burst; the target_down event must be dated when the
// failing attempt ended, so its "last profile N s before ... went down" is
// never negative and the event never sits before the last stored profile.
//
// A real Go program (tests/e2e/leaky, net/http/pprof) leaks so a burst of 1 s
// heap scrapes runs; profd reaches it through a TCP proxy of this test that
// sees each request line, so the test kills the program (SIGKILL, as the OOM
// killer) exactly while a /debug/pprof/profile request is in flight and after
// a heap profile newer than that request's start was stored. The proxy then
// resets profd's connection, as the kernel does when the process dies.
// bench/adaptive/run.sh runs this RUNS times (issue 28: 10 of 10).
//
//   PROFD_BIN=build/profd node --test tests/e2e/adaptive_cpu_down.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { apiData, freePort, killAll, qs, startProfd, tempDir, waitFor } from './lib.mjs';
import { buildLeaky, startLeaky } from './leaky.mjs';

let dir, profd, leaky, proxy;
const cpuStarts = []; // ms of each /debug/pprof/profile request seen, with its socket
const live = new Set();

// A proxy from listenPort to the leaky program; notes CPU profile requests.
function startProxy(listenPort, upstreamPort) {
  const srv = net.createServer((client) => {
    const up = net.connect(upstreamPort, '127.0.0.1');
    live.add(client);
    client.on('data', (d) => {
      // profd keeps connections alive: any chunk may start a request
      if (/(^|\r\n)GET \/debug\/pprof\/profile[? ]/.test(d.toString('latin1'))) {
        cpuStarts.push({ at: Date.now(), client });
      }
      up.write(d);
    });
    up.on('data', (d) => {
      // an answer on this connection ends the CPU request in flight on it
      const c = cpuStarts[cpuStarts.length - 1];
      if (c && c.client === client && Date.now() - c.at > 50) c.done = true;
      client.write(d);
    });
    const reset = () => {
      // the process is gone: the client sees a reset, not a clean end
      if (!client.destroyed) (client.resetAndDestroy ? client.resetAndDestroy() : client.destroy());
      live.delete(client);
    };
    up.on('error', reset);
    up.on('close', reset);
    client.on('error', () => up.destroy());
    client.on('close', () => { up.destroy(); live.delete(client); });
  });
  return new Promise((resolve) => srv.listen(listenPort, '127.0.0.1', () => resolve(srv)));
}

before(async () => {
  dir = tempDir('pd-adaptive-cpu-');
  const bin = await buildLeaky(dir);
  const upstream = await freePort();
  const front = await freePort();
  leaky = await startLeaky(bin, [`127.0.0.1:${upstream}`], ['-rate=5']);
  proxy = await startProxy(front, upstream);
  // the default profiling config: CPU for 9 s every 15 s
  const config = path.join(dir, 'profd.yaml');
  fs.writeFileSync(config, `scrape_configs:
  - job_name: leaky
    scrape_interval: 15s
    static_configs:
      - targets: ['127.0.0.1:${front}']
    adaptive_capture:
      scrape_interval: 1s
      profiles: [heap, goroutine]
      heap_growth_bytes_per_minute: 32MiB
      max_duration: 5m
`);
  profd = await startProfd({ storage: path.join(dir, 'data'), config });
});

after(async () => {
  for (const c of live) c.destroy();
  if (proxy) proxy.close();
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const heapTimes = async () => {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: 'heap{job="leaky"}', from: String(Math.floor(Date.now() / 1000) - 3600), to: String(Math.ceil(Date.now() / 1000) + 60),
  }));
  return data.length ? data[0].timestamps : [];
};

test('killed with a 9 s CPU scrape in flight: target_down dated after the last profile, "N s before" >= 0', { timeout: 400000 }, async () => {
  await waitFor('a burst to start', async () => {
    const ev = await apiData(profd.base, '/api/v1/events?' + qs({ kind: 'burst_started', start: '0' }));
    return ev.length ? ev : null;
  }, 180000, 250);
  // a CPU request in flight and a heap profile stored after it started
  const inflight = await waitFor('a CPU scrape in flight with a newer heap profile stored', async () => {
    const c = cpuStarts[cpuStarts.length - 1];
    if (!c || c.client.destroyed || c.done || Date.now() - c.at > 7000) return null;
    const ts = await heapTimes();
    return ts.length && ts[ts.length - 1] > c.at + 100 ? { ...c, lastHeap: ts[ts.length - 1] } : null;
  }, 180000, 100);
  const killedAt = Date.now();
  leaky.kill('SIGKILL');
  const down = await waitFor('the target_down event', async () => {
    const ev = await apiData(profd.base, '/api/v1/events?' + qs({ kind: 'target_down', start: '0' }));
    return ev.length ? ev : null;
  }, 120000, 200);
  assert.equal(down.length, 1, JSON.stringify(down));
  const e = down[0];
  console.log(`# CPU scrape started ${killedAt - inflight.at} ms before the kill; ` +
    `event: ${e.message}; lastProfile ${e.lastProfile} (${e.lastProfileType}), time ${e.time}`);
  assert.match(e.reason, /connection reset|connection refused|empty reply|transfer closed|recv/i);
  const ts = await heapTimes();
  const last = ts[ts.length - 1];
  assert.ok(e.lastProfile >= last, `the event names the last profile (${e.lastProfile} < ${last})`);
  assert.ok(e.lastProfile > inflight.at, 'the last profile is newer than the CPU attempt\'s start (the case under test)');
  assert.ok(e.time >= e.lastProfile, `event at ${e.time}, before the last profile ${e.lastProfile}`);
  assert.match(e.message, /^last profile \d+\.\d s before 127\.0\.0\.1:\d+ went down/);
});
