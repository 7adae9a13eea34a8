/*
 * profd web UI — the source view (issue 31 item 7, as Parca's and
 * Pyroscope's): one function's source file, each line with its self and
 * total cost in the profile's unit and a heat bar, the hottest line
 * highlighted and scrolled into view; where the source cannot be reached,
 * the server's message (which function, what was tried) in the panel.
 *
 * Opened from the profile panel (app.js): a top table row's "source", the
 * sandwich view's Source button (right-click on a frame), or "v" on the
 * flame graph's focused frame. Data: GET /api/v1/source with the view's own
 * selection parameters plus function= (and file= to pick another file of
 * the same function name); the JSON is in docs/api.md.
 */
import { $, api, esc, fmtPct, fmtValue } from './util.js';

const src = { seq: 0, url: '', fn: '' };

function where(d) {
  const s = d.source || {};
  const from = s.origin === 'debuginfod' ? 'from debuginfod (build ID ' + esc(s.build_id || '') + ')' :
    'from ' + esc(s.path || '') + ' (--ui.source-dir)';
  let html = '<code>' + esc(d.file) + '</code> · ' + from;
  if ((d.files || []).length > 1) {
    html += ' · other files of this name: ' + d.files.filter((f) => f !== d.file).map((f) =>
      '<a href="#" class="source-file" data-file="' + esc(f) + '">' + esc(f.split('/').pop()) + '</a>').join(', ');
  }
  return html;
}

function render(d) {
  const unit = (d.sample_type || {}).unit || '';
  const lines = d.lines || [];
  const bySelf = lines.some((l) => l.self);
  const max = Math.max(1, ...lines.map((l) => (bySelf ? l.self : l.total)));
  const val = (v) => (v ? esc(fmtValue(v, unit)) : '');
  const rows = lines.map((l) => {
    const heat = (bySelf ? l.self : l.total) / max;
    const cls = (l.line === d.hottest ? 'hottest' : '') + (l.total ? ' cost' : '');
    return '<tr data-line="' + l.line + '"' + (cls.trim() ? ' class="' + cls.trim() + '"' : '') + (l.self || l.total ? ' data-self="' + l.self + '" data-total="' + l.total + '"' : '') + '>' +
      '<td class="ln">' + l.line + '</td><td class="num">' + val(l.self) + '</td><td class="num">' + val(l.total) + '</td>' +
      '<td class="heat"><span style="width:' + Math.round(60 * heat) + 'px' + (heat ? ';opacity:' + (0.35 + 0.65 * heat).toFixed(2) : '') + '"></span></td>' +
      '<td class="code">' + (esc(l.text) || ' ') + '</td></tr>';
  }).join('');
  $('source-meta').textContent = (d.sample_type || {}).type + ' · self ' + fmtValue(d.self, unit) + ' · total ' + fmtValue(d.total, unit) +
    ' (' + fmtPct(d.total, d.profile_total) + ' of the profile)' + (d.no_line && d.no_line.total ? ' · ' + fmtValue(d.no_line.total, unit) + ' without a line number' : '');
  $('source-where').innerHTML = where(d) + (d.stale ? ' · <b class="stale">lines with cost lie past the end of this file: it is not the version the program was built from</b>' : '');
  $('source-body').innerHTML = '<table class="source"><thead><tr><th class="ln">line</th><th class="num">self</th><th class="num">total</th><th></th><th class="code"></th></tr></thead><tbody>' +
    rows + '</tbody></table>';
  const box = $('source-view');
  box.setAttribute('data-hottest', String(d.hottest || 0));
  box.setAttribute('data-file', d.file);
  box.setAttribute('data-origin', (d.source || {}).origin || '');
  // the hottest line in view, in the panel's own scroll box
  const hot = $('source-body').querySelector('tr.hottest');
  if (hot) {
    const body = $('source-body');
    body.scrollTop = Math.max(0, hot.offsetTop - body.clientHeight / 2);
  }
}

// Opens the view of function fn; url: /api/v1/source with the selection
// (app.js builds it from the view shown).
export async function openSource(fn, url) {
  const seq = ++src.seq;
  src.url = url;
  src.fn = fn;
  const box = $('source-view');
  box.hidden = false;
  box.removeAttribute('data-hottest');
  box.setAttribute('data-state', 'loading');
  box.setAttribute('aria-busy', 'true');
  box.classList.add('loading');
  $('source-fn').textContent = fn;
  $('source-meta').textContent = 'loading…';
  $('source-where').textContent = '';
  $('source-error').hidden = true;
  $('source-body').innerHTML = '';
  box.scrollIntoView({ behavior: 'smooth', block: 'nearest' });
  try {
    const d = await api(url);
    if (seq !== src.seq) return;
    render(d);
    box.setAttribute('data-state', 'shown');
  } catch (e) {
    if (seq !== src.seq) return;
    $('source-meta').textContent = '';
    $('source-error').textContent = 'No source to show: ' + e.message;
    $('source-error').hidden = false;
    box.setAttribute('data-state', 'missing');
  } finally {
    if (seq === src.seq) {
      box.removeAttribute('aria-busy');
      box.classList.remove('loading');
    }
  }
}

export function closeSource() {
  src.seq++;
  $('source-view').hidden = true;
}

$('source-close').addEventListener('click', closeSource);
$('source-view').addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.stopPropagation(); closeSource(); } });
$('source-where').addEventListener('click', (e) => {
  const a = e.target.closest('a[data-file]');
  if (!a) return;
  e.preventDefault();
  const u = new URL(src.url, location.origin);
  u.searchParams.set('file', a.getAttribute('data-file'));
  openSource(src.fn, u.pathname + u.search);
});
