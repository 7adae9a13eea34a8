/*
 * profd web UI — the Targets page (scrape health per job, target and profile
 * type, from /api/v1/targets) and the Status page (/api/v1/status/*: build and
 * runtime, storage, flags, the configuration as loaded).
 */
import { $, api, esc, fmtAgo, fmtBytes, fmtNanos, fmtTime, labelName, quote } from './util.js';

/* ------------------------------------------------------------ targets */

/* ------------------------------------------------------------ status */

export async function loadStatus() {
  const kv = (obj, fmt) => Object.entries(obj).map(([k, v]) => '<tr><th>' + esc(k) + '</th><td>' + esc(fmt ? fmt(k, v) : v) + '</td></tr>').join('');
  try {
    const [build, rt, tsdb, flags, cfg] = await Promise.all(['buildinfo', 'runtimeinfo', 'tsdb', 'flags', 'config'].map((n) => api('/api/v1/status/' + n)));
    $('status-error').hidden = true;
    $('status-runtime').innerHTML = kv({ version: build.version, ...rt });
    const st = tsdb.storage || {};
    $('status-storage').innerHTML = kv({ ...st, oldest: tsdb.headStats && tsdb.headStats.minTime, newest: tsdb.headStats && tsdb.headStats.maxTime },
      (k, v) => (k === 'bytes' ? fmtBytes(v) : k === 'oldest' || k === 'newest' ? (v ? fmtTime(v) : '–') : String(v)));
    $('status-flags').innerHTML = kv(Object.fromEntries(Object.entries(flags).map(([k, v]) => ['--' + k, v])));
    $('status-config').textContent = cfg.yaml || '(no --config.file: profd only serves stored data and takes pushes)';
  } catch (e) {
    $('status-error').textContent = e.message;
    $('status-error').hidden = false;
  }
}
$('status-refresh').addEventListener('click', loadStatus);

export async function loadTargets() {
  const box = $('targets');
  try {
    const data = await api('/api/v1/targets');
    $('targets-error').hidden = true;
    const list = (data && data.activeTargets) || [];
    const jobs = new Map();
    for (const t of list) {
      const job = t.scrapePool || (t.labels && t.labels.job) || '(no job)';
      const inst = (t.labels && t.labels.instance) || t.scrapeUrl || '';
      if (!jobs.has(job)) jobs.set(job, new Map());
      const insts = jobs.get(job);
      if (!insts.has(inst)) insts.set(inst, []);
      insts.get(inst).push(t);
    }
    let up = 0;
    for (const t of list) if (t.health === 'up') up++;
    $('targets-summary').textContent = list.length ? up + ' of ' + list.length + ' endpoints up' : '';
    if (!list.length) {
      box.innerHTML = '<p class="muted">No scrape targets. Give profd a <code>--config.file</code> with <code>scrape_configs</code> (see examples/profd.yaml), or push profiles to <code>POST /api/0/profiles</code>.</p>';
      return;
    }
    let html = '';
    // Jobs with a failing endpoint first (that is what someone on call looks for), then by name.
    const failing = (insts) => [...insts.values()].some((ts) => ts.some((t) => t.health === 'down'));
    const order = [...jobs.entries()].sort((a, b) => (failing(b[1]) - failing(a[1])) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [job, insts] of order) {
      let jn = 0, ju = 0;
      for (const ts of insts.values()) for (const t of ts) { jn++; if (t.health === 'up') ju++; }
      const jh = ju === jn ? 'up' : ju === 0 ? 'down' : 'unknown';
      html += '<div class="job" data-job="' + esc(job) + '"><div class="job-head"><h3>' + esc(job) + '</h3>' +
        '<span class="badge ' + jh + '">' + ju + '/' + jn + ' up</span></div>' +
        '<table class="targets"><colgroup><col class="c-type"><col class="c-health"><col class="c-last"><col class="c-dur"><col class="c-url"><col></colgroup><thead><tr><th>Profile</th><th>Health</th><th>Last scrape</th><th>Duration</th><th>Endpoint</th><th>Error</th></tr></thead><tbody>';
      for (const [inst, ts] of [...insts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
        const labels = ts[0].labels || {};
        const extra = Object.keys(labels).filter((k) => k !== 'job' && k !== 'instance' && k !== '__name__').sort()
          .map((k) => labelName(k) + '=' + quote(labels[k])).join(', ');
        html += '<tr class="instance"><td colspan="6">' + esc(inst) + (extra ? ' <span class="muted">{' + esc(extra) + '}</span>' : '') + '</td></tr>';
        ts.sort((a, b) => (a.profileType < b.profileType ? -1 : 1));
        for (const t of ts) {
          const h = t.health === 'up' || t.health === 'down' ? t.health : 'unknown';
          const q = (t.profileType || '') + '{job=' + quote(job) + ', instance=' + quote(inst) + '}';
          html += '<tr data-health="' + h + '"><td><a href="/?query=' + encodeURIComponent(q) + '">' + esc(t.profileType || '') + '</a></td>' +
            '<td><span class="badge ' + h + '">' + esc(t.health || 'unknown') + '</span></td>' +
            '<td title="' + (t.lastScrape ? esc(fmtTime(t.lastScrape)) : '') + '">' + esc(fmtAgo(t.lastScrape)) + '</td>' +
            '<td>' + (t.lastScrape ? esc(fmtNanos((t.lastScrapeDuration || 0) * 1e9)) : '–') + '</td>' +
            '<td class="url"><a href="' + esc(t.scrapeUrl || '') + '" target="_blank" rel="noopener">' + esc(t.scrapeUrl || '') + '</a></td>' +
            '<td class="err">' + esc(t.lastError || '') + '</td></tr>';
        }
      }
      html += '</tbody></table></div>';
    }
    box.innerHTML = html;
  } catch (e) {
    $('targets-error').textContent = e.message;
    $('targets-error').hidden = false;
  }
}
$('targets-refresh').addEventListener('click', loadTargets);
