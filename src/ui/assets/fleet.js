/*
 * profd web UI — the fleet overview (issue 31), the first screen: every
 * service (by service_name, else service, else job) with a sparkline per
 * profile type over the window (the sum of its series' totals of the type's
 * default sample type — pprof's rule, the last one — per time bucket),
 * sortable by cost (a column's cost: the sum over the window, the average
 * for a gauge such as inuse_space or goroutine), one click into its view.
 *
 * Data: /api/v1/profile_types (the types in the window), then one
 * /api/v1/query_range per type; nothing new on the server.
 */
import { $, api, esc, fmtValue, isInternal, labelName, quote, secs, window_ } from './util.js';

export const SERVICE_LABELS = ['service_name', 'service', 'job'];
const BUCKETS = 40;
const fleet = { rows: [], types: [], sortType: '', seq: 0 };

// The type a click opens first: cpu when the service has it.
const preferred = (types) => (types.includes('cpu') ? 'cpu' : types.includes('process_cpu') ? 'process_cpu' : types[0]);

export async function loadFleet() {
  const seq = ++fleet.seq;
  const panel = $('fleet'), body = $('fleet-body');
  panel.classList.add('loading');
  panel.setAttribute('aria-busy', 'true');
  const { from, to } = window_();
  try {
    let types = await api('/api/v1/profile_types?start=' + secs(from) + '&end=' + secs(to)) || [];
    types = [...new Set(types.map((t) => t.name).filter((n) => n && !isInternal(n)))].sort();
    const svc = new Map(); // "label=value" -> row
    const units = {};
    const step = (to - from) / BUCKETS;
    await Promise.all(types.map(async (t) => {
      const data = await api('/api/v1/query_range?query=' + encodeURIComponent('{__name__=' + quote(t) + '}') + '&from=' + secs(from) + '&to=' + secs(to)) || [];
      for (const s of data) {
        const lbl = SERVICE_LABELS.find((l) => s.labels[l] !== undefined && s.labels[l] !== '');
        const key = lbl ? lbl + '=' + s.labels[lbl] : '';
        const st = s.sample_types || [];
        if (!st.length) continue;
        const idx = st.length - 1; // pprof's rule: the last sample type
        units[t] = { type: st[idx].type, unit: st[idx].unit, kind: st[idx].kind };
        let row = svc.get(key);
        if (!row) { row = { key, label: lbl || '', value: lbl ? s.labels[lbl] : '(no service label)', types: {} }; svc.set(key, row); }
        const c = row.types[t] || (row.types[t] = { sum: 0, n: 0, b: new Array(BUCKETS).fill(null) });
        s.timestamps.forEach((ts, j) => {
          const v = (s.totals[j] || [])[idx] || 0;
          c.sum += v; c.n++;
          const k = Math.max(0, Math.min(BUCKETS - 1, Math.floor((ts - from) / step)));
          c.b[k] = (c.b[k] || 0) + v;
        });
      }
    }));
    if (seq !== fleet.seq) return;
    fleet.types = types;
    fleet.units = units;
    fleet.rows = [...svc.values()];
    if (!fleet.sortType || !types.includes(fleet.sortType)) fleet.sortType = preferred(types) || '';
    draw();
  } catch (e) {
    if (seq === fleet.seq) body.innerHTML = '<p class="error">' + esc(e.message) + '</p>';
  } finally {
    if (seq === fleet.seq) { panel.classList.remove('loading'); panel.setAttribute('aria-busy', 'false'); }
  }
}

// A type's cost for a service: the sum over the window, a gauge's average.
function cost(row, t) {
  const c = row.types[t];
  if (!c) return -1;
  return fleet.units[t] && fleet.units[t].kind === 'gauge' ? c.sum / Math.max(1, c.n) : c.sum;
}

function spark(c) {
  const W = 120, H = 24;
  const max = Math.max(1, ...c.b.map((v) => v || 0));
  // the buckets with profiles, joined (a bucket without one is no zero)
  let d = '';
  c.b.forEach((v, i) => {
    if (v === null) return;
    d += (d ? 'L' : 'M') + (2 + (i / (BUCKETS - 1)) * (W - 4)).toFixed(1) + ' ' + (H - 2 - (v / max) * (H - 5)).toFixed(1);
  });
  // a lone point still shows
  return '<svg class="spark" viewBox="0 0 ' + W + ' ' + H + '" aria-hidden="true"><path d="' + d + '" stroke="currentColor" fill="none"/>' +
    c.b.map((v, i) => (v === null ? '' : '<circle r="1.5" cx="' + (2 + (i / (BUCKETS - 1)) * (W - 4)).toFixed(1) + '" cy="' +
      (H - 2 - (v / max) * (H - 5)).toFixed(1) + '"/>')).join('') + '</svg>';
}

function selectorOf(row, t) {
  return row.label ? t + '{' + labelName(row.label) + '=' + quote(row.value) + '}' : t;
}

function draw() {
  const body = $('fleet-body');
  const types = fleet.types, rows = fleet.rows.slice();
  const t = fleet.sortType;
  rows.sort((a, b) => cost(b, t) - cost(a, t) || (a.value < b.value ? -1 : 1));
  $('fleet-summary').textContent = rows.length + ' service' + (rows.length === 1 ? '' : 's') + ' · ' + types.length + ' profile type' +
    (types.length === 1 ? '' : 's') + ' · sorted by ' + t + (fleet.units[t] ? ' (' + fleet.units[t].type + ')' : '');
  if (!rows.length) { body.innerHTML = '<p class="muted">No service has profiles in this window yet.</p>'; return; }
  body.innerHTML = '<table class="fleet-table"><thead><tr><th>service</th>' + types.map((x) =>
    '<th data-sort="' + esc(x) + '" class="' + (x === t ? 'sorted' : '') + '" tabindex="0" aria-sort="' + (x === t ? 'descending' : 'none') +
    '" title="sort by ' + esc(x) + (fleet.units[x] ? ' ' + esc(fleet.units[x].type) : '') + '">' + esc(x) + '</th>').join('') + '</tr></thead><tbody>' +
    rows.map((r) => {
      const mine = types.filter((x) => r.types[x]);
      return '<tr data-service="' + esc(r.value) + '"><td><a href="?query=' + encodeURIComponent(selectorOf(r, preferred(mine))) + '" class="fleet-open" data-q="' +
        esc(selectorOf(r, preferred(mine))) + '"><b>' + esc(r.value) + '</b></a>' + (r.label ? ' <span class="muted">' + esc(r.label) + '</span>' : '') + '</td>' +
        types.map((x) => {
          const c = r.types[x];
          if (!c) return '<td class="muted">–</td>';
          const u = fleet.units[x] || {};
          return '<td class="spark-cell" data-type="' + esc(x) + '"><a href="?query=' + encodeURIComponent(selectorOf(r, x)) + '" data-q="' + esc(selectorOf(r, x)) +
            '" title="open ' + esc(selectorOf(r, x)) + '">' + spark(c) + '<span>' + esc(fmtValue(cost(r, x), u.unit)) + (u.kind === 'gauge' ? ' avg' : '') + '</span></a></td>';
        }).join('') + '</tr>';
    }).join('') + '</tbody></table>';
}

$('fleet-body').addEventListener('click', (e) => {
  const th = e.target.closest('th[data-sort]');
  if (th) { fleet.sortType = th.getAttribute('data-sort'); draw(); return; }
  const a = e.target.closest('a[data-q]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  $('selector').value = a.getAttribute('data-q');
  $('query-form').requestSubmit();
});
$('fleet-body').addEventListener('keydown', (e) => {
  const th = e.target.closest('th[data-sort]');
  if (th && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); fleet.sortType = th.getAttribute('data-sort'); draw(); }
});
