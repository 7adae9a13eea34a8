/*
 * profd web UI — the label explorer (Pyroscope's tag explorer, Parca's "sum
 * by"): for the current selector and window, every label name with its number
 * of values; a name picked → its 8 largest values (by total of the chosen
 * sample type) each with a small timeline and merged flame graph; a value
 * picked → its matcher added to the selector and the query run.
 */
import { state, ui } from './state.js';
import { frameColor } from './flame.js';
import { $, COLORS, api, esc, fmtPct, fmtValue, isInternal, labelName, quote, secs } from './util.js';

/* ------------------------------------------------------------ label explorer */

// For the current selector and window: every label name with its number of
// values; a name picked → the values' small timelines (the top 8 by total of
// the chosen sample type, from the query_range already loaded) and the
// merged flame graph of each side by side; a value clicked → its matcher is
// added to the selector.
export const explorer = { on: false, name: '', seq: 0 };
const TOPK = 8;

// The selector with one more matcher: name="value".
export function withMatcher(q, name, value) {
  const m = labelName(name) + '=' + quote(value);
  const i = q.lastIndexOf('}');
  if (i < 0) return q.trim() + '{' + m + '}';
  const inner = q.slice(q.indexOf('{') + 1, i).trim();
  return q.slice(0, i).replace(/\s*,?\s*$/, '') + (inner ? ', ' : '') + m + q.slice(i);
}

$('explore').addEventListener('click', () => {
  explorer.on = !explorer.on;
  $('explore').setAttribute('aria-pressed', explorer.on ? 'true' : 'false');
  $('explore').classList.toggle('on', explorer.on);
  $('explorer-panel').hidden = !explorer.on;
  if (explorer.on) loadExplorer();
});

export async function loadExplorer() {
  if (!explorer.on || !ui.lastRange) return;
  const seq = ++explorer.seq;
  const w = { from: ui.lastRange.from, to: ui.lastRange.to };
  const qp = '&match[]=' + encodeURIComponent(state.query) + '&start=' + secs(w.from) + '&end=' + secs(w.to);
  $('explorer-summary').textContent = 'loading…';
  $('explorer-panel').classList.add('loading');
  $('explorer-panel').setAttribute('aria-busy', 'true');
  try {
    const names = (await api('/api/v1/labels?' + qp.slice(1))).filter((n) => !isInternal(n));
    const counts = await Promise.all(names.map((n) => api('/api/v1/label/' + encodeURIComponent(n) + '/values?' + qp.slice(1)).then((v) => v.length)));
    if (seq !== explorer.seq) return;
    const order = names.map((n, i) => [n, counts[i]]).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    $('explorer-summary').textContent = order.length + ' label' + (order.length === 1 ? '' : 's') + ' on ' + ui.lastRange.series.length + ' series · pick one to break the selection down';
    $('explorer-names').innerHTML = order.map(([n, c]) => '<li><button type="button" class="chip' + (n === explorer.name ? ' on' : '') +
      '" data-name="' + esc(n) + '" aria-pressed="' + (n === explorer.name) + '">' + esc(n) + ' <span class="muted">' + c + '</span></button></li>').join('');
    if (explorer.name && order.some(([n]) => n === explorer.name)) showValues(explorer.name);
    else $('explorer-values').innerHTML = '';
  } catch (e) {
    if (seq === explorer.seq) $('explorer-summary').textContent = e.message;
  } finally {
    if (seq === explorer.seq) { $('explorer-panel').classList.remove('loading'); $('explorer-panel').setAttribute('aria-busy', 'false'); }
  }
}

$('explorer-names').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-name]');
  if (!b) return;
  explorer.name = b.getAttribute('data-name');
  $('explorer-names').querySelectorAll('button').forEach((x) => { const on = x === b; x.classList.toggle('on', on); x.setAttribute('aria-pressed', String(on)); });
  showValues(explorer.name);
});

async function showValues(name) {
  const seq = ++explorer.seq;
  const type = state.type;
  // per value: the series' totals of the chosen sample type, summed per timestamp
  const byValue = new Map();
  let unit = '';
  for (const s of ui.lastRange.series) {
    const v = s.labels[name];
    if (v === undefined) continue;
    const idx = (s.sample_types || []).findIndex((st) => st.type === type);
    if (idx < 0) continue;
    unit = unit || s.sample_types[idx].unit;
    const e = byValue.get(v) || { value: v, pts: new Map(), sum: 0 };
    s.timestamps.forEach((ts, j) => { const x = s.totals[j][idx]; e.pts.set(ts, (e.pts.get(ts) || 0) + x); e.sum += x; });
    byValue.set(v, e);
  }
  const top = [...byValue.values()].sort((a, b) => b.sum - a.sum).slice(0, TOPK);
  const max = Math.max(1, ...top.flatMap((e) => [...e.pts.values()]));
  const W = 260, H = 48;
  const x = (t) => 2 + ((t - ui.lastRange.from) / (ui.lastRange.to - ui.lastRange.from)) * (W - 4);
  const y = (v) => H - 2 - (v / max) * (H - 6);
  $('explorer-values').innerHTML = '<p class="muted">' + esc(name) + ': ' + byValue.size + ' value' + (byValue.size === 1 ? '' : 's') +
    (byValue.size > TOPK ? ', the ' + TOPK + ' largest by total ' + esc(type) : '') + '. Click one to add it to the selector.</p>' +
    // compare two values of the label (releases, versions, zones): A vs B
    (top.length > 1 ? '<p class="explorer-compare">Compare ' + esc(name) + ' <select id="xcmp-a" aria-label="A (base): a value of ' + esc(name) + '">' +
      top.map((e, i) => '<option' + (i === 1 ? ' selected' : '') + '>' + esc(e.value) + '</option>').join('') + '</select> vs <select id="xcmp-b" aria-label="B: a value of ' +
      esc(name) + '">' + top.map((e, i) => '<option' + (i === 0 ? ' selected' : '') + '>' + esc(e.value) + '</option>').join('') +
      '</select> <button type="button" class="small" id="xcmp-go">Compare</button></p>' : '') +
    '<div class="explorer-grid">' + top.map((e, i) => {
      const pts = [...e.pts.entries()].sort((a, b) => a[0] - b[0]);
      const path = pts.map(([t, v], j) => (j ? 'L' : 'M') + x(t).toFixed(1) + ' ' + y(v).toFixed(1)).join('');
      return '<figure class="explorer-card" data-value="' + esc(e.value) + '" tabindex="0" role="button" aria-label="' + esc(name + '=' + e.value) + ': add to the selector">' +
        '<figcaption><b>' + esc(e.value) + '</b> <span class="muted">' + esc(fmtValue(e.sum / Math.max(1, pts.length), unit)) + ' avg</span></figcaption>' +
        '<svg viewBox="0 0 ' + W + ' ' + H + '" class="spark"><path d="' + path + '" stroke="' + COLORS[i % COLORS.length] + '"/></svg>' +
        '<div class="mini-flame" data-i="' + i + '"><span class="muted">loading…</span></div></figure>';
    }).join('') + '</div>';
  // each value's merged flame graph over the window (its top frames)
  await Promise.all(top.map(async (e, i) => {
    const q = withMatcher(state.query, name, e.value);
    const u = '/api/v1/query?mode=merge&query=' + encodeURIComponent(q) + '&from=' + secs(ui.lastRange.from) + '&to=' + secs(ui.lastRange.to) +
      '&report=flamegraph&nodes=300' + (type ? '&sample_index=' + encodeURIComponent(type) : '');
    let html;
    try { html = miniFlame(await api(u), unit); } catch (err) { html = '<span class="error">' + esc(err.message) + '</span>'; }
    if (seq !== explorer.seq) return;
    const el = $('explorer-values').querySelector('.mini-flame[data-i="' + i + '"]');
    if (el) el.innerHTML = html;
  }));
}

// A small icicle of a flame graph JSON tree: 6 levels (24 with the root
// drawn, for the sandwich), frames under 0.8% of the width left out.
export function miniFlame(tree, unit, withRoot) {
  const total = tree.value || 0;
  if (!total) return '<span class="muted">no samples</span>';
  let html = '';
  const top0 = withRoot ? 0 : 1, maxDepth = withRoot ? 24 : 6;
  const walk = (n, left, width, depth) => {
    if (depth > maxDepth || width < 0.8) return;
    if (depth >= top0) {
      html += '<div class="mf" data-name="' + esc(n.name) + '" data-value="' + n.value + '" style="left:' + left.toFixed(3) + '%;width:' + width.toFixed(3) + '%;top:' + (depth - top0) * 13 + 'px;background:' +
        frameColor(n.name) + '" title="' + esc(n.name + ' · ' + fmtValue(n.value, unit) + ' (' + fmtPct(n.value, total) + ')') + '">' +
        (width > 14 ? esc(n.name) : '') + '</div>';
    }
    let x = left;
    for (const c of (n.children || []).slice().sort((a, b) => b.value - a.value)) {
      const cw = width * (c.value / (n.value || 1));
      walk(c, x, cw, depth + 1);
      x += cw;
    }
  };
  walk(tree, 0, 100, 0);
  return html;
}

$('explorer-values').addEventListener('click', (e) => {
  if (e.target.id === 'xcmp-go') { // app.js compares the two selectors (pd:compare)
    const sel = (id) => withMatcher(state.query, explorer.name, $(id).value);
    document.dispatchEvent(new CustomEvent('pd:compare', { detail: { a: sel('xcmp-a'), b: sel('xcmp-b') } }));
    return;
  }
  pickValue(e.target.closest('.explorer-card'));
});
$('explorer-values').addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pickValue(e.target.closest('.explorer-card')); } });
function pickValue(card) {
  if (!card || !explorer.name) return;
  $('selector').value = withMatcher(state.query, explorer.name, card.getAttribute('data-value'));
  explorer.name = '';
  $('query-form').requestSubmit(); // the form's submit: a new query
}
