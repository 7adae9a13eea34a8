// Issue 26 item 7: profefe's own README command with a real profile over
// 1 MB. A real Go program (tests/ui/bigflame, built with Debian's golang-go)
// writes its heap profile through runtime/pprof (gzip level 1, as Go writes
// every profile; 360,000 distinct stacks: ~1.2 MB); the real curl posts it
// exactly as profefe's README says:
//   curl -X POST '.../api/0/profiles?service=apid&type=heap' --data-binary @big.pb.gz
// curl sends it as application/x-www-form-urlencoded; profd must read the raw
// body whatever the Content-Type (main parsed it as a form: "400 too many
// query arguments"). The profile is stored and GET /api/0/profiles/ID gives
// back the same bytes; so is its uncompressed form (10 MB of protobuf with
// over 6,000 '&' bytes: main refused it as a form of too many arguments even
// where the gzip one passed by luck); Prometheus' API still takes a form POST.
//
//   PROFD_BIN=build/profd node --test tests/e2e/profefe_curl.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { SRC, goEnv, http, killAll, profdBin, run, startProfd, tempDir } from './lib.mjs';

let dir, profd, big;

before(async () => {
  profdBin();
  dir = tempDir('profd-profefe-curl-');
  const bin = path.join(dir, 'bigflame');
  big = path.join(dir, 'big.pb.gz');
  let r = await run('go', ['build', '-o', bin, '.'], { cwd: path.join(SRC, 'tests', 'ui', 'bigflame'), env: goEnv(dir) }, 180000);
  assert.equal(r.code, 0, `go build of tests/ui/bigflame (is golang-go installed?)\n${r.stdout}${r.stderr}`);
  r = await run(bin, ['-n', '360000', '-depth', '10', '-o', big], { cwd: dir }, 180000);
  assert.equal(r.code, 0, `bigflame\n${r.stdout}${r.stderr}`);
  profd = await startProfd({ storage: path.join(dir, 'data') });
});

after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

test('curl --data-binary @big.pb.gz (over 1 MB, gzip level 1) to profefe\'s push is stored', { timeout: 120000 }, async () => {
  const body = fs.readFileSync(big);
  assert.ok(body.length >= 1 << 20, `the profile is over 1 MB: ${body.length}`);
  assert.equal(body[0], 0x1f);
  assert.equal(body[1], 0x8b);
  assert.equal(body[8], 4, 'gzip XFL 4: the fastest level, as Go\'s runtime/pprof writes');
  const r = await run('curl', ['-sS', '-v', '-X', 'POST', `${profd.base}/api/0/profiles?service=apid&type=heap`,
    '--data-binary', `@${big}`, '-w', '\n%{http_code}'], {}, 60000);
  assert.equal(r.code, 0, `curl: ${r.stderr}`);
  assert.match(r.stderr, /Content-Type: application\/x-www-form-urlencoded/, 'curl sends a form Content-Type');
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.pop(), '200', r.stdout);
  const ans = JSON.parse(lines.join('\n'));
  assert.equal(ans.code, 200, r.stdout);
  assert.equal(ans.body.service, 'apid');
  const got = await http(`${profd.base}/api/0/profiles/${ans.body.id}`, { timeoutMs: 60000 });
  assert.equal(got.status, 200, got.text.slice(0, 300));
  const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
  assert.equal(sha(got.buf), sha(body), 'the stored profile is the pushed bytes');
});

test('the same profile uncompressed (10 MB of protobuf, over 6,000 \'&\' bytes) is stored too', { timeout: 120000 }, async () => {
  // How many '&' (0x26) bytes Go's encoding holds depends on the addresses
  // of this run; one more string_table entry (field 6) of 6,000 '&' makes
  // it sure. An unused string is valid pprof, and a repeated field may
  // continue after the others (protobuf concatenation).
  const amps = Buffer.alloc(6000, '&');
  const raw = Buffer.concat([zlib.gunzipSync(fs.readFileSync(big)), Buffer.from([0x32, 0xf0, 0x2e]), amps]);
  const rawFile = path.join(dir, 'big.pb');
  fs.writeFileSync(rawFile, raw);
  assert.ok(raw.filter((b) => b === 0x26).length > 4096, 'more \'&\' than a form may have arguments');
  const r = await run('curl', ['-sS', '-X', 'POST', `${profd.base}/api/0/profiles?service=apid-raw&type=heap`,
    '--data-binary', `@${rawFile}`, '-w', '\n%{http_code}'], {}, 60000);
  assert.equal(r.code, 0, `curl: ${r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.pop(), '200', r.stdout.slice(0, 300));
  const ans = JSON.parse(lines.join('\n'));
  const got = await http(`${profd.base}/api/0/profiles/${ans.body.id}`, { timeoutMs: 60000 });
  assert.equal(got.status, 200, got.text.slice(0, 300));
  assert.ok(got.buf.equals(raw), 'the stored profile is the pushed bytes');
});

test('Prometheus\' API still reads a form POST', async () => {
  const r = await http(`${profd.base}/api/v1/series`, {
    method: 'POST', body: 'match[]=heap{service="apid"}', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.data.length, 1, r.text);
  assert.equal(r.json.data[0].service, 'apid');
});
