// Issue 20, "keeps answering under hostile clients": the real profd on
// loopback under
//   - slowloris: 200 connections trickling header lines (one per second),
//   - 2,000 idle connections,
//   - 20 clients sending a body at 1 byte/s,
//   - four catastrophic regex queries at once, again and again,
// while a well-behaved client probes /-/healthy (every probe answered 200)
// and pushes real pprof profiles (every push acknowledged). How fast the
// probes are answered under the attack (issue 20's goal: p99 < 100 ms) is
// measured by bench/hostile, which runs this file and reads the figures it
// prints: a latency depends on the machine's load, so no test asserts one
// (issue 34). The attackers are cut off
// by --web.read-timeout (a whole-request deadline) and counted in /metrics
// (profd_http_cut_off_total), and RSS stays bounded.
// Regressions (same file, same profd): 2,000 requests with 600 query
// arguments each → 400 each, RSS flat; 100 unfinished over-cap bodies →
// RSS growth < 50 MB.
//
//   PROFD_BIN=build/profd node --test tests/e2e/hostile.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { TESTDATA, killAll, sleep, startProfd, tempDir, waitFor } from './lib.mjs';

const READ_TIMEOUT_S = 5;
const MAX_BODY = 1 << 20;
const HEAP = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
const LONG = 'a'.repeat(4000) + '!'; // ^(?:(a+)+)$ backtracks on it without end

let dir, profd;

function rssBytes() {
  const s = fs.readFileSync(`/proc/${profd.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(s)[1]) * 1024;
}

// One request on its own connection; resolves {status, ms, body}.
function request(method, pathq, body = null, timeoutMs = 120000) { // a hang guard only
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request({ host: '127.0.0.1', port: profd.port, method, path: pathq, agent: false,
      headers: body ? { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0, body: Buffer.concat(chunks).toString() }));
      res.on('error', (e) => resolve({ status: 0, ms: performance.now() - t0, body: e.message }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('client timeout')));
    req.on('error', (e) => resolve({ status: 0, ms: performance.now() - t0, body: e.message }));
    if (body) req.write(body);
    req.end();
  });
}

async function metric(name, labels) {
  const r = await request('GET', '/metrics');
  assert.equal(r.status, 200);
  const line = r.body.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

function push(i, extra = '') {
  return request('POST', `/api/0/profiles?service=wellbehaved&type=heap&labels=i=${i}${extra}`, HEAP);
}

// A raw socket that stays open; resolves `closed` when the server closes it.
// (a wrapper: {sock, closedAt, connected, write, writable})
function rawSocket() {
  const sock = net.connect({ host: '127.0.0.1', port: profd.port });
  const w = { sock, closedAt: null };
  sock.on('error', () => {});
  // the server's FIN counts: a client with unsent data in a full send
  // buffer only sees the RST when its next window probe is answered
  const cut = () => { if (w.closedAt === null) w.closedAt = performance.now(); };
  sock.on('end', cut);
  sock.resume(); // flowing, so 'end' is emitted (replies are dropped)
  sock.on('close', cut);
  w.connected = new Promise((resolve) => { sock.on('connect', resolve); sock.on('close', resolve); });
  w.write = (d) => { if (!sock.destroyed && sock.writable) sock.write(d); };
  return w;
}

// Under ASan freed memory sits in its quarantine (256 MiB) and its allocator
// keeps pages: RSS bounds are checked in the plain build only (ASan checks
// leaks and overflows there instead).
function underAsan() {
  return /libasan/.test(fs.readFileSync(`/proc/${profd.pid}/maps`, 'utf8'));
}

// Runs health_probe.mjs (a process of its own) for ms; resolves {ms, bad}.
function probeHealth(ms) {
  const prober = spawn(process.execPath, [path.join(path.dirname(new URL(import.meta.url).pathname), 'health_probe.mjs'),
    String(profd.port), String(ms), '25'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  prober.stdout.on('data', (d) => { out += d; });
  return new Promise((resolve) => prober.on('close', () => resolve(JSON.parse(out))));
}

const pct = (xs, p) => { const v = [...xs].sort((a, b) => a - b); return v[Math.min(v.length - 1, Math.floor(v.length * p))]; };

before(async () => {
  dir = tempDir('profd-hostile-');
  profd = await startProfd({ storage: path.join(dir, 'data'), extraArgs: [
    `--web.read-timeout=${READ_TIMEOUT_S}s`, `--scrape.max-body-bytes=${MAX_BODY}`,
    // every attacker here comes from 127.0.0.1, as the prober does: this file
    // tests the read deadline and budgets, not the per-address cap (operate.test.mjs)
    '--web.max-connections-per-ip=0'] });
  // series with long values for the regex attack
  for (let i = 0; i < 8; i++) {
    const r = await push(`long${i}`, `,v=${LONG}`);
    assert.equal(r.status, 200, r.body);
  }
});

after(async () => {
  await killAll();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('slowloris, idle connections, 1 byte/s bodies and catastrophic regexes: health and pushes unaffected', { timeout: 290000 }, async () => {
  const idle0 = await metric('profd_http_cut_off_total', 'reason="idle"');
  const slow0 = await metric('profd_http_cut_off_total', 'reason="read_timeout"');
  const rss0 = rssBytes();
  // the same prober before the attack: this machine's latency at its
  // present load (printed beside the figures under attack)
  const base = await probeHealth(3000);
  const baseP99 = pct(base.ms, 0.99);
  const attackers = [];
  const timers = [];

  // 2,000 idle connections
  for (let i = 0; i < 2000; i++) attackers.push({ kind: 'idle', s: rawSocket() });
  // 200 slowloris connections: a request line, then a header line a second
  for (let i = 0; i < 200; i++) {
    const s = rawSocket();
    s.connected.then(() => s.write(`GET /-/healthy HTTP/1.1\r\nHost: 127.0.0.1\r\n`));
    attackers.push({ kind: 'slowloris', s });
  }
  // 20 bodies at 1 byte/s
  for (let i = 0; i < 20; i++) {
    const s = rawSocket();
    s.connected.then(() => s.write(`POST /api/0/profiles?service=slow&type=heap HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
      `Content-Type: application/octet-stream\r\nContent-Length: ${HEAP.length}\r\n\r\n`));
    attackers.push({ kind: 'slowbody', s });
  }
  let tick = 0;
  timers.push(setInterval(() => {
    tick++;
    for (const a of attackers) {
      if (a.s.closedAt) continue;
      if (a.kind === 'slowloris') a.s.write(`X-Trickle-${tick}: x\r\n`);
      else if (a.kind === 'slowbody') a.s.write(HEAP.subarray(tick - 1, tick));
    }
  }, 1000));
  await Promise.all(attackers.map((a) => a.s.connected.catch(() => {})));

  // four catastrophic regex queries at once, repeated
  const sel = encodeURIComponent('{v=~"(a+)+"}');
  let regexDone = false;
  const regexStatuses = [];
  const regexLoops = [0, 1, 2, 3].map(async () => {
    while (!regexDone) {
      const r = await request('GET', `/api/v1/series?match[]=${sel}`, null, 60000);
      regexStatuses.push(r);
    }
  });

  // the well-behaved clients: health every 25 ms from a process of its own
  // (so its latencies are profd's, not this event loop's, busy with 2,220
  // attacker sockets and the regex loops), a push every 250 ms from here
  const pushes = [];
  const durationMs = (READ_TIMEOUT_S + 6) * 1000;
  const until = performance.now() + durationMs;
  const probeDone = probeHealth(durationMs);
  let n = 0;
  // at least 10 pushes however slow this machine is, while the attack lasts
  while (performance.now() < until || pushes.length < 10) {
    pushes.push(await push(`wb${n++}`));
    await sleep(250);
  }
  const probed = await probeDone;
  const health = probed.ms.map((ms) => ({ ms }));
  regexDone = true;
  await Promise.all(regexLoops);
  for (const t of timers) clearInterval(t);

  assert.equal(probed.bad.length, 0, `health probes failed: ${JSON.stringify(probed.bad.slice(0, 3))}`);
  const p99 = pct(health.map((h) => h.ms), 0.99);
  console.log(`health: ${health.length} probes, p50 ${pct(health.map((h) => h.ms), 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...health.map((h) => h.ms)).toFixed(1)} ms`);
  console.log(`health before the attack: ${base.ms.length} probes, p99 ${baseP99.toFixed(1)} ms`);
  // Every probe answered 200 (each has a 60 s hang guard, health_probe.mjs):
  // before the epoll server every probe timed out. The p99 goal (< 100 ms)
  // is bench/hostile's: it depends on this machine's load.
  assert.equal(base.bad.length, 0, JSON.stringify(base.bad.slice(0, 3)));
  console.log(`load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  assert.ok(probed.ms.length > 0, 'health probes ran during the attack');
  const badPush = pushes.filter((p) => p.status !== 200);
  assert.equal(badPush.length, 0, `pushes failed: ${JSON.stringify(badPush.slice(0, 3))}`);
  console.log(`pushes: ${pushes.length}, p99 ${pct(pushes.map((p) => p.ms), 0.99).toFixed(1)} ms`);
  assert.ok(pushes.length >= 10);
  assert.ok(regexStatuses.length >= 4);
  for (const r of regexStatuses) {
    assert.equal(r.status, 422, r.body);
    assert.match(r.body, /backtracking limit/);
  }
  console.log(`regex queries: ${regexStatuses.length}, p99 ${pct(regexStatuses.map((r) => r.ms), 0.99).toFixed(1)} ms`);

  // every attacker is cut off by the deadline (plus the reaper's tick)
  await waitFor('every attacker to be cut off', () => {
    const open = attackers.filter((a) => a.s.closedAt === null);
    if (open.length === 0) return true;
    const kinds = {};
    for (const a of open) kinds[a.kind] = (kinds[a.kind] || 0) + 1;
    throw new Error(`still open: ${JSON.stringify(kinds)}`);
  }, 180000, 500); // --web.read-timeout (5 s) and the reaper's tick; minutes bound a hang
  for (const a of attackers) a.s.sock.destroy();
  const idle1 = await metric('profd_http_cut_off_total', 'reason="idle"');
  const slow1 = await metric('profd_http_cut_off_total', 'reason="read_timeout"');
  console.log(`cut off: idle ${idle1 - idle0}, read_timeout ${slow1 - slow0}`);
  // Every attacker is cut off and counted. Which reason each gets depends on
  // whether the server had parsed its request head by then (read_timeout)
  // or not yet (idle), and with 2,220 sockets at once on a busy machine a
  // slow body may still be unparsed (CI: 19 of 20): the reason is checked
  // on one slow body alone below.
  assert.ok(idle1 - idle0 + slow1 - slow0 >= 2220, `cut-offs ${idle1 - idle0} + ${slow1 - slow0} (want >= 2,220)`);
  const rss1 = rssBytes();
  console.log(`RSS ${(rss0 / 1048576).toFixed(1)} -> ${(rss1 / 1048576).toFixed(1)} MiB`);
  if (!underAsan()) assert.ok(rss1 - rss0 < 100 * 1048576, `RSS grew by ${((rss1 - rss0) / 1048576).toFixed(1)} MiB`);
  // nothing the slow bodies sent was stored
  const r = await request('GET', '/api/0/profiles?service=slow&type=heap&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z');
  assert.ok(!/"service":"slow"/.test(r.body), r.body.slice(0, 300));
});

test('a request whose body stops coming is cut off as read_timeout, not stored', { timeout: 180000 }, async () => {
  const slow0 = await metric('profd_http_cut_off_total', 'reason="read_timeout"');
  const s = rawSocket();
  await s.connected;
  s.write(`POST /api/0/profiles?service=stalled&type=heap HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    `Content-Type: application/octet-stream\r\nContent-Length: ${HEAP.length}\r\n\r\n`);
  s.write(HEAP.subarray(0, 100));
  await waitFor('the stalled request to be cut off', () => s.closedAt !== null, 180000, 200);
  s.sock.destroy();
  // at least this one: a straggler of the previous test's thousands of slow
  // connections may be cut off meanwhile (seen once at load 20: slow0 + 2)
  const slow1 = await metric('profd_http_cut_off_total', 'reason="read_timeout"');
  assert.ok(slow1 >= slow0 + 1, `read_timeout cut-offs ${slow0} -> ${slow1}`);
  const r = await request('GET', '/api/0/profiles?service=stalled&type=heap&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z');
  assert.ok(!/"service":"stalled"/.test(r.body), r.body.slice(0, 300));
});

test('2,000 requests with 600 query arguments: 400 each, RSS flat', { timeout: 180000 }, async () => {
  const q = Array.from({ length: 600 }, (_, i) => `a${i}=1`).join('&');
  const before0 = await metric('profd_http_rejected_total', 'reason="too_many_args"');
  // warm up, then measure
  for (let i = 0; i < 50; i++) assert.equal((await request('GET', `/api/v1/series?${q}`)).status, 400);
  const rss0 = rssBytes();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  let done = 0;
  const worker = async () => {
    while (done < 2000) {
      done++;
      const r = await new Promise((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: profd.port, path: `/api/v1/series?${q}`, agent }, (res) => {
          const c = [];
          res.on('data', (d) => c.push(d));
          res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(c).toString() }));
        });
        req.on('error', (e) => resolve({ status: 0, body: e.message }));
      });
      assert.equal(r.status, 400, r.body);
      assert.match(r.body, /too many query arguments/);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  agent.destroy();
  const rss1 = rssBytes();
  const after1 = await metric('profd_http_rejected_total', 'reason="too_many_args"');
  console.log(`600 args x 2,000: RSS ${(rss0 / 1048576).toFixed(1)} -> ${(rss1 / 1048576).toFixed(1)} MiB`);
  assert.ok(after1 - before0 >= 2050);
  if (!underAsan()) assert.ok(rss1 - rss0 < 20 * 1048576, `RSS grew by ${((rss1 - rss0) / 1048576).toFixed(1)} MiB`);
});

test('a GET of 1,500 and 3,000 query arguments: 400 naming the cap, not a connection closed unanswered', async () => {
  // libmicrohttpd also split the query into the connection's pool and, past
  // ~900 short arguments, closed the connection with no answer
  for (const n of [1500, 3000]) {
    const q = Array.from({ length: n }, (_, i) => `a${i}=1`).join('&');
    const before = await metric('profd_http_rejected_total', 'reason="too_many_args"');
    const r = await request('GET', `/api/v1/labels?${q}`);
    assert.equal(r.status, 400, `${n} args: ${r.status} ${r.body}`);
    assert.match(r.body, /too many query arguments: the limit is 512/);
    assert.equal(await metric('profd_http_rejected_total', 'reason="too_many_args"'), before + 1);
  }
});

test('100 unfinished over-cap bodies: RSS growth < 50 MB, nothing stored, refused', { timeout: 180000 }, async () => {
  const rss0 = rssBytes();
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const socks = [];
  for (let i = 0; i < 100; i++) {
    const s = rawSocket();
    socks.push(s);
    // half chunked (no size known), half with a Content-Length under the cap
    // that the body then overruns is impossible in HTTP; so: chunked bodies
    // past the cap, and Content-Length over the cap (413 at once)
    s.connected.then(() => {
      if (i % 2 === 0) {
        s.write(`POST /api/0/profiles?service=big&type=heap HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n`);
        for (let k = 0; k < (MAX_BODY * 1.5) / chunk.length; k++) s.write(`${chunk.length.toString(16)}\r\n`), s.write(chunk), s.write('\r\n');
      } else {
        s.write(`POST /api/0/profiles?service=big&type=heap HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${MAX_BODY * 4}\r\n\r\n`);
        for (let k = 0; k < (MAX_BODY * 1.5) / chunk.length; k++) s.write(chunk);
      }
    });
  }
  await Promise.all(socks.map((s) => s.connected));
  await sleep(3000);
  const rss1 = rssBytes();
  console.log(`100 over-cap bodies: RSS ${(rss0 / 1048576).toFixed(1)} -> ${(rss1 / 1048576).toFixed(1)} MiB`);
  if (!underAsan()) assert.ok(rss1 - rss0 < 50 * 1048576, `RSS grew by ${((rss1 - rss0) / 1048576).toFixed(1)} MiB`);
  assert.equal((await request('GET', '/-/healthy')).status, 200);
  await waitFor('the over-cap senders to be cut off', () => socks.every((s) => s.closedAt !== null), 120000, 500);
  for (const s of socks) s.sock.destroy();
  const r = await request('GET', '/api/0/profiles?service=big&type=heap&from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z');
  assert.ok(!/"service":"big"/.test(r.body), r.body.slice(0, 300));
  assert.ok((await metric('profd_http_rejected_total', 'reason="body_too_large"')) >= 50);
});

test('focus=, ignore=, hide= regexes under the PCRE2 limits: a catastrophic one is 422', { timeout: 180000 }, async () => {
  // a frame name of 4,000 "a"s and a "!" (Pyroscope's folded format)
  const name = 'a'.repeat(4000) + '!';
  const up = await request('POST', '/ingest?name=longframe.cpu&format=folded&from=now-1m&until=now', Buffer.from(`main;${name} 100\nmain;other 50\n`));
  assert.equal(up.status, 200, up.body);
  const sel = encodeURIComponent('{service_name="longframe"}');
  const now = Math.floor(Date.now() / 1000);
  const q = (extra) => `/api/v1/query?mode=merge&query=${sel}&from=${now - 600}&to=${now + 60}&report=top&${extra}`;
  // a harmless focus works: the long frame is there
  const okr = await request('GET', q('focus=main'));
  assert.equal(okr.status, 200, okr.body);
  assert.ok(okr.body.includes(name.slice(0, 100)), okr.body.slice(0, 300));
  for (const param of ['focus', 'ignore', 'hide']) {
    const r = await request('GET', q(`${param}=${encodeURIComponent('(a+)+$')}`), null, 60000);
    assert.equal(r.status, 422, `${param}: ${r.status} ${r.body.slice(0, 300)}`);
    assert.match(r.body, new RegExp(`${param} regex`));
    assert.match(r.body, /backtracking limit/);
    // before the limits one such regex took 1.7 s per profile; now PCRE2's
    // backtracking limit stops it (the 422 above says so); how fast is
    // bench/hostile's figure
    console.log(`${param}=(a+)+$: 422 in ${r.ms.toFixed(1)} ms`);
  }
});
