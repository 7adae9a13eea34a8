// Issue 15 "Serving": the UI's assets and JSON replies are gzip-compressed
// for clients that accept it, and assets carry an entity tag so a reload
// revalidates with a 304 instead of downloading them again. Real binary,
// raw HTTP (node:http: no transparent decompression) and zlib.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { SRC, TESTDATA, killAll, qs, startProfd, tempDir } from './lib.mjs';

let profd;
before(async () => { profd = await startProfd({ storage: path.join(tempDir('profd-serving-'), 'data') }); });
after(killAll);

function raw(pathq, headers = {}, method = 'GET', body = null) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: profd.port, path: pathq, method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

test('assets: gzip when accepted, identity otherwise, same bytes either way', async () => {
  const file = fs.readFileSync(path.join(SRC, 'src', 'ui', 'assets', 'app.js'));
  const z = await raw('/static/app.js', { 'Accept-Encoding': 'gzip, deflate, br' });
  assert.equal(z.status, 200);
  assert.equal(z.headers['content-encoding'], 'gzip');
  assert.match(z.headers.vary || '', /Accept-Encoding/);
  assert.ok(z.body.length < file.length / 2, `compressed ${z.body.length} of ${file.length} bytes`);
  assert.deepEqual(zlib.gunzipSync(z.body), file);
  const plain = await raw('/static/app.js');
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.deepEqual(plain.body, file);
  const refused = await raw('/static/app.js', { 'Accept-Encoding': 'gzip;q=0, identity' });
  assert.equal(refused.headers['content-encoding'], undefined, 'gzip;q=0 is a refusal');
});

test('assets: an entity tag, and 304 on revalidation (a changed tag gets the body)', async () => {
  for (const p of ['/', '/static/app.js', '/static/style.css']) {
    const a = await raw(p);
    assert.equal(a.status, 200);
    const tag = a.headers.etag;
    assert.match(tag || '', /^W\/"[0-9a-f]{20}"$/, `${p}: ETag ${tag}`);
    assert.equal(a.headers['cache-control'], 'no-cache');
    const b = await raw(p, { 'If-None-Match': tag, 'Accept-Encoding': 'gzip' });
    assert.equal(b.status, 304, p);
    assert.equal(b.body.length, 0);
    const c = await raw(p, { 'If-None-Match': 'W/"00000000000000000000"' });
    assert.equal(c.status, 200);
    assert.ok(c.body.length > 0);
  }
  const js = await raw('/static/app.js'), css = await raw('/static/style.css');
  assert.notEqual(js.headers.etag, css.headers.etag, 'the tag follows the content');
});

test('JSON replies are gzip-compressed when accepted; pprof is left as it is', async () => {
  const heap = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
  const now = Math.floor(Date.now() / 1000) * 1000;
  for (let i = 0; i < 40; i++) {
    const r = await raw('/api/0/profiles?' + qs({ service: 'srv', type: 'heap', instance_id: `i-${i % 4}`,
      created_at: new Date(now - 60000 - i * 1000).toISOString().replace(/\.\d+Z$/, 'Z') }), {}, 'POST', heap);
    assert.equal(r.status, 200, r.body.toString());
  }
  const q = '/api/v1/query_range?' + qs({ query: 'heap{service="srv"}', from: String(now / 1000 - 3600), to: String(now / 1000) });
  const z = await raw(q, { 'Accept-Encoding': 'gzip' });
  assert.equal(z.headers['content-encoding'], 'gzip');
  const json = JSON.parse(zlib.gunzipSync(z.body).toString());
  assert.equal(json.status, 'success');
  assert.equal(json.data.length, 4);
  const plain = await raw(q);
  assert.deepEqual(JSON.parse(plain.body.toString()), json);
  const pb = await raw('/api/v1/query?' + qs({ query: 'heap{service="srv",instance_id="i-0"}', time: String(now / 1000) }), { 'Accept-Encoding': 'gzip' });
  assert.equal(pb.status, 200);
  assert.equal(pb.headers['content-encoding'], undefined, 'the pprof body is gzip already, not wrapped again');
  assert.equal(pb.body[0], 0x1f);
});
