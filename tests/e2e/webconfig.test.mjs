// Issue 20 items 1-3: `--web.config.file` (Prometheus exporter-toolkit's
// format) with certificates made by `openssl` here, in a temp dir:
//   - TLS only, curl --tlsv1.3; plain HTTP gets no HTTP answer;
//   - RequireAndVerifyClientCert: no certificate or one of another CA is
//     refused at the handshake (TLS 1.2: the handshake fails; TLS 1.3: the
//     connection closes before any HTTP byte), the CA's client cert passes;
//   - basic auth (bcrypt, cost 6): right / wrong / unknown user, 401 with
//     WWW-Authenticate: Basic, and the time of 200 unknown-user vs 200
//     known-user-wrong-password tries (interleaved) compared loosely;
//   - the configured headers; rate_limit -> 429, counted in /metrics;
//   - profd_access_control: a push user cannot read, a query user cannot
//     push (`profd push` with --tls.* and --basic-auth.*);
//   - `go tool pprof -tls_ca` with user:password@ in the URL reading a merge;
//   - the UI in headless chromium behind basic auth (and 401 without);
//   - a config with an unknown key: `profd check web-config` exits 2 naming
//     FILE:LINE; the file re-read when it changes (a user added).
//
//   PROFD_BIN=build/profd node --test tests/e2e/webconfig.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Proc, SRC, TESTDATA, freePort, goEnv, http, killAll, profdBin, qs, run, tempDir, waitFor } from './lib.mjs';

const CHROMIUM = process.env.PD_CHROMIUM || '/usr/bin/chromium';
const HEAP = path.join(TESTDATA, 'pprof', 'go-demo-series', 'heap-0001.pb.gz');
let dir;

function sh(cmd, args, opts = {}) {
  return run(cmd, args, { cwd: dir, ...opts }, 60000).then((r) => {
    if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`);
    return r;
  });
}

// A bcrypt hash ($2b$, cost 6) of pw through libcrypt (python3's crypt module).
async function bcrypt(pw) {
  const r = await sh('python3', ['-W', 'ignore', '-c',
    'import crypt,sys;print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2**6)))', pw]);
  const h = r.stdout.trim();
  assert.match(h, /^\$2b\$06\$/);
  return h;
}

// An EC P-256 key and a certificate signed by ca (self-signed when ca is null).
async function makeCert(name, cn, san, ca) {
  const key = `${name}.key`, crt = `${name}.crt`;
  if (!ca) {
    await sh('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', key, '-out', crt, '-days', '2', '-subj', `/CN=${cn}`]);
  } else {
    await sh('openssl', ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', key, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    await sh('openssl', ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`,
      '-CAcreateserial', '-out', crt, '-days', '2', '-extfile', `${name}.ext`]);
  }
  return { key: path.join(dir, key), crt: path.join(dir, crt) };
}

async function startWith(name, yml) {
  const file = path.join(dir, `${name}.yml`);
  fs.writeFileSync(file, yml);
  const port = await freePort();
  const p = new Proc(name, profdBin(), ['serve', `--storage.path=${path.join(dir, name + '-data')}`,
    // localhost, as a user with a certificate for "localhost" would: on a
    // stock Debian 12 it resolves to ::1 first, and Node 18 connects to the
    // first answer only (issue 34: profd serves both families)
    `--web.listen-address=localhost:${port}`, `--web.config.file=${file}`,
    // /-/reload is an admin endpoint only with the lifecycle flag (issue 20 item 4)
    '--web.enable-lifecycle']);
  p.port = port;
  p.file = file;
  await waitFor(`${name} to listen`, async () => {
    if (p.exited) throw new Error(`${name} exited\n${p.tail()}`);
    return /profd ready/.test(p.out);
  }, 120000, 100);
  return p;
}

let ca, srv, cli, evil, hash, agent;

// One request over https with node's own TLS: {status, headers, text}.
function req(url, { method = 'GET', auth, body, headers = {}, ...tlsOpts } = {}) {
  return new Promise((resolve, reject) => {
    const r = https.request(url, {
      method, agent: tlsOpts.agent === undefined ? agent : tlsOpts.agent,
      ca: fs.readFileSync(ca.crt), headers: { ...headers, ...(auth ? { Authorization: 'Basic ' + Buffer.from(auth).toString('base64') } : {}) },
      timeout: 120000, ...tlsOpts, // a hang guard
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }));
    });
    r.on('error', reject);
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.end(body);
  });
}

let A; // TLS + users + headers + groups
const base = () => `https://localhost:${A.port}`;

before(async () => {
  dir = tempDir('profd-webcfg-');
  ca = await makeCert('ca', 'profd test CA', null, null);
  srv = await makeCert('srv', 'localhost', 'DNS:localhost,IP:127.0.0.1', 'ca');
  cli = await makeCert('cli', 'pusher', 'DNS:pusher.example', 'ca');
  evil = await makeCert('evil', 'evil', null, null);
  hash = await bcrypt('s3cret');
  agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  A = await startWith('a', `tls_server_config:
  cert_file: srv.crt
  key_file: srv.key
http_server_config:
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  alice: ${hash}
  pusher: ${hash}
profd_access_control:
  push_users: [pusher]
  query_users: [alice]
  admin_users: [alice]
  unauthenticated_paths: [/-/healthy]
`);
});

after(async () => {
  if (agent) agent.destroy();
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('profd check web-config: ok exits 0; an unknown key exits 2 naming FILE:LINE', async () => {
  const ok = await run(profdBin(), ['check', 'web-config', A.file]);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /SUCCESS/);
  const bad = path.join(dir, 'bad.yml');
  fs.writeFileSync(bad, `basic_auth_users:\n  alice: ${hash}\nhttp_server_config:\n  http2: true\n  header:\n    X-Frame-Options: deny\n`);
  const r = await run(profdBin(), ['check', 'web-config', bad]);
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /bad\.yml:5:3: field header not found in http_server_config/);
  // profd serve refuses it too, with exit 2
  const s = await run(profdBin(), ['serve', `--storage.path=${path.join(dir, 'x')}`, '--web.listen-address=127.0.0.1:0',
    `--web.config.file=${bad}`], {}, 20000);
  assert.equal(s.code, 2, s.stdout + s.stderr);
  assert.match(s.stderr, /bad\.yml:5:3/);
  // a header outside the five, a bad X-Frame-Options value, a bad hash
  for (const [yml, re] of [
    ['http_server_config:\n  headers:\n    Server: x\n', /:3:5: HTTP header "Server" can not be configured/],
    ['http_server_config:\n  headers:\n    X-Frame-Options: allow\n', /:3:22: invalid value for X-Frame-Options/],
    ['basic_auth_users:\n  bob: plaintext\n', /:2:8: basic_auth_users: bob: not a bcrypt hash/],
    ['tls_server_config:\n  cert_file: srv.crt\n', /missing one of key or key_file/],
  ]) {
    fs.writeFileSync(bad, yml);
    const q = await run(profdBin(), ['check', 'web-config', bad]);
    assert.equal(q.code, 2, yml);
    assert.match(q.stderr, re, q.stderr);
  }
});

test('TLS: curl --tlsv1.3 gets an answer; plain HTTP gets none', async () => {
  const r = await sh('curl', ['-sS', '-v', '--tlsv1.3', '--cacert', ca.crt, '-u', 'alice:s3cret', '-o', '/dev/null',
    '-w', '%{http_code}', `${base()}/api/v1/labels`]);
  assert.equal(r.stdout, '200');
  assert.match(r.stderr, /TLSv1\.3/);
  const p = await http(`http://127.0.0.1:${A.port}/-/healthy`, { timeoutMs: 5000 }).catch((e) => e);
  assert.ok(p instanceof Error, `plain HTTP must not get an HTTP reply: ${p.status}`);
});

test('basic auth: right 200, wrong 401, unknown 401, none 401 with WWW-Authenticate: Basic; the headers', async () => {
  const u = `${base()}/api/v1/labels`;
  const ok = await req(u, { auth: 'alice:s3cret' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.headers['x-frame-options'], 'deny');
  assert.equal(ok.headers['x-content-type-options'], 'nosniff');
  assert.equal(ok.headers['strict-transport-security'], 'max-age=31536000');
  for (const auth of ['alice:wrong', 'mallory:s3cret', undefined]) {
    const r = await req(u, { auth });
    assert.equal(r.status, 401, `${auth}: ${r.text}`);
    assert.equal(r.headers['www-authenticate'], 'Basic');
    assert.equal(r.headers['x-frame-options'], 'deny', 'headers on a 401 too (as the toolkit)');
    assert.doesNotMatch(r.text, /labels|data/);
  }
  // /-/healthy is open (profd_access_control.unauthenticated_paths); /-/ready is not
  assert.equal((await req(`${base()}/-/healthy`)).status, 200);
  assert.equal((await req(`${base()}/-/ready`)).status, 401);
  const m = await req(`${base()}/metrics`, { auth: 'alice:s3cret' });
  const v = (reason) => +(m.text.match(new RegExp(`profd_http_auth_failures_total\\{reason="${reason}"\\} (\\d+)`)) || [0, -1])[1];
  assert.ok(v('wrong_credentials') >= 2 && v('missing_credentials') >= 2, m.text.split('\n').filter((l) => /auth_fail/.test(l)).join('\n'));
});

test('no credentials: 401 as soon as the headers arrive, no body received (a 1 MB push announced, none sent)', async () => {
  const m0 = await req(`${base()}/metrics`, { auth: 'alice:s3cret' });
  const missing = (t) => +(t.match(/profd_http_auth_failures_total\{reason="missing_credentials"\} (\d+)/) || [0, 0])[1];
  const t0 = Date.now();
  const reply = await new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port: A.port, servername: 'localhost', ca: fs.readFileSync(ca.crt) }, () => {
      sock.write('POST /api/0/profiles?service=anon&type=heap HTTP/1.1\r\nHost: localhost\r\n' +
        'Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n');
    });
    let got = '';
    sock.on('data', (d) => {
      got += d;
      if (/\r\n\r\n/.test(got)) { sock.destroy(); resolve(got); }
    });
    sock.on('error', reject);
    setTimeout(() => { sock.destroy(); reject(new Error(`no reply in 120 s: ${got}`)); }, 120000).unref(); // a hang guard (unref: it must not keep node alive)
  });
  // the 401 came with no byte of the announced body sent: profd answered on
  // the headers alone (had it waited for the body, the only answer would be
  // the read timeout's cut-off) — no clock needed (issue 34)
  console.log(`early 401 after ${Date.now() - t0} ms`);
  assert.match(reply, /^HTTP\/1\.1 401/, reply);
  assert.match(reply, /WWW-Authenticate: Basic/i);
  assert.match(reply, /X-Frame-Options: deny/i, 'the configured headers on the early 401 too');
  const m1 = await req(`${base()}/metrics`, { auth: 'alice:s3cret' });
  assert.equal(missing(m1.text), missing(m0.text) + 1);
});

// The timing side channel of unknown users: the behaviour (an unknown user
// costs one bcrypt at the file's highest cost, like a known user's wrong
// password; repeated tries come from the cache) is asserted by the unit test
// http_auth (test_unknown_user_costs_a_bcrypt, counted, not timed); the
// medians printed here are bench/auth_timing's figures (issue 34: a timing
// comparison fails on a busy machine).
// PD_AUTH_TRIES: tries of each kind (20 in ctest; bench/auth_timing sets 200).
const AUTH_TRIES = Number(process.env.PD_AUTH_TRIES || 20);
test('timing: unknown-user tries and known-user wrong-password tries, 401 each (medians printed)', { timeout: 600000 }, async (t) => {
  // each try from its own loopback address (127.0.0.2, .3, ...): one address
  // with 5 failed logins in a row is made to wait (429 auth_backoff, issue 28),
  // which is not what this test times
  const u = `https://127.0.0.1:${A.port}/api/v1/labels`;
  const times = { unknown: [], wrong: [] };
  for (let i = 0; i < AUTH_TRIES; i++) {
    const from = `127.0.${1 + (i >> 8)}.${2 + (i & 255) % 250}`;
    const conn = new https.Agent({ keepAlive: true, maxSockets: 1, localAddress: from });
    for (const kind of i % 2 ? ['unknown', 'wrong'] : ['wrong', 'unknown']) {
      const auth = kind === 'unknown' ? `nobody${i}:pw${i}` : `alice:pw${i}`; // new passwords: no cache hit
      const t0 = process.hrtime.bigint();
      const r = await req(u, { auth, agent: conn });
      times[kind].push(Number(process.hrtime.bigint() - t0) / 1e6);
      assert.equal(r.status, 401);
    }
    conn.destroy();
  }
  // the cache answers a repeated try without bcrypt
  const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const mu = med(times.unknown), mw = med(times.wrong);
  t.diagnostic(`median ms: unknown user ${mu.toFixed(2)}, known user wrong password ${mw.toFixed(2)} (bcrypt cost 6, ${AUTH_TRIES} each)`);
  // a known user with a right password costs one bcrypt too: the unknown
  // path is not free (the dummy hash is checked)
  const ok = [];
  for (let i = 0; i < 20; i++) {
    const t0 = process.hrtime.bigint();
    await req(`${base()}/-/ready`, { auth: 'alice:s3cret' });
    ok.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.diagnostic(`median ms of a cached right password: ${med(ok).toFixed(2)}`);
  console.log(`auth timing: unknown ${mu.toFixed(2)} ms, wrong ${mw.toFixed(2)} ms, cached ${med(ok).toFixed(2)} ms (ratio ${(mu / mw).toFixed(2)})`);
});

test('profd_access_control: the push user cannot read, the query user cannot push (profd push over TLS)', { timeout: 180000 }, async () => {
  const pw = path.join(dir, 'pw');
  fs.writeFileSync(pw, 's3cret\n');
  const push = (user) => run(profdBin(), ['push', `--url=${base()}`, `--tls.ca-file=${ca.crt}`,
    `--basic-auth.username=${user}`, `--basic-auth.password-file=${pw}`, '--service=webcfg', '--type=heap', HEAP]);
  const p1 = await push('pusher');
  assert.equal(p1.code, 0, p1.stdout + p1.stderr);
  const p2 = await push('alice');
  assert.equal(p2.code, 1);
  assert.match(p2.stderr, /HTTP 403/);
  const nop = await run(profdBin(), ['push', `--url=${base()}`, `--tls.ca-file=${ca.crt}`, '--service=webcfg', HEAP]);
  assert.match(nop.stderr, /HTTP 401/);
  const notls = await run(profdBin(), ['push', `--url=${base()}`, '--service=webcfg', HEAP]);
  assert.equal(notls.code, 1, 'the server certificate is checked (no --tls.ca-file: refused)');
  const q = `${base()}/api/v1/labels`;
  assert.equal((await req(q, { auth: 'pusher:s3cret' })).status, 403);
  const a = await req(q, { auth: 'alice:s3cret' });
  assert.equal(a.status, 200);
  assert.match(a.text, /service/);
  // admin: alice yes, pusher no
  assert.equal((await req(`${base()}/-/reload`, { method: 'POST', auth: 'pusher:s3cret' })).status, 403);
  assert.notEqual((await req(`${base()}/-/reload`, { method: 'POST', auth: 'alice:s3cret' })).status, 403);
});

test('profd push --bearer-token-file, --tls.server-name and a client certificate reach a TLS proxy', { timeout: 180000 }, async () => {
  // a stand-in for a proxy in front of profd: node's https server records
  // what profd push sent (profd itself takes basic auth, not bearer tokens)
  const seen = [];
  const server = https.createServer({
    key: fs.readFileSync(srv.key), cert: fs.readFileSync(srv.crt), ca: fs.readFileSync(ca.crt),
    requestCert: true, rejectUnauthorized: true,
  }, (rq, rs) => {
    seen.push({ auth: rq.headers.authorization, cn: rq.socket.getPeerCertificate().subject.CN, url: rq.url });
    rq.resume();
    rq.on('end', () => { rs.setHeader('Content-Type', 'application/json'); rs.end('{"code":200,"body":{"id":"proxy-1"}}'); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const tok = path.join(dir, 'token');
    fs.writeFileSync(tok, 'tok-123\n');
    // the URL names 127.0.0.1; the certificate is checked against "localhost"
    const r = await run(profdBin(), ['push', `--url=https://127.0.0.1:${server.address().port}`, `--tls.ca-file=${ca.crt}`,
      '--tls.server-name=localhost', `--tls.cert-file=${cli.crt}`, `--tls.key-file=${cli.key}`,
      `--bearer-token-file=${tok}`, '--service=webcfg', HEAP]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /proxy-1/);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].auth, 'Bearer tok-123');
    assert.equal(seen[0].cn, 'pusher');
    assert.match(seen[0].url, /^\/api\/0\/profiles\?/);
    // usage errors: exit 2
    const u = await run(profdBin(), ['push', '--tls.cert-file=x', '--service=s', HEAP]);
    assert.equal(u.code, 2);
    const v = await run(profdBin(), ['push', `--bearer-token-file=${tok}`, '--basic-auth.username=a', '--service=s', HEAP]);
    assert.equal(v.code, 2);
  } finally {
    server.close();
  }
});

test('go tool pprof -tls_ca with user:password@ in the URL reads a merge', { timeout: 180000 }, async () => {
  // without the CA it is refused (the certificate is checked)
  const gd0 = path.join(dir, 'go0');
  fs.mkdirSync(gd0, { recursive: true });
  const u0 = `https://alice:s3cret@localhost:${A.port}/api/0/profiles/merge?` + qs({ service: 'webcfg', type: 'heap' });
  const r0 = await run('go', ['tool', 'pprof', '-top', u0], { env: goEnv(gd0), cwd: gd0 }, 100000);
  assert.notEqual(r0.code, 0);
  assert.match(r0.stderr, /certificate|x509/);
  const gd = path.join(dir, 'go');
  fs.mkdirSync(gd, { recursive: true });
  const url = `https://alice:s3cret@localhost:${A.port}/api/0/profiles/merge?` + qs({ service: 'webcfg', type: 'heap' });
  // `go tool pprof` (cmd/pprof) fetches http(s) URLs with its own client,
  // which ignores -tls_ca (the standalone pprof honours it): Go's
  // crypto/x509 reads the CA from SSL_CERT_FILE instead. Both are given.
  const env = { ...goEnv(gd), SSL_CERT_FILE: ca.crt };
  const r = await run('go', ['tool', 'pprof', '-top', `-tls_ca=${ca.crt}`, url], { env, cwd: gd }, 100000);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /flat%/);
  assert.match(r.stdout, /Type: inuse_space/);
  const bad = await run('go', ['tool', 'pprof', '-top', `-tls_ca=${ca.crt}`, url.replace('s3cret', 'nope')], { env, cwd: gd }, 100000);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stdout + bad.stderr, /401|Unauthorized/);
});

test('the UI in headless chromium behind basic auth', { timeout: 180000 }, async () => {
  const { chromium } = createRequire(path.join(SRC, 'tests', 'ui', 'package.json'))('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    timeout: 120000,
  });
  try {
    // without credentials: the browser's own request gets 401 (a headless
    // page without credentials turns the challenge into a navigation error)
    const anon = await browser.newContext({ ignoreHTTPSErrors: true });
    const r0 = await anon.request.get(`${base()}/`);
    assert.equal(r0.status(), 401);
    assert.equal(r0.headers()['www-authenticate'], 'Basic');
    await assert.rejects((await anon.newPage()).goto(`${base()}/`), /ERR_INVALID_AUTH_CREDENTIALS/);
    const ctx = await browser.newContext({ ignoreHTTPSErrors: true, httpCredentials: { username: 'alice', password: 's3cret' } });
    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const r = await page.goto(`${base()}/`);
    assert.equal(r.status(), 200);
    assert.equal(await page.title(), 'profd');
    // the chips come from /api/v1/label/__name__/values: the API calls pass too
    await page.waitForSelector('#type-chips a[data-q="heap"]', { timeout: 120000 });
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('the web config is re-read when it changes: a user added works without a restart', async () => {
  const h2 = await bcrypt('other');
  const yml = fs.readFileSync(A.file, 'utf8').replace('basic_auth_users:\n', `basic_auth_users:\n  carol: ${h2}\n`);
  fs.writeFileSync(A.file, yml);
  await waitFor('carol to be accepted', async () => (await req(`${base()}/api/v1/labels`, { auth: 'carol:other' })).status === 403, 120000);
  // carol is not in query_users: 403 (authenticated, outside the group), not 401
});

test('RequireAndVerifyClientCert: no client certificate or a foreign one is refused at the handshake', { timeout: 180000 }, async () => {
  const B = await startWith('b', `tls_server_config:
  cert_file: srv.crt
  key_file: srv.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  client_allowed_sans: [pusher.example]
`);
  const u = `https://localhost:${B.port}/-/healthy`;
  const good = await req(u, { agent: false, cert: fs.readFileSync(cli.crt), key: fs.readFileSync(cli.key) });
  assert.equal(good.status, 200);
  // TLS 1.2: the handshake itself fails
  for (const who of [{}, { cert: fs.readFileSync(evil.crt), key: fs.readFileSync(evil.key) }]) {
    const err = await new Promise((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port: B.port, servername: 'localhost', ca: fs.readFileSync(ca.crt), maxVersion: 'TLSv1.2', ...who });
      s.on('secureConnect', () => { s.destroy(); resolve(null); });
      s.on('error', (e) => resolve(e));
      s.on('close', () => resolve(new Error('closed during the handshake')));
    });
    assert.ok(err, `TLS 1.2 handshake ${who.cert ? 'with a foreign cert' : 'without a cert'} must fail`);
  }
  // TLS 1.3 (curl): no HTTP answer at all
  const r = await run('curl', ['-sS', '--tlsv1.3', '--cacert', ca.crt, '-o', '/dev/null', '-w', '%{http_code}', u]);
  assert.notEqual(r.code, 0);
  assert.equal(r.stdout, '000');
  const c = await run('curl', ['-sS', '--tlsv1.3', '--cacert', ca.crt, '--cert', cli.crt, '--key', cli.key, '-w', '%{http_code}', '-o', '/dev/null', u]);
  assert.equal(c.stdout, '200', c.stderr);
  // a CA cert without the allowed SAN is refused too (client_allowed_sans)
  const other = await makeCert('other', 'other', 'DNS:other.example', 'ca');
  const o = await run('curl', ['-sS', '--cacert', ca.crt, '--cert', other.crt, '--key', other.key, '-w', '%{http_code}', '-o', '/dev/null', u]);
  assert.equal(o.stdout, '000');
  const m = await run('curl', ['-sS', '--cacert', ca.crt, '--cert', cli.crt, '--key', cli.key, `https://localhost:${B.port}/metrics`]);
  // every refusal counted: no cert (TLS 1.2 and 1.3), the foreign one, the other SAN
  assert.match(m.stdout, /profd_http_auth_failures_total\{reason="client_certificate"\} 4\n/);
  await B.stop();
});

test('rate_limit: past the burst 429, counted in /metrics', { timeout: 180000 }, async () => {
  // one token per 3 s, 3 at once: of 12 requests the first 3 are answered,
  // and of the other 9 at most one more per 3 s that passed (however slow
  // this machine is: the bound comes from the time the 12 took, issue 34)
  const C = await startWith('c', 'rate_limit:\n  interval: 3s\n  burst: 3\n');
  const statuses = [];
  const t0 = Date.now();
  for (let i = 0; i < 12; i++) statuses.push((await http(`http://127.0.0.1:${C.port}/-/healthy`)).status);
  const refills = Math.floor((Date.now() - t0) / 3000) + 1;
  const n429 = statuses.filter((s) => s === 429).length;
  assert.ok(statuses.slice(0, 3).every((s) => s === 200), statuses.join());
  assert.ok(statuses.every((s) => s === 200 || s === 429), statuses.join());
  assert.ok(n429 >= 9 - refills, `${n429} of 12 refused with at most ${refills} tokens back: ${statuses.join()}`);
  // /metrics is limited too: poll until a token is back
  const m = await waitFor('/metrics past the limiter', async () => {
    const r = await http(`http://127.0.0.1:${C.port}/metrics`);
    return r.status === 200 && r;
  }, 120000, 1000);
  const v = +(m.text.match(/profd_http_rejected_total\{reason="rate_limited"\} (\d+)/) || [0, 0])[1];
  assert.ok(v >= n429, `rate_limited ${v} >= ${n429}`);
  await C.stop();
});
