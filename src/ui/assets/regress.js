/*
 * profd web UI — the regression report (issue 30): /?view=regressions
 * &query=SELECTOR&by=LABEL[&type=SAMPLE_TYPE][&from=T&to=T]. For each value
 * of the label (a version) against the one before it (by first profile),
 * the functions whose share of the profiles grew or shrank above the noise,
 * each comparison linking to the compare view (cmp=1, query_a, query_b).
 *
 * Data: GET /api/v1/regressions?query=&by=[&sample_index=&from=&to=] (its
 * JSON: docs/recording-rules.md "Regression report"); nothing new on the server.
 */
import { $, api, esc } from './util.js';

const reg = { seq: 0 };

// the URL's parameters of this view
function params() {
  const q = new URLSearchParams(location.search);
  return { query: q.get('query') || '', by: q.get('by') || 'version', type: q.get('type') || '', from: q.get('from') || '', to: q.get('to') || '' };
}

const pct = (x) => (x * 100).toFixed(2) + '%';
const signed = (x) => (x > 0 ? '+' : x < 0 ? '−' : '') + (Math.abs(x) * 100).toFixed(2) + ' pp';

// The compare view of one comparison: each side's selector over the same window.
function compareHref(c, p) {
  const q = new URLSearchParams({ query: c.compare.query_b, cmp: '1', query_a: c.compare.query, query_b: c.compare.query_b });
  if (p.from && p.to) { q.set('from', p.from); q.set('to', p.to); } else q.set('range', '24h');
  if (p.type) q.set('type', p.type);
  return '/?' + q.toString();
}

function table(c, p) {
  const head = '<div class="panel-head"><h3>' + esc(c.from) + ' → ' + esc(c.to) + '</h3><span class="muted">' + c.reported +
    ' function' + (c.reported === 1 ? '' : 's') + ' above the noise</span><span class="spacer"></span>' +
    '<a class="button small reg-compare" href="' + esc(compareHref(c, p)) + '" title="Open the diff of ' + esc(c.compare.query) + ' and ' +
    esc(c.compare.query_b) + '">Compare ' + esc(c.from) + ' with ' + esc(c.to) + '</a></div>';
  if (!c.functions.length) return head + '<p class="muted reg-none">No function changed its share above the noise.</p>';
  return head + '<div class="table-wrap"><table class="top reg-table"><thead><tr><th>function</th><th></th><th class="num">share before</th>' +
    '<th class="num">share after</th><th class="num">change</th><th class="num" title="the standard error of the change (from each version\'s spread over its profiles); a function is listed when its change is more than 4 times it">noise</th></tr></thead><tbody>' +
    c.functions.map((f) => '<tr data-fn="' + esc(f.function) + '" data-direction="' + esc(f.direction) + '"><td class="fn">' + esc(f.function) +
      '</td><td class="' + (f.direction === 'grew' ? 'reg-grew' : 'reg-shrank') + '">' + esc(f.direction) + '</td><td class="num">' + pct(f.shareBefore) +
      '</td><td class="num">' + pct(f.shareAfter) + '</td><td class="num delta">' + signed(f.change) + '</td><td class="num">±' +
      (f.noise * 100).toFixed(2) + ' pp</td></tr>').join('') + '</tbody></table></div>';
}

export async function loadRegressions() {
  const seq = ++reg.seq;
  const p = params();
  $('reg-query').value = p.query;
  $('reg-by').value = p.by;
  $('reg-type').value = p.type;
  const panel = $('reg-panel'), body = $('reg-body'), err = $('reg-error');
  err.hidden = true;
  if (!p.query) {
    $('reg-summary').textContent = '';
    body.innerHTML = '<p class="muted">Type a selector (e.g. <code>cpu{service="api"}</code>) and the label whose values are the versions, then press <b>Report</b>.</p>';
    return;
  }
  panel.classList.add('loading');
  panel.setAttribute('aria-busy', 'true');
  try {
    const q = new URLSearchParams({ query: p.query, by: p.by });
    if (p.type) q.set('sample_index', p.type);
    if (p.from && p.to) { q.set('from', p.from); q.set('to', p.to); }
    const d = await api('/api/v1/regressions?' + q.toString());
    if (seq !== reg.seq) return;
    const vs = d.versions || [], cs = d.comparisons || [];
    $('reg-summary').textContent = vs.length + ' value' + (vs.length === 1 ? '' : 's') + ' of ' + d.by + ': ' + vs.map((v) => v.version + ' (' + v.profiles + ' profiles)').join(', ');
    if (!cs.length) {
      body.innerHTML = '<p class="muted reg-none">' + (vs.length ? 'Only one value of ' + esc(d.by) + ': nothing to compare.' : 'No profile of this selector has the label ' + esc(d.by) + ' in the window.') + '</p>';
    } else {
      const none = cs.every((c) => !c.functions.length);
      body.innerHTML = (none ? '<p class="reg-none">Nothing changed above the noise in any comparison.</p>' : '') +
        cs.map((c) => '<section class="reg-cmp" data-from="' + esc(c.from) + '" data-to="' + esc(c.to) + '">' + table(c, p) + '</section>').join('');
    }
  } catch (e) {
    if (seq !== reg.seq) return;
    body.innerHTML = '';
    err.textContent = e.message;
    err.hidden = false;
  } finally {
    if (seq === reg.seq) { panel.classList.remove('loading'); panel.setAttribute('aria-busy', 'false'); }
  }
}

$('reg-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const q = new URLSearchParams(location.search);
  q.set('view', 'regressions');
  q.set('query', $('reg-query').value.trim());
  q.set('by', $('reg-by').value.trim() || 'version');
  if ($('reg-type').value.trim()) q.set('type', $('reg-type').value.trim()); else q.delete('type');
  history.pushState(null, '', '/?' + q.toString());
  loadRegressions();
});
