// Issue 32: Prometheus' own test tables, extracted mechanically by
// tests/prometheus/extract.py from prometheus/prometheus (tag and commit in
// each JSON header), run against profd's real paths:
//  - TestRelabel (model/relabel/relabel_test.go): each case is a scrape job
//    whose static target carries the case's input labels and whose
//    relabel_configs are the case's rules; the labels profd reports in
//    /api/v1/targets are compared with the case's output (or the target is
//    among droppedTargets when the case drops it).
//  - TestBadConfigs (config/config_test.go + config/testdata/*.bad.yml):
//    `profd check config FILE` exits non-zero naming the same fault.
//  - the selector cases of promql/parser/parse_test.go and lex_test.go
//    through /api/v1/series?match[]=: 200 or 400 as Prometheus parses them.
// The exceptions below are documented in docs/configuration.md too.
//
//   PROFD_BIN=build/profd node --test tests/e2e/prometheus_tables.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SRC, freePort, http, killAll, profdBin, qs, run, startProfd, tempDir, waitFor } from './lib.mjs';

const PDIR = path.join(SRC, 'tests', 'prometheus');
// the tables of Prometheus 3 (tests/prometheus) and of Prometheus 2.42
// (tests/prometheus/v2.42.0, Debian 12's Prometheus), both extracted by extract.py
const SETS = [PDIR, path.join(PDIR, 'v2.42.0')];
const load = (d, f) => JSON.parse(fs.readFileSync(path.join(d, f), 'utf8'));
// Invalid UTF-8 bytes of the Go literals are kept by extract.py as
// U+DC80..U+DCFF (Python's surrogateescape): back to raw bytes here.
function bytesOf(s) {
  const parts = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp >= 0xdc80 && cp <= 0xdcff) parts.push(Buffer.from([cp - 0xdc00]));
    else parts.push(Buffer.from(ch, 'utf8'));
  }
  return Buffer.concat(parts);
}

// Relabel cases that cannot be observed through /api/v1/targets, with why.
export const RELABEL_EXCEPTIONS = {
  // (filled by index below; each reason is printed with the counts)
};
function relabelException(c) {
  const names = Object.keys(c.input);
  if (names.includes('__name__'))
    return '__name__ in a target\'s labels is the profile type (profd sets it per endpoint before relabeling), so a ' +
      'static __name__ is replaced; the rules are accepted by `profd check config`';
  for (const r of c.relabel) {
    if ((r.action === 'labelkeep') || (r.action === 'labeldrop' && new RegExp(`^(?:${r.regex})$`).test('__address__')))
      return `${r.action} removes __address__ (and job) that every Prometheus and profd target has besides the ` +
        'table\'s input, so the target is dropped for having no address; the rules are accepted by `profd check config`';
  }
  return null;
}

// Bad configs whose fault is in a part of Prometheus' configuration profd does
// not implement (it warns and ignores these keys): n/a, with the key.
const NA_KEYS = [
  ['remote_write', 'profd writes no metrics remotely'],
  ['remote_read', 'profd reads no metrics remotely'],
  ['alerting', 'profd sends no alerts'],
  ['alertmanager', 'profd sends no alerts'],
  ['rule_files', 'profd evaluates no rules'],
  ['storage', 'profd\'s storage is set by flags'],
  ['tracing', 'profd exports no traces'],
  ['otlp', 'profd takes no OTLP metrics'],
  ['runtime', 'Go runtime settings'],
  ['scrape_config_files', 'not supported'],
  ['metric_relabel_configs', 'profiles have no metric series to relabel'],
  ['scrape_protocols', 'profd scrapes pprof, not metrics'],
  ['fallback_scrape_protocol', 'profd scrapes pprof, not metrics'],
  ['native_histogram', 'profd scrapes pprof, not metrics'],
  ['classic_histograms', 'profd scrapes pprof, not metrics'],
  ['metric_name_validation_scheme', 'profd scrapes pprof, not metrics'],
  ['metric_name_escaping_scheme', 'profd scrapes pprof, not metrics'],
  ['scrape_failure_log_file', 'scrape failures are logged on stderr'],
  ['query_log_file', 'profd logs no queries to a file'],
  ['http_headers', 'not supported (warned)'],
  ['proxy_connect_header', 'not supported (warned)'],
  ['no_proxy', 'not supported (warned)'],
  ['proxy_from_environment', 'not supported (warned)'],
];
const PROFD_SD = ['file', 'http', 'dns', 'kubernetes'];
function badConfigNA(text) {
  for (const [k, why] of NA_KEYS)
    if (new RegExp(`^\\s*-?\\s*[a-z_]*${k}[a-z_]*:`, 'm').test(text)) return `${k}: ${why}`;
  const sd = [...text.matchAll(/^\s*-?\s*([a-z0-9]+)_sd_configs:/gm)].map((m) => m[1]);
  const other = sd.filter((s) => !PROFD_SD.includes(s) && KNOWN_SD.includes(s));
  if (other.length) return `${other[0]}_sd_configs: a service discovery profd does not implement (warned, no targets)`;
  return null;
}
// Prometheus 3's service discoveries (discovery/*), to tell a misspelling
// (refused) from a discovery profd lacks (n/a).
const KNOWN_SD = ['aws', 'azure', 'consul', 'digitalocean', 'dns', 'docker', 'dockerswarm', 'ec2', 'ecs', 'elasticache',
  'eureka', 'file', 'gce', 'hetzner', 'http', 'ionos', 'kubernetes', 'kuma', 'lightsail', 'linode', 'marathon', 'msk',
  'nerve', 'nomad', 'oci', 'openstack', 'outscale', 'ovhcloud', 'puppetdb', 'rds', 'scaleway', 'serverset', 'stackit',
  'triton', 'uyuni', 'vultr'];

// Words of Prometheus' expected error that must appear in profd's message
// (case-insensitive): the significant words, so the fault is the same while
// the wording may differ. A few faults profd words otherwise: their key words.
function keyWords(msg) {
  const stop = new Set(['the', 'a', 'an', 'is', 'of', 'for', 'in', 'to', 'and', 'or', 'not', 'must', 'be', 'with', 'at',
    'one', 'only', 'can', 'cannot', 'are', 'has', 'have', 'set', 'when', 'if', 'requires', 'required', 'field',
    'found', 'valid', 'invalid', 'configuration', 'config', 'error', 'unmarshal', 'yaml', 'parsing', 'value']);
  const syn = { regexp: 'regex' };
  return [...new Set((msg.toLowerCase().match(/[a-z_][a-z0-9_]{2,}/g) || []).filter((w) => !stop.has(w))
    .map((w) => syn[w] || w))];
}

const CLASSIC = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// the errors of Prometheus 2.42's table that come from its classic label-name rule
const V2_NAME_RULE = /is not a valid label name|is invalid 'target_label'|is invalid 'replacement' for labelmap/;

let dir;
before(() => {
  profdBin();
  dir = tempDir('profd-prom-tables-');
});
after(async () => {
  await killAll();
  if (dir && !process.env.PD_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
});

const yq = (s) => JSON.stringify(s); // YAML double-quoted = JSON string for our values

for (const D of SETS) {
const tag = JSON.parse(fs.readFileSync(path.join(D, 'relabel.json'), 'utf8')).header.tag;
test(`TestRelabel (${tag}) through scrape configs and /api/v1/targets`, async () => {
  const { header, cases } = load(D, 'relabel.json');
  const port = await freePort(); // nothing listens: targets stay down, labels are what counts
  let yml = 'global:\n  scrape_interval: 1h\n  scrape_timeout: 10s\n  keep_dropped_targets: 1000\nscrape_configs:\n';
  const exc = [];
  for (const c of cases) {
    const why = relabelException(c);
    if (why) exc.push([c.index, why]);
    yml += `  - job_name: case${c.index}\n    static_configs:\n      - targets: ["127.0.0.1:${port}"]\n`;
    if (Object.keys(c.input).length) {
      yml += '        labels:\n';
      for (const [k, v] of Object.entries(c.input)) if (!(why && k === '__name__')) yml += `          ${yq(k)}: ${yq(v)}\n`;
    }
    yml += '    relabel_configs:\n';
    for (const r of c.relabel) {
      yml += '      - ' + Object.entries(r).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join('\n        ') + '\n';
    }
    // exposes the "__" labels the table checks (Prometheus drops them from a
    // target's final labels, as profd does) as x__name, a copy
    yml += '      - {action: labelmap, regex: "__(.+)", replacement: "x__${1}"}\n';
  }
  const cfg = path.join(dir, `relabel-${tag}.yml`);
  fs.writeFileSync(cfg, yml);
  const chk = await run(path.resolve(profdBin()), ['check', 'config', cfg]);
  assert.equal(chk.code, 0, `profd check config of the relabel jobs:\n${chk.stdout}${chk.stderr}`);
  const profd = await startProfd({ storage: path.join(dir, `data-${tag}`), config: cfg });
  let data;
  await waitFor('every job in /api/v1/targets', async () => {
    const r = await http(`${profd.base}/api/v1/targets`);
    data = r.json.data;
    const pools = new Set([...data.activeTargets, ...data.droppedTargets].map((t) => t.scrapePool));
    const miss = cases.filter((c) => !relabelException(c) && !pools.has(`case${c.index}`)).map((c) => c.index);
    if (miss.length) console.log(`missing pools: ${miss}`);
    return miss.length === 0;
  }, 60000);
  const implicit = new Set(['job', 'instance', 'profile_type', '__name__', 'x__address__', 'x__scheme__', 'x__metrics_path__',
    'x__scrape_interval__', 'x__scrape_timeout__', 'x__name__', 'x__profile_path__']);
  let pass = 0;
  const fails = [];
  for (const c of cases) {
    if (exc.find(([i]) => i === c.index)) continue;
    const pool = `case${c.index}`;
    const act = data.activeTargets.filter((t) => t.scrapePool === pool);
    if (c.drop) {
      if (act.length === 0) pass++;
      else fails.push(`case ${c.index}: kept, Prometheus drops it: ${JSON.stringify(act[0].labels)}`);
      continue;
    }
    if (act.length === 0) { fails.push(`case ${c.index}: dropped, want ${JSON.stringify(c.output)}`); continue; }
    const wantN = {};
    for (const [k, v] of Object.entries(c.output)) wantN[k.startsWith('__') ? 'x' + k : k] = v;
    const got = {};
    for (const [k, v] of Object.entries(act[0].labels)) {
      if (implicit.has(k) && !(k in wantN)) continue;
      if (k.startsWith('x____param_')) continue;
      got[k] = v;
    }
    try { assert.deepEqual(got, wantN); pass++; } catch {
      // Prometheus 2 drops label names outside [a-zA-Z_][a-zA-Z0-9_]* that
      // labelmap makes; profd has Prometheus 3's UTF-8 rule and keeps them
      const extra = Object.keys(got).filter((k) => !(k in wantN));
      const rest = Object.fromEntries(Object.entries(got).filter(([k]) => k in wantN));
      let v3rule = false;
      try { assert.deepEqual(rest, wantN); v3rule = header.tag.startsWith('v2.') && extra.length && extra.every((k) => !CLASSIC.test(k)); } catch { /* a real difference */ }
      if (v3rule) exc.push([c.index, `Prometheus 2 drops the non-classic names ${JSON.stringify(extra)} labelmap makes; profd follows Prometheus 3 (UTF-8 names)`]);
      else fails.push(`case ${c.index}: got ${JSON.stringify(got)} want ${JSON.stringify(wantN)}`);
    }
  }
  const n = cases.length - exc.length;
  console.log(`relabel (${header.tag} ${header.commit.slice(0, 12)}): ${pass}/${n} pass, ${exc.length} exceptions:`);
  for (const [i, why] of exc) console.log(`  case ${i}: ${why}`);
  assert.deepEqual(fails, [], fails.join('\n'));
  assert.ok(exc.length <= 4, 'the documented exceptions are few');
});

test(`TestBadConfigs (${tag}) through profd check config`, async () => {
  const { header, cases } = load(D, 'bad_configs.json');
  let refused = 0;
  const na = [], fails = [];
  for (const c of cases) {
    const file = path.join(D, 'testdata', c.file);
    const text = fs.readFileSync(file, 'latin1');
    const r = await run(path.resolve(profdBin()), ['check', 'config', file], { cwd: path.join(D, 'testdata') });
    const out = (r.stdout + r.stderr).toLowerCase();
    if (r.code === 0) {
      // Prometheus 2's classic label-name rule: Prometheus 3 (and profd) take UTF-8 names
      if (header.tag.startsWith('v2.') && V2_NAME_RULE.test(c.error)) {
        na.push([c.file, 'Prometheus 2\'s classic label-name rule; profd follows Prometheus 3 (UTF-8 names), as v3.14.0\'s table does']);
        continue;
      }
      // accepted: n/a only when the file uses a part profd ignores (warned)
      const why = badConfigNA(text);
      if (why) na.push([c.file, why]);
      else fails.push(`${c.file}: accepted; Prometheus: ${c.error}`);
      continue;
    }
    const words = keyWords(c.error);
    const hit = words.filter((w) => out.includes(w));
    if (words.length && hit.length === 0) {
      const why = badConfigNA(text); // refused, for a part profd does not implement
      if (why) { na.push([c.file, why]); continue; }
      fails.push(`${c.file}: refused for another reason?\n   prometheus: ${c.error}\n   profd: ${(r.stdout + r.stderr).trim().split('\n').slice(-2).join(' | ')}`);
      continue;
    }
    refused++;
  }
  const n = cases.length - na.length;
  console.log(`bad configs (${header.tag} ${header.commit.slice(0, 12)}): refused ${refused}/${n}, ${na.length} n/a:`);
  for (const [f, why] of na) console.log(`  ${f}: ${why}`);
  assert.deepEqual(fails, [], fails.join('\n'));
});

test(`selector cases (${tag}) of parse_test.go and lex_test.go through /api/v1/series`, async () => {
  const { header, cases } = load(D, 'selectors.json');
  const profd = await startProfd({ storage: path.join(dir, `data-sel-${tag}`) });
  let pass = 0;
  const fails = [], skipped = [];
  for (const c of cases) {
    if (c.valid === null) { skipped.push(c.input); continue; }
    // match[] as raw bytes (a 0xff byte stays one byte), percent-encoded
    const enc = [...bytesOf(c.input)].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
    const r = await http(`${profd.base}/api/v1/series?match%5B%5D=${enc}&start=0&end=${Math.ceil(Date.now() / 1000)}`);
    const ok = c.valid ? r.status === 200 : r.status === 400;
    if (ok) pass++;
    else fails.push(`${JSON.stringify(c.input)} (${c.source}): HTTP ${r.status}, Prometheus: ${c.valid ? 'valid' : c.error} ${r.text.slice(0, 200)}`);
  }
  console.log(`selectors (${header.tag} ${header.commit.slice(0, 12)}): ${pass}/${cases.length - skipped.length}; not a selector: ${skipped.length}`);
  assert.deepEqual(fails, [], fails.join('\n'));
});
}
