// Issue 19 "input hygiene" and "time bounds", against the real profd binary:
// what used to be acknowledged and then lost or mangled is refused with a
// 400 naming the input, counted in /metrics, and changes nothing stored.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TESTDATA, apiData, http, killAll, qs, startProfd, tempDir } from './lib.mjs';

let profd;
const heap = fs.readFileSync(path.join(TESTDATA, 'pprof', 'go-demo-once', 'heap.pb.gz'));
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

before(async () => {
  profd = await startProfd({ storage: path.join(tempDir('profd-hygiene-'), 'data') });
});
after(killAll);

function push(params, body = heap) {
  return http(`${profd.base}/api/0/profiles?${params}`, {
    method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' },
  });
}

async function stored(sel) {
  const data = await apiData(profd.base, '/api/v1/query_range?' + qs({
    query: sel, from: '0', to: String(Date.now() / 1000 + 3600),
  }));
  return data.reduce((n, s) => n + s.timestamps.length, 0);
}

async function metric(re) {
  const r = await http(profd.base + '/metrics');
  const m = r.text.match(re);
  return m ? Number(m[1]) : 0;
}

test('a push dated in the future is refused and wipes nothing (was: 200, then every profile deleted)', async () => {
  const now = Math.floor(Date.now() / 1000) * 1000;
  for (let i = 0; i < 20; i++) {
    const r = await push(qs({ service: 'x', type: 'heap', instance_id: 'a', created_at: iso(now - 60000 - i * 1000) }));
    assert.equal(r.status, 200, r.text);
  }
  const before = await metric(/^profd_rejected_input_total\{reason="out_of_bounds"\} (\d+)/m);
  const r = await push(qs({ service: 'x', type: 'heap', instance_id: 'a', created_at: '2030-01-01T00:00:00' }));
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /out of bounds.*--storage\.future-grace=10m/);
  const within = await push(qs({ service: 'x', type: 'heap', instance_id: 'b', created_at: iso(now + 5 * 60000) }));
  assert.equal(within.status, 200, `5 minutes ahead is inside the grace: ${within.text}`);
  assert.equal(await metric(/^profd_rejected_input_total\{reason="out_of_bounds"\} (\d+)/m), before + 1);
  assert.equal(await stored('heap{service="x"}'), 21, 'the 20 profiles and the one inside the grace');
});

test('a push older than the retention is refused, not acknowledged and deleted', async () => {
  const r = await push(qs({ service: 'old', type: 'heap', created_at: iso(Date.now() - 20 * 86400e3) }));
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /out of bounds.*--storage\.retention\.time=15d/);
  const r2 = await push(qs({ service: 'old', type: 'heap', created_at: '2020-03-01T10:00:00' }));
  assert.equal(r2.status, 400, r2.text);
  assert.equal(await stored('heap{service="old"}'), 0);
});

test('a NUL or control byte in a label is refused (was: "admin%00evil" stored as "admin")', async () => {
  const before = await metric(/^profd_http_rejected_total\{reason="nul_in_argument"\} (\d+)/m);
  const r = await push('service=admin%00evil&type=heap');
  assert.equal(r.status, 400, r.text);
  assert.match(r.text, /NUL/);
  assert.equal(await metric(/^profd_http_rejected_total\{reason="nul_in_argument"\} (\d+)/m), before + 1);
  const r2 = await push(qs({ service: 'adm\x01in', type: 'heap' }));
  assert.equal(r2.status, 400, r2.text);
  assert.match(r2.text, /control byte 0x01/);
  const r3 = await push(qs({ service: 'ok', type: 'heap', labels: 'k=v\x1b[31m' }));
  assert.equal(r3.status, 400, r3.text);
  assert.equal(await stored('heap{service=~"adm.*"}'), 0);
  assert.equal(await stored('heap{service="ok"}'), 0);
});

test('numeric parameters are parsed strictly (was: limit=%20-1 and a 23-digit limit read as "all rows")', async () => {
  for (const limit of [' -1', '-1', '12345678901234567890123', '1e3', '0x10', '']) {
    const r = await http(`${profd.base}/api/0/profiles?` + qs({ service: 'x', type: 'heap', limit }));
    if (limit === '') { assert.equal(r.status, 200, 'an empty limit is "no limit"'); continue; }
    assert.equal(r.status, 400, `profefe limit=${JSON.stringify(limit)}: ${r.text}`);
    assert.match(r.text, /limit/);
  }
  const ok = await http(`${profd.base}/api/0/profiles?` + qs({ service: 'x', type: 'heap', limit: '3' }));
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.body.length, 3);
  for (const limit of [' -1', '99999999999999999999999']) {
    const r = await http(`${profd.base}/api/v1/query?` + qs({ query: 'heap{service="x",instance_id="a"}', time: String(Date.now() / 1000), report: 'top', limit }));
    assert.equal(r.status, 400, `api/v1 limit=${JSON.stringify(limit)}: ${r.text}`);
  }
});
