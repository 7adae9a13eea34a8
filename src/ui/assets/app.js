/*
 * profd web UI — plain JavaScript ES modules, no build step. The modules:
 *   app.js    this file: routing, the URL, the profiles view (query, timeline
 *             interaction, profile panel, top table, flame graph page parts,
 *             sandwich, focus/ignore)
 *   state.js  the view's state (what the URL holds) and what views share
 *   util.js   API call, escaping, selectors, units, times in the zone shown
 *   chart.js  the timeline's chart: uPlot (vendor/uplot, loaded by index.html
 *             as window.uPlot) under an SVG overlay of named layers — the
 *             place for a new layer over the timeline (event markers):
 *             chart.addLayer(name, ctx => svg) next to the others in app.js
 *   flame.js  the flame graph on a canvas: layout, paint, hit-testing
 *   explorer.js  the label explorer
 *   suggest.js   the selector box's autocomplete
 *   pages.js  the Targets and Status pages
 *   regress.js /?view=regressions&query=&by=: the regression report per version
 *   fleet.js  the first screen: every service, a sparkline per profile type
 *
 * Views (client-side routes; the server returns index.html for each):
 *   /  (or /graph)  selector box → timeline of the matching series (one point
 *                   per stored profile, y = total of the chosen sample type)
 *                   → click a point → that profile's flame graph and top table;
 *                   drag across the timeline (or shift-click two points) →
 *                   the merged flame graph and top table of every profile of
 *                   the query in that range (mode=merge); Compare: two
 *                   selections A (base) and B → their diff (mode=diff, as
 *                   go tool pprof -diff_base=A B), grown frames red, shrunk
 *                   green, the top table with base, new and delta
 *   /targets        scrape health per job, target and profile type
 *
 * State lives in the query string so a view can be shared:
 *   query=SELECTOR  range=15m|1h|…  type=SAMPLE_TYPE  refresh=SECONDS
 *   from=T to=T (an absolute window: RFC 3339, Unix seconds or ms, or
 *                now / now-1h: relative; written whenever a profile, a merge
 *                or a comparison is chosen, so a shared link shows the same
 *                window and the same profiles days later)
 *   series=EXACT_SELECTOR  t=MS (the opened profile)
 *   sel=FROM-TO (ms, a merged range)   cmp=1 a=FROM-TO b=FROM-TO (compare)
 *   query_a=SEL query_b=SEL (compare: each side's selector; the timeline
 *                then draws a line per side, each side's range chosen on
 *                its own line)  diff=abs (a
 *                diff of the sums, not of shares of each side's total)
 *   maxnodes=N (the flame graph's most nodes, 0 = all; default 100000)
 *   hide=EXACT_SELECTOR (repeated: legend entries switched off; left out of
 *                merges and diffs by the API's exclude=)
 *   tz=utc (times in UTC)  chart=stacked|sum  agg=avg (merges averaged)
 *   zoom=NAMES (the flame graph's zoom path, "\n"-joined)  search=REGEXP
 *   flame=up  palette=cb  focus=RE ignore=RE  view=callgraph
 *   sort=COLUMN order=asc tfilter=TEXT all=1 (the top table)
 *
 * API (Prometheus envelope {"status":"success","data":…}):
 *   /api/v1/query_range?query=&from=&to=     → [{labels, sample_types, timestamps, totals}]
 *   /api/v1/query?query=&time=&report=top|flamegraph|proto[&sample_index=]
 *   /api/v1/query?mode=merge&query=&from=&to=&report=…
 *   /api/v1/query?mode=diff&query_a=&query_b=&mode_a=merge&mode_b=merge
 *                 &from_a=&to_a=&from_b=&to_b=&report=…
 *   /api/v1/labels, /api/v1/label/NAME/values, /api/v1/targets
 */
import { FlameCanvas, frameColor } from './flame.js';
import { TimelineChart } from './chart.js';
import { state, ui } from './state.js';
import { $, COLORS, RANGES, api, esc, exactSelector, fmtAgo, fmtPct, fmtTick, fmtTime, fmtValue, fromInputTime, parseTime, secs, seriesName, timeTicks, toInputTime, valueTicks, window_ } from './util.js';
import { loadStatus, loadTargets } from './pages.js';
import { explorer, loadExplorer, miniFlame } from './explorer.js';
import { closeSuggest } from './suggest.js';
import { loadFleet } from './fleet.js';
import { loadRegressions } from './regress.js';
import { closeSource, openSource } from './source.js';

(function () {
  const FG_NODES = 100000; // flame graph nodes asked for (the canvas paints 50k in well under 300 ms)

  // state: state.js; helpers and units: util.js; targets and status: pages.js
  let refreshTimer = null;
  let targetsTimer = null;
  let runSeq = 0, profileSeq = 0;

  /* ------------------------------------------------------------ URL state */

  function readURL() {
    const q = new URLSearchParams(location.search);
    state.query = q.get('query') || '';
    state.range = RANGES[q.get('range')] ? q.get('range') : '1h';
    state.fromText = q.get('from') && q.get('to') && parseTime(q.get('from'), Date.now()) !== null &&
      parseTime(q.get('to'), Date.now()) !== null ? q.get('from') : '';
    state.toText = state.fromText ? q.get('to') : '';
    state.type = q.get('type') || '';
    state.refresh = parseInt(q.get('refresh') || '0', 10) || 0;
    state.series = q.get('series') || '';
    state.t = parseInt(q.get('t') || '0', 10) || 0;
    state.cmp = q.get('cmp') === '1';
    ui.hidden = new Set(q.getAll('hide'));
    state.sel = state.cmp ? null : parseSpan(q.get('sel'));
    state.focus = q.get('focus') || '';
    state.flameUp = q.get('flame') === 'up';
    state.cb = q.get('palette') === 'cb';
    state.utc = q.get('tz') === 'utc';
    state.agg = ['sum', 'avg'].includes(q.get('agg')) ? q.get('agg') : '';
    state.raw = q.get('delta') === 'false';
    state.view = q.get('view') === 'callgraph' ? 'callgraph' : '';
    state.chart = ['stacked', 'sum'].includes(q.get('chart')) ? q.get('chart') : '';
    // the top table: column and direction (the server sorts), name filter, every row
    profile.sortKey = q.get('sort') || 'flat';
    profile.asc = q.get('order') === 'asc';
    profile.filter = q.get('tfilter') || '';
    profile.limit = q.get('all') === '1' ? Infinity : 100;
    state.zoomPath = q.get('zoom') || '';
    state.search = q.get('search') || '';
    state.ignore = q.get('ignore') || '';
    state.a = state.cmp ? parseSpan(q.get('a')) : null;
    // issue 31: a diff is of shares (each side by its own total) unless diff=abs;
    // each side of a comparison has its own selector (query_a / query_b)
    state.diffAbs = q.get('diff') === 'abs';
    state.qa = state.cmp ? (q.get('query_a') || '') : '';
    state.qb = state.cmp ? (q.get('query_b') || '') : '';
    const mn = parseInt(q.get('maxnodes') || '', 10);
    state.maxNodes = mn >= 0 ? mn : FG_NODES;
    state.b = state.cmp ? parseSpan(q.get('b')) : null;
    tl.next = state.a && !state.b ? 'b' : state.a ? 'b' : 'a';
  }

  // each side's selector of a comparison (the main one unless set)
  const qA = () => state.qa || state.query, qB = () => state.qb || state.query;
  // a comparison of two selectors: the timeline draws A's and B's own lines
  // (ui.sides: each selector's query_range, loaded by run())
  const twoSel = () => state.cmp && qA() !== qB();
  const sidesOn = () => twoSel() && !!ui.sides && ui.sides.qa === qA() && ui.sides.qb === qB();
  const isRelative = (v) => /^now/.test(String(v || '').trim());
  const pinned = () => !!state.fromText && !(isRelative(state.fromText) && isRelative(state.toText));
  const iso = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');


  // "FROM-TO" (ms) → {from, to}, or null.
  function parseSpan(v) {
    const m = /^(\d+)-(\d+)$/.exec(v || '');
    if (!m || +m[2] < +m[1]) return null;
    return { from: +m[1], to: +m[2] };
  }
  const spanText = (r) => r.from + '-' + r.to;

  function writeURL(push) {
    const q = new URLSearchParams();
    if (state.query) q.set('query', state.query);
    if (state.range !== '1h') q.set('range', state.range);
    // a chosen profile, merge or comparison pins the window it was chosen in
    const chosen = (state.series && state.t) || state.sel || (state.cmp && (state.a || state.b || qA() !== qB()));
    if (chosen && !pinned() && ui.lastRange) { state.fromText = iso(ui.lastRange.from); state.toText = iso(ui.lastRange.to); showRange(); }
    if (state.fromText) { q.set('from', state.fromText); q.set('to', state.toText); }
    for (const k of ui.hidden) q.append('hide', k);
    if (state.focus) q.set('focus', state.focus);
    if (state.flameUp) q.set('flame', 'up');
    if (state.cb) q.set('palette', 'cb');
    if (state.utc) q.set('tz', 'utc');
    if (state.agg) q.set('agg', state.agg);
    if (state.raw) q.set('delta', 'false');
    if (state.view) q.set('view', state.view);
    if (state.chart) q.set('chart', state.chart);
    if (profile.sortKey !== 'flat') q.set('sort', profile.sortKey);
    if (profile.asc) q.set('order', 'asc');
    if (profile.filter) q.set('tfilter', profile.filter);
    if (profile.limit === Infinity) q.set('all', '1');
    if (state.zoomPath) q.set('zoom', state.zoomPath);
    if (state.search) q.set('search', state.search);
    if (state.ignore) q.set('ignore', state.ignore);
    if (state.type) q.set('type', state.type);
    if (state.refresh) q.set('refresh', String(state.refresh));
    if (state.series && state.t && !state.sel && !state.cmp) { q.set('series', state.series); q.set('t', String(state.t)); }
    if (state.sel && !state.cmp) q.set('sel', spanText(state.sel));
    if (state.cmp) {
      q.set('cmp', '1');
      if (state.a) q.set('a', spanText(state.a));
      if (state.b) q.set('b', spanText(state.b));
      q.set('query_a', qA());
      q.set('query_b', qB());
    }
    if (state.diffAbs) q.set('diff', 'abs');
    if (state.maxNodes !== FG_NODES) q.set('maxnodes', String(state.maxNodes));
    const path = location.pathname === '/targets' ? '/' : location.pathname;
    const url = path + (q.toString() ? '?' + q.toString() : '');
    if (url !== location.pathname + location.search) history[push ? 'pushState' : 'replaceState'](null, '', url);
  }

  /* ------------------------------------------------------------ routing */

  function route() {
    const targets = location.pathname === '/targets', status = location.pathname === '/status';
    const regress = !targets && !status && new URLSearchParams(location.search).get('view') === 'regressions';
    $('view-profiles').hidden = targets || status || regress;
    $('view-regressions').hidden = !regress;
    $('nav-regressions').classList.toggle('active', regress);
    $('view-targets').hidden = !targets;
    $('view-status').hidden = !status;
    $('nav-profiles').classList.toggle('active', !targets && !status && !regress);
    $('nav-targets').classList.toggle('active', targets);
    $('nav-status').classList.toggle('active', status);
    clearInterval(targetsTimer);
    targetsTimer = null;
    if (regress) {
      document.title = 'Regressions · profd';
      loadRegressions();
    } else if (status) {
      document.title = 'Status · profd';
      loadStatus();
    } else if (targets) {
      document.title = 'Targets · profd';
      loadTargets();
      targetsTimer = setInterval(loadTargets, 5000);
    } else {
      document.title = 'profd';
      readURL();
      applyStateToForm();
      loadTypeChips();
      const ran = state.query ? run(false) : null;
      if (!ran) loadProfileTypes();
      if (!ran) { $('timeline-panel').hidden = true; $('intro').hidden = false; loadFleet(); }
      showSelection();
      showFilters();
      $('flame-up').setAttribute('aria-pressed', String(state.flameUp));
      $('flame-up').textContent = state.flameUp ? 'Icicle' : 'Flame';
      $('diff-palette').checked = state.cb;
      $('agg').value = state.agg;
      $('chart-mode').value = state.chart || 'lines';
      $('top-filter').value = profile.filter;
      $('view-callgraph').setAttribute('aria-pressed', String(state.view === 'callgraph'));
      $('view-callgraph').classList.toggle('on', state.view === 'callgraph');
      if (state.view !== 'callgraph') showCallgraph(false);
      document.body.classList.toggle('cb', state.cb);
      // a merge or diff leaves out the series without the sample type shown:
      // which those are, the timeline's query tells; and the sample type a
      // profile opens on comes with it (defaultSampleType). A view drawn
      // before the timeline would also move down when the timeline appears
      // (a click aimed at a frame then lands on its neighbour)
      if (ran) ran.then(() => loadView()); else loadView();
    }
  }

  document.addEventListener('click', (e) => {
    const a = e.target.closest('a[data-nav]');
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    const to = a.getAttribute('data-nav');
    if (to === '/targets' || to === '/status') history.pushState(null, '', to);
    else if (to === 'regressions') history.pushState(null, '', '/?view=regressions');
    else history.pushState(null, '', '/' + (location.pathname === '/targets' || location.pathname === '/status' ? sessionStorage.getItem('pd-last-search') || '' : ''));
    route();
  });
  window.addEventListener('popstate', route);

  function applyStateToForm() {
    $('selector').value = state.query;
    $('range').value = state.range;
    showRange();
    $('refresh').value = String(state.refresh);
    setRefresh();
  }

  /* ------------------------------------------------------------ errors */

  function showError(msg) {
    const el = $('error');
    el.textContent = msg;
    el.hidden = !msg;
  }

  /* ------------------------------------------------------------ type chips */

  async function loadTypeChips() {
    const el = $('type-chips');
    try {
      const names = await api('/api/v1/label/__name__/values');
      if (!names || !names.length) { el.innerHTML = '<i>none yet — is anything being scraped? See <a href="/targets" data-nav="/targets">Targets</a>.</i>'; return; }
      el.innerHTML = names.map((n) => '<a href="?query=' + encodeURIComponent(n) + '" data-q="' + esc(n) + '">' + esc(n) + '</a>').join('');
    } catch (e) {
      el.innerHTML = '<i>' + esc(e.message) + '</i>';
    }
  }
  // The profile type picker: each type stored in the window with its sample
  // types and units (/api/v1/profile_types); picking one replaces the
  // selector's metric name, its label matchers kept.
  const nameOf = (q) => { const m = /^\s*([A-Za-z_:][A-Za-z0-9_:]*)/.exec(q || ''); return m ? m[1] : ''; };
  async function loadProfileTypes() {
    const sel = $('profile-type');
    let types = [];
    try {
      const w = ui.lastRange ? '?start=' + (ui.lastRange.from / 1000).toFixed(3) + '&end=' + (ui.lastRange.to / 1000).toFixed(3) : '';
      types = await api('/api/v1/profile_types' + w) || [];
    } catch (e) { return; }
    // one entry per type (issue 31: heap came twice, once per run of its series)
    const byName = new Map();
    for (const t of types) {
      const have = byName.get(t.name);
      if (!have) { byName.set(t.name, { ...t, sample_types: (t.sample_types || []).slice() }); continue; }
      for (const st of t.sample_types || []) if (!have.sample_types.some((x) => x.type === st.type)) have.sample_types.push(st);
    }
    types = [...byName.values()];
    const cur = nameOf(state.query);
    if (cur && !types.some((t) => t.name === cur)) types.push({ name: cur, sample_types: [] });
    sel.innerHTML = '<option value="">any</option>' + types.map((t) => '<option value="' + esc(t.name) + '">' + esc(t.name) +
      ((t.sample_types || []).length ? ' — ' + t.sample_types.map((st) => esc(st.type) + ' (' + esc(st.unit) + ')').join(' · ') : '') + '</option>').join('');
    sel.value = cur;
  }
  $('profile-type').addEventListener('change', () => {
    const name = $('profile-type').value, q = $('selector').value.trim(), cur = nameOf(q);
    if (!name) return;
    $('selector').value = cur ? name + q.replace(/^\s*[A-Za-z_:][A-Za-z0-9_:]*/, '') : (q.startsWith('{') ? name + q : name);
    submit();
  });
  $('type-chips').addEventListener('click', (e) => {
    const a = e.target.closest('a[data-q]');
    if (!a) return;
    e.preventDefault();
    $('selector').value = a.getAttribute('data-q');
    submit();
  });

  /* ------------------------------------------------------------ query */

  function submit() {
    const q = $('selector').value.trim();
    if (nameOf(q) !== nameOf(state.query)) state.type = ''; // another profile type opens on its own default
    state.query = q;
    state.qa = state.qb = '';
    if ($('range').value !== 'custom') { state.range = $('range').value; state.fromText = state.toText = ''; }
    state.series = '';
    state.t = 0;
    state.sel = null;
    state.a = state.b = null;
    state.focus = state.ignore = '';
    showFilters();
    tl.next = 'a';
    tl.anchor = null;
    $('profile-panel').hidden = true;
    showSelection();
    ui.hidden = new Set();
    writeURL(true);
    run(true);
  }

  $('query-form').addEventListener('submit', (e) => { e.preventDefault(); closeSuggest(); submit(); });
  $('range').addEventListener('change', () => {
    if ($('range').value === 'custom') return;
    state.range = $('range').value;
    backToNow();
  });
  // Zoom and pan of the window (pinned): to [from, to] ms.
  function zoomWindow(from, to) {
    if (!(to > from)) return;
    state.fromText = iso(from);
    state.toText = iso(to);
    showRange();
    writeURL(true);
    if (state.query) run(false);
  }
  function scaleWindow(f, shift) {
    const w = window_(), span = w.to - w.from, mid = (w.from + w.to) / 2 + shift * span;
    zoomWindow(Math.round(mid - span * f / 2), Math.round(mid + span * f / 2));
  }
  $('zoom-out').addEventListener('click', () => scaleWindow(2, 0));
  $('pan-left').addEventListener('click', () => scaleWindow(1, -0.5));
  $('pan-right').addEventListener('click', () => scaleWindow(1, 0.5));

  // Back to a relative window ending now: the choices made in the pinned
  // window (profile, merge, comparison) go with it.
  function backToNow() {
    state.fromText = state.toText = '';
    state.series = ''; state.t = 0; state.sel = null; state.a = state.b = null;
    tl.next = 'a'; tl.anchor = null;
    $('profile-panel').hidden = true;
    showRange(); showSelection();
    writeURL(true);
    if (state.query) run(false);
  }
  $('back-to-now').addEventListener('click', backToNow);

  // The time zone toggle: local ↔ UTC for every time shown (axis, titles,
  // tooltips, the picker); kept in the URL (tz=utc).
  $('chart-mode').addEventListener('change', () => {
    state.chart = $('chart-mode').value === 'lines' ? '' : $('chart-mode').value;
    writeURL(false);
    if (ui.lastRange) drawTimeline();
  });
  $('tz').addEventListener('click', () => {
    const picking = !$('window-picker').hidden;
    const w = picking ? [fromInputTime($('pick-from').value), fromInputTime($('pick-to').value)] : null;
    state.utc = !state.utc;
    writeURL(false);
    showRange(); showSelection();
    if (ui.lastRange) drawTimeline();
    if (picking) { // the same instants, written in the other zone
      if (w[0] !== null) $('pick-from').value = toInputTime(w[0]);
      if (w[1] !== null) $('pick-to').value = toInputTime(w[1]);
      showPickerZone();
    }
    const v = viewSpec();
    if (v && !$('profile-panel').hidden) $('profile-title').textContent = v.title;
  });

  // The calendar picker: an absolute window typed or picked with the
  // browser's date-time control, in the zone shown (local or UTC).
  function showPickerZone() { $('pick-zone').textContent = tzName().replace(/^times in /, ''); }
  function openPicker() {
    const w = window_();
    $('pick-from').value = toInputTime(w.from);
    $('pick-to').value = toInputTime(w.to);
    $('pick-error').textContent = '';
    showPickerZone();
    $('window-picker').hidden = false;
    $('pick-window').setAttribute('aria-expanded', 'true');
    $('pick-from').focus();
  }
  function closePicker() {
    $('window-picker').hidden = true;
    $('pick-window').setAttribute('aria-expanded', 'false');
  }
  $('pick-window').addEventListener('click', () => ($('window-picker').hidden ? openPicker() : closePicker()));
  $('pick-cancel').addEventListener('click', () => { closePicker(); $('pick-window').focus(); });
  $('window-picker').addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.stopPropagation(); closePicker(); $('pick-window').focus(); } });
  $('pick-apply').addEventListener('click', () => {
    const f = fromInputTime($('pick-from').value), t = fromInputTime($('pick-to').value);
    const bad = f === null ? 'From is not a date and time.' : t === null ? 'To is not a date and time.' :
      t <= f ? 'To must be after From.' : '';
    $('pick-error').textContent = bad;
    $('pick-from').setAttribute('aria-invalid', String(f === null || (t !== null && t <= f)));
    $('pick-to').setAttribute('aria-invalid', String(t === null));
    if (bad) return;
    closePicker();
    // a new window: what was chosen in the old one goes with it
    state.series = ''; state.t = 0; state.sel = null; state.a = state.b = null;
    tl.next = 'a'; tl.anchor = null;
    $('profile-panel').hidden = true;
    showSelection();
    zoomWindow(f, t);
  });

  // The range box: "last 1h", or the pinned window (with the time zone).
  function showRange() {
    const sel = $('range');
    let opt = sel.querySelector('option[value="custom"]');
    const pin = pinned();
    if (pin) {
      if (!opt) { opt = document.createElement('option'); opt.value = 'custom'; sel.appendChild(opt); }
      const w = window_();
      opt.textContent = fmtTime(w.from) + ' – ' + fmtTime(w.to);
      sel.value = 'custom';
    } else {
      if (opt) opt.remove();
      sel.value = state.range;
    }
    $('back-to-now').hidden = !pin;
    $('pan-right').disabled = !pin;
    $('tz').textContent = tzName();
    $('tz').setAttribute('aria-pressed', String(state.utc));
    $('tz').title = state.utc ? 'Times are in UTC: click for the browser\'s time zone' : 'Times are in the browser\'s time zone: click for UTC';
  }
  function tzName() {
    if (state.utc) return 'times in UTC';
    const off = -new Date().getTimezoneOffset();
    const hh = String(Math.floor(Math.abs(off) / 60)).padStart(2, '0'), mm = String(Math.abs(off) % 60).padStart(2, '0');
    let zone = '';
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) { /* none */ }
    return 'times in ' + (zone ? zone + ' ' : '') + '(UTC' + (off < 0 ? '-' : '+') + hh + ':' + mm + ')';
  }
  $('refresh').addEventListener('change', () => { state.refresh = parseInt($('refresh').value, 10) || 0; writeURL(false); setRefresh(); });
  $('sample-type').addEventListener('change', () => {
    state.type = $('sample-type').value;
    writeURL(false);
    drawTimeline();
    loadView();
  });

  function setRefresh() {
    clearInterval(refreshTimer);
    refreshTimer = null;
    if (state.refresh > 0) refreshTimer = setInterval(() => { if (state.query && !document.hidden && location.pathname !== '/targets') run(false); }, state.refresh * 1000);
  }

  async function run(userAction) {
    if (!state.query) { showError('Type a selector first, e.g. heap or cpu{job="demo"}.'); return; }
    sessionStorage.setItem('pd-last-search', location.search);
    const seq = ++runSeq;
    const { from, to } = window_();
    const btn = $('run');
    btn.disabled = true;
    // issue 31: the panel says it is loading (shown at once, not after the answer)
    busy($('timeline-panel'), true);
    $('intro').hidden = true;
    $('timeline-panel').hidden = false;
    try {
      const data = await api('/api/v1/query_range?query=' + encodeURIComponent(state.query) +
        '&from=' + (from / 1000).toFixed(3) + '&to=' + (to / 1000).toFixed(3) + (state.raw ? '&delta=false' : ''));
      if (seq !== runSeq) return;
      ui.lastRange = { from, to, series: Array.isArray(data) ? data : [] };
      // issue 31: two selectors compared: each side's own series, its own line
      ui.sides = null;
      if (twoSel()) {
        const side = (sq) => api('/api/v1/query_range?query=' + encodeURIComponent(sq) +
          '&from=' + (from / 1000).toFixed(3) + '&to=' + (to / 1000).toFixed(3) + (state.raw ? '&delta=false' : ''));
        const sa = qA(), sb = qB();
        const [da, db] = await Promise.all([side(sa), side(sb)]);
        if (seq !== runSeq) return;
        ui.sides = { qa: sa, qb: sb, a: Array.isArray(da) ? da : [], b: Array.isArray(db) ? db : [] };
      }
      if (!state.type) await defaultSampleType();
      if (seq !== runSeq) return;
      showError('');
      fillSampleTypes();
      showCounters();
      loadProfileTypes();
      drawTimeline();
      showSelection();
      if (explorer.on) loadExplorer();
      const v = viewSpec();
      if (v && !$('profile-panel').hidden) $('profile-title').textContent = v.title;
    } catch (e) {
      if (seq !== runSeq) return;
      showError(e.message);
      if (userAction) { $('timeline-panel').hidden = true; }
    } finally {
      if (seq === runSeq) { btn.disabled = false; busy($('timeline-panel'), false); }
    }
  }

  // A panel's loading state: a "loading…" badge (CSS .loading) and aria-busy.
  function busy(el, on) {
    el.classList.toggle('loading', on);
    el.setAttribute('aria-busy', String(on));
  }

  // The sample type a profile opens on (issue 31): its default_sample_type
  // (report=meta of the newest profile of the first series: Go's allocs says
  // alloc_space), else pprof's rule, the last sample type (fillSampleTypes).
  // Sets ui.defaultType ('' when the profile names none).
  async function defaultSampleType() {
    ui.defaultType = '';
    const s = ui.lastRange.series.find((x) => x.timestamps && x.timestamps.length);
    if (!s) return;
    try {
      const m = await api('/api/v1/query?query=' + encodeURIComponent(exactSelector(s.labels)) + '&time=' +
        (s.timestamps[s.timestamps.length - 1] / 1000).toFixed(3) + '&report=meta');
      ui.defaultType = (m && m.default_sample_type) || '';
    } catch (e) { /* pprof's rule then */ }
  }

  // Sample types of every returned series, in order of first appearance.
  function fillSampleTypes() {
    const sel = $('sample-type');
    const seen = new Map();
    for (const s of ui.lastRange.series) for (const st of s.sample_types || []) if (!seen.has(st.type)) seen.set(st.type, st.unit);
    const types = [...seen.keys()];
    // The default: the profile's default_sample_type, else pprof's rule: the
    // last sample type (Go's inuse_space, cpu, delay).
    let chosen = state.type && seen.has(state.type) ? state.type : '';
    if (!chosen && ui.defaultType && seen.has(ui.defaultType)) chosen = ui.defaultType;
    if (!chosen && ui.lastRange.series.length) {
      const st = ui.lastRange.series[0].sample_types || [];
      chosen = st.length ? st[st.length - 1].type : '';
    }
    sel.innerHTML = types.map((t) => '<option value="' + esc(t) + '">' + esc(t) + ' (' + esc(seen.get(t)) + ')</option>').join('');
    sel.value = chosen;
    sel.disabled = types.length === 0;
    if (chosen && chosen !== state.type) { state.type = chosen; writeURL(false); }
  }

  /* ------------------------------------------------------------ timeline */

  const tl = {
    pts: [], x: null, y: null, unit: '', hoverEl: null, selEl: null, svg: null,
    inv: null, plot: null,  // x pixel → ms; {l, r, t, b} of the plot area (SVG units)
    next: 'a',              // compare: which selection the next drag sets
    anchor: null,           // shift-click: the first point's ts
    drag: null,             // {x0, x1, moved} while the mouse is down
    justDragged: false,     // swallow the click that ends a drag
  };

  // The chart (chart.js: uPlot under an SVG overlay). Its layers, drawn over
  // the series in this order: the merge/compare selections, the brush, the
  // selected and hovered point. A new layer (e.g. event markers) is one
  // chart.addLayer(name, ctx => svg) here, and chart.redrawLayer(name) when
  // its data arrives.
  const chart = new TimelineChart($('timeline'));
  chart.addLayer('sels', () => selectionRects());
  chart.addLayer('brush', (c) => '<rect class="brush" x="-99" y="' + c.plot.t + '" width="0" height="' + (c.plot.b - c.plot.t) + '"/>');
  chart.addLayer('marks', () => '<circle class="selected" r="7" cx="-99" cy="-99"/><circle class="hover" r="6" cx="-99" cy="-99"/>');

  function drawTimeline() {
    const box = $('timeline');
    const legend = $('legend');
    const series = ui.lastRange ? ui.lastRange.series : [];
    const type = state.type;
    const W = Math.max(320, box.clientWidth || 800), H = box.clientHeight || 260;
    const from = ui.lastRange.from, to = ui.lastRange.to;
    let unit = '';
    let npts = 0;
    const drawn = [];
    if (sidesOn()) { drawSideLines(box, legend, type, from, to, W, H); return; }
    series.forEach((s, i) => {
      const key = exactSelector(s.labels);
      const idx = (s.sample_types || []).findIndex((st) => st.type === type);
      const color = COLORS[i % COLORS.length];
      const entry = { s, i, key, idx, color, off: ui.hidden.has(key) };
      drawn.push(entry);
      if (idx < 0 || entry.off) return;
      unit = unit || s.sample_types[idx].unit;
      npts += s.timestamps.length;
    });
    tl.unit = unit;
    const shown = drawn.filter((d) => d.idx >= 0 && !d.off);
    const why = npts ? '' : !series.length ? 'No series match this selector in the selected range.' :
      'No series has the sample type "' + esc(type) + '".';
    const r = chart.draw({
      from, to, W, H, unit, mode: state.chart || 'lines',
      series: shown.map((d) => ({ color: d.color, label: d.key, ts: d.s.timestamps, vs: d.s.timestamps.map((_, j) => d.s.totals[j][d.idx]) })),
      yTicks: (max) => valueTicks(max, unit), xTicks: timeTicks, xFmt: fmtTick, empty: why,
    });
    tl.x = r.x; tl.y = r.y; tl.inv = r.inv; tl.plot = r.plot;
    // one point per stored profile (lines mode): what clicks, keys and tooltips use
    tl.pts = r.points.map((q) => { const d = shown[q.si]; return { px: q.px, py: q.py, ts: d.s.timestamps[q.j], v: d.s.totals[q.j][d.idx], d }; });
    box.setAttribute('data-points', String(tl.pts.length));
    chart.profiles = tl.pts.map((p) => ({ ts: p.ts, px: p.px, py: p.py, v: p.v, series: p.d.i }));
    tl.svg = chart.svg;
    tl.hoverEl = tl.svg.querySelector('circle.hover');
    tl.selEl = tl.svg.querySelector('circle.selected');
    tl.brushEl = tl.svg.querySelector('rect.brush');
    markSelected();
    // issue 18: events.js draws event markers (target went down) over this drawing
    box.dispatchEvent(new CustomEvent('pd:timeline', { detail: { from, to, x: tl.x, plot: tl.plot, series: series.map((s) => s.labels) } }));

    // Labels every series shares are shown once, above the entries; each
    // entry names only the labels that tell it apart.
    const common = new Map();
    if (series.length > 1) {
      for (const [k, v] of Object.entries(series[0].labels)) if (series.every((x) => x.labels[k] === v)) common.set(k, v);
    }
    const entryName = (labels) => {
      if (!common.size) return seriesName(labels);
      const rest = {};
      for (const [k, v] of Object.entries(labels)) if (!common.has(k)) rest[k] = v;
      return seriesName(rest);
    };
    const head = common.size ? '<li class="common" aria-label="labels of every series">' + esc(seriesName(Object.fromEntries(common))) +
      ' <span class="muted">· every series</span></li>' : '';
    legend.innerHTML = head + drawn.map((d) => {
      const n = d.s.timestamps.length;
      const last = n && d.idx >= 0 ? fmtValue(d.s.totals[n - 1][d.idx], d.s.sample_types[d.idx].unit) : '';
      return '<li data-key="' + esc(d.key) + '" class="' + (d.off ? 'off' : '') + '" title="' + esc(seriesName(d.s.labels)) + ' — click to hide/show">' +
        '<span class="swatch" style="background:' + d.color + '"></span>' + esc(entryName(d.s.labels)) +
        '<span class="muted">' + n + ' profile' + (n === 1 ? '' : 's') + (d.idx < 0 ? ', no ' + esc(type) : last ? ', last ' + esc(last) : '') + '</span></li>';
    }).join('');
    const total = series.reduce((a, s) => a + s.timestamps.length, 0);
    $('timeline-summary').textContent = series.length + ' series, ' + total + ' profiles';
  }

  // A line per side of a two-selector comparison (issue 31): A's selector in
  // A's colour, B's in B's (the selection colours), y = the sum of the sample
  // type over the side's series that have a profile at that time (a legend
  // entry switched off before stays out). A drag or a click on a side's line
  // chooses that side's range; the legend names each side's selector.
  function sideLine(k, type) {
    const acc = new Map();
    let unit = '', nser = 0;
    for (const s of ui.sides[k]) {
      const idx = (s.sample_types || []).findIndex((st) => st.type === type);
      if (idx < 0 || ui.hidden.has(exactSelector(s.labels))) continue;
      unit = unit || s.sample_types[idx].unit;
      nser++;
      s.timestamps.forEach((ts, j) => acc.set(ts, (acc.get(ts) || 0) + s.totals[j][idx]));
    }
    const ts = [...acc.keys()].sort((a, b) => a - b);
    return { ts, vs: ts.map((t) => acc.get(t)), unit, nser };
  }
  function drawSideLines(box, legend, type, from, to, W, H) {
    const css = getComputedStyle(document.documentElement);
    const drawn = ['a', 'b'].map((k, i) => {
      const l = sideLine(k, type), sel = k === 'a' ? qA() : qB();
      const color = css.getPropertyValue('--sel-' + k).trim() || COLORS[i];
      const s = { labels: {}, timestamps: l.ts, totals: l.vs.map((v) => [v]), sample_types: [{ type, unit: l.unit }] };
      return { s, i, key: '', idx: 0, color, side: k, sel, nser: l.nser, name: (k === 'a' ? 'A (base) · ' : 'B · ') + sel };
    });
    const unit = drawn[0].s.sample_types[0].unit || drawn[1].s.sample_types[0].unit;
    tl.unit = unit;
    const shown = drawn.filter((d) => d.s.timestamps.length);
    const why = shown.length ? '' : 'Neither selector has profiles with the sample type "' + esc(type) + '" in the selected range.';
    const r = chart.draw({
      from, to, W, H, unit, mode: 'lines',
      series: shown.map((d) => ({ color: d.color, label: d.name, ts: d.s.timestamps, vs: d.s.totals.map((v) => v[0]) })),
      yTicks: (max) => valueTicks(max, unit), xTicks: timeTicks, xFmt: fmtTick, empty: why,
    });
    tl.x = r.x; tl.y = r.y; tl.inv = r.inv; tl.plot = r.plot;
    tl.pts = r.points.map((q) => { const d = shown[q.si]; return { px: q.px, py: q.py, ts: d.s.timestamps[q.j], v: d.s.totals[q.j][0], d }; });
    box.setAttribute('data-points', String(tl.pts.length));
    // the model for tools and tests: each side's line as drawn
    chart.lines = drawn.map((d) => ({ side: d.side, selector: d.sel, color: d.color, ts: d.s.timestamps, vs: d.s.totals.map((v) => v[0]) }));
    chart.profiles = tl.pts.map((p) => ({ ts: p.ts, px: p.px, py: p.py, v: p.v, series: p.d.i }));
    tl.svg = chart.svg;
    tl.hoverEl = tl.svg.querySelector('circle.hover');
    tl.selEl = tl.svg.querySelector('circle.selected');
    tl.brushEl = tl.svg.querySelector('rect.brush');
    markSelected();
    box.dispatchEvent(new CustomEvent('pd:timeline', { detail: { from, to, x: tl.x, plot: tl.plot, series: [] } }));
    legend.innerHTML = drawn.map((d) => {
      const n = d.s.timestamps.length, last = n ? fmtValue(d.s.totals[n - 1][0], unit) : '';
      return '<li data-side="' + d.side + '" class="side side-' + d.side + '" title="' + esc(d.name) + '">' +
        '<span class="swatch" style="background:' + d.color + '"></span><b>' + (d.side === 'a' ? 'A (base)' : 'B') + '</b> ' + esc(d.sel) +
        '<span class="muted">' + d.nser + ' series, ' + n + ' point' + (n === 1 ? '' : 's') + (last ? ', last ' + esc(last) : '') + '</span></li>';
    }).join('');
    const total = ['a', 'b'].reduce((a, k) => a + ui.sides[k].reduce((x, s) => x + s.timestamps.length, 0), 0);
    $('timeline-summary').textContent = 'A and B: ' + (ui.sides.a.length + ui.sides.b.length) + ' series, ' + total + ' profiles';
  }

  $('legend').addEventListener('click', (e) => {
    const li = e.target.closest('li[data-key]');
    if (!li) return;
    const k = li.getAttribute('data-key');
    if (ui.hidden.has(k)) ui.hidden.delete(k); else ui.hidden.add(k);
    li.setAttribute('aria-pressed', ui.hidden.has(k) ? 'false' : 'true');
    writeURL(false);
    drawTimeline();
    // a merge or comparison on screen is redone without (or with) that series
    if (state.sel || (state.cmp && state.a && state.b)) { showSelection(); loadView(); }
  });

  // The shaded rectangles of the merged range, or of A and B (compare).
  function selectionRects() {
    if (!tl.plot) return '';
    const P = tl.plot;
    const rect = (r, cls, label) => {
      let x0 = Math.max(P.l, tl.x(r.from)), x1 = Math.min(P.r, tl.x(r.to));
      if (x1 < P.l || x0 > P.r) return '';
      if (x1 - x0 < 8) { const c = (x0 + x1) / 2; x0 = c - 4; x1 = c + 4; } // a one-point range stays visible
      return '<rect class="sel ' + cls + '" x="' + x0.toFixed(1) + '" y="' + P.t + '" width="' + (x1 - x0).toFixed(1) +
        '" height="' + (P.b - P.t) + '" data-from="' + r.from + '" data-to="' + r.to + '"/>' +
        (label ? '<text class="sel-label ' + cls + '" x="' + (x0 + 4).toFixed(1) + '" y="' + (P.t + 13) + '">' + label + '</text>' : '');
    };
    if (state.cmp) return (state.a ? rect(state.a, 'sel-a', 'A') : '') + (state.b ? rect(state.b, 'sel-b', 'B') : '');
    return state.sel ? rect(state.sel, 'sel-m', '') : '';
  }

  function redrawSelections() {
    chart.redrawLayer('sels');
    markSelected();
  }

  function markSelected() {
    if (!tl.selEl) return;
    if (state.sel || state.cmp) {
      // Shift-click's first point, while waiting for the second.
      const a = tl.anchor !== null && tl.pts.find((q) => q.ts === tl.anchor);
      tl.selEl.setAttribute('cx', a ? a.px : -99);
      tl.selEl.setAttribute('cy', a ? a.py : -99);
      return;
    }
    const p = tl.anchor !== null ? tl.pts.find((q) => q.ts === tl.anchor) :
      tl.pts.find((q) => q.ts === state.t && exactSelector(q.d.s.labels) === state.series);
    tl.selEl.setAttribute('cx', p ? p.px : -99);
    tl.selEl.setAttribute('cy', p ? p.py : -99);
  }

  // The point nearest to a mouse event (in SVG coordinates), within 24px.
  function nearest(e) {
    if (!tl.svg || !tl.pts.length) return null;
    const r = tl.svg.getBoundingClientRect();
    const vb = tl.svg.viewBox.baseVal;
    const mx = ((e.clientX - r.left) / r.width) * vb.width, my = ((e.clientY - r.top) / r.height) * vb.height;
    let best = null, bd = 24 * 24;
    for (const p of tl.pts) {
      const dx = p.px - mx, dy = p.py - my;
      const dd = dx * dx + dy * dy * 0.25; // prefer points near in time
      if (dd < bd) { bd = dd; best = p; }
    }
    return best;
  }

  // Mouse position in SVG units.
  function svgX(e) {
    const r = tl.svg.getBoundingClientRect();
    return ((e.clientX - r.left) / r.width) * tl.svg.viewBox.baseVal.width;
  }

  // Stored profiles in [from, to] ms, over every series of the query (a
  // merge takes them all, also the series switched off in the legend).
  // Series a merge or diff leaves out: switched off in the legend, or without
  // the sample type shown (not drawn either; merged, a mix of profile types
  // would fail: heap and cpu under one selector).
  function leftOut(s) {
    return ui.hidden.has(exactSelector(s.labels)) || (!!state.type && !(s.sample_types || []).some((st) => st.type === state.type));
  }

  // side: 'a' or 'b' of a two-selector comparison (that side's series)
  const seriesOf = (side) => (side && sidesOn() ? ui.sides[side] : ui.lastRange ? ui.lastRange.series : []);
  function countIn(r, side) {
    let n = 0;
    for (const s of seriesOf(side)) {
      if (leftOut(s)) continue; // not merged
      for (const ts of s.timestamps) if (ts >= r.from && ts <= r.to) n++;
    }
    return n;
  }

  // The range a drag from pixel x0 to x1 selects: from the first to the last
  // profile inside it (so the range names real profiles), or null.
  function dragRange(x0, x1, side) {
    const t0 = tl.inv(Math.min(x0, x1)), t1 = tl.inv(Math.max(x0, x1));
    let lo = Infinity, hi = -Infinity;
    for (const s of seriesOf(side)) {
      if (leftOut(s)) continue;
      for (const ts of s.timestamps) if (ts >= t0 && ts <= t1) { lo = Math.min(lo, ts); hi = Math.max(hi, ts); }
    }
    return lo <= hi ? { from: lo, to: hi } : null;
  }

  $('timeline').addEventListener('mousedown', (e) => {
    if (e.button !== 0 || !tl.svg || !ui.lastRange || !ui.lastRange.series.length) return;
    e.preventDefault();
    const x = svgX(e);
    // Alt+drag zooms the window to the dragged time (a zoom brush apart
    // from the merge brush); a plain drag merges
    // two selectors: the drag chooses the range of the side whose line it
    // starts on (else the side picked in the bar)
    const near = sidesOn() ? nearest(e) : null;
    tl.drag = { x0: x, x1: x, moved: false, zoom: e.altKey, side: sidesOn() ? (near ? near.d.side : tl.next) : null };
    tl.brushEl.classList.toggle('zoom', e.altKey);
  });
  window.addEventListener('mousemove', (e) => {
    const d = tl.drag;
    if (!d || !tl.svg) return;
    const P = tl.plot;
    d.x1 = Math.max(P.l, Math.min(P.r, svgX(e)));
    if (Math.abs(d.x1 - d.x0) > 4) d.moved = true;
    if (!d.moved) return;
    const x0 = Math.min(d.x0, d.x1), x1 = Math.max(d.x0, d.x1);
    tl.brushEl.setAttribute('x', x0);
    tl.brushEl.setAttribute('width', x1 - x0);
    if (d.zoom) {
      showTip(e, 'zoom to ' + esc(fmtTime(tl.inv(x0))) + ' – ' + esc(fmtTime(tl.inv(x1))));
      return;
    }
    const r = dragRange(d.x0, d.x1, d.side);
    const k = d.side || tl.next;
    const who = state.cmp ? (k === 'a' ? 'A (base): ' : 'B: ') : '';
    showTip(e, who + (r ? esc(fmtTime(r.from)) + ' – ' + esc(fmtTime(r.to)) + '<br><b>' + countIn(r, d.side) + ' profiles</b>' : 'no profiles here'));
  });
  window.addEventListener('mouseup', (e) => {
    const d = tl.drag;
    if (!d) return;
    tl.drag = null;
    if (tl.brushEl) { tl.brushEl.setAttribute('x', -99); tl.brushEl.setAttribute('width', 0); }
    if (!d.moved) return; // a click: handled below
    tl.justDragged = true;
    setTimeout(() => { tl.justDragged = false; }, 0);
    hideTip();
    if (d.zoom) {
      zoomWindow(Math.round(tl.inv(Math.min(d.x0, d.x1))), Math.round(tl.inv(Math.max(d.x0, d.x1))));
      return;
    }
    if (d.side) tl.next = d.side;
    const r = dragRange(d.x0, d.x1, d.side);
    if (r) select(r);
  });

  $('timeline').addEventListener('mousemove', (e) => {
    if (tl.drag && tl.drag.moved) return;
    if (state.chart && chart.buckets && tl.svg && !sidesOn()) { // stacked or sum: the bucket under the mouse
      const t = tl.inv(svgX(e)), bm = chart.buckets, b = Math.floor((t - bm.starts[0]) / bm.step);
      const top = chart.stack && chart.stack.length ? chart.stack[chart.stack.length - 1][b] : null;
      if (b < 0 || b >= bm.starts.length || top === null || top === undefined) { hideTip(); return; }
      showTip(e, esc(fmtTime(bm.starts[b])) + ' – ' + esc(fmtTime(bm.starts[b] + bm.step)) + '<br><b>' + esc(fmtValue(top, tl.unit)) + '</b> ' +
        esc(state.type) + ' over the series shown<br><i>click to merge these profiles · drag to merge a range</i>');
      return;
    }
    const p = nearest(e);
    if (!p) { hideTip(); if (tl.hoverEl) tl.hoverEl.setAttribute('cx', -99); return; }
    tl.hoverEl.setAttribute('cx', p.px);
    tl.hoverEl.setAttribute('cy', p.py);
    const unit = p.d.s.sample_types[p.d.idx].unit;
    const act = tl.anchor !== null ? 'shift-click: end of the range' : state.cmp ? 'click: ' + ((p.d.side || tl.next) === 'a' ? 'A (base)' : 'B') + ' = this profile' : 'click to open · drag to merge a range';
    showTip(e, '<div class="tl">' + esc(p.d.name || seriesName(p.d.s.labels)) + '</div>' +
      '<b>' + esc(fmtValue(p.v, unit)) + '</b> ' + esc(state.type) + '<br>' + esc(fmtTime(p.ts)) +
      ' <span class="tl">(' + esc(fmtAgo(p.ts)) + ')</span><br><i>' + esc(act) + '</i>');
  });
  $('timeline').addEventListener('mouseleave', () => { if (!tl.drag) hideTip(); if (tl.hoverEl) tl.hoverEl.setAttribute('cx', -99); });
  $('timeline').addEventListener('click', (e) => {
    if (tl.justDragged) return;
    if (state.chart && chart.buckets && tl.svg && !sidesOn()) { // stacked or sum: a click merges the bucket's profiles
      const bm = chart.buckets, b = Math.floor((tl.inv(svgX(e)) - bm.starts[0]) / bm.step);
      if (b < 0 || b >= bm.starts.length) return;
      const r = dragRange(tl.x(bm.starts[b]), tl.x(bm.starts[b] + bm.step) - 0.01);
      if (r) select(r);
      return;
    }
    const p = nearest(e);
    if (!p) return;
    if (e.shiftKey) {
      // Shift-click two points: the range between them.
      if (tl.anchor === null) { tl.anchor = p.ts; markSelected(); showSelection(); return; }
      const r = { from: Math.min(tl.anchor, p.ts), to: Math.max(tl.anchor, p.ts) };
      tl.anchor = null;
      select(r);
      return;
    }
    openPoint(p);
  });

  // Opens the profile of timeline point p (or, comparing, selects it).
  function openPoint(p) {
    tl.anchor = null;
    if (state.cmp) { if (p.d.side) tl.next = p.d.side; select({ from: p.ts, to: p.ts }); return; }
    state.sel = null;
    state.series = exactSelector(p.d.s.labels);
    state.t = p.ts;
    writeURL(true);
    redrawSelections();
    showSelection();
    loadView();
    revealProfile();
  }

  // Keyboard on the timeline (it takes the focus): Left/Right move over the
  // points in time order (Up/Down to the neighbouring series at about the
  // same time), Enter opens the point, Shift+Enter marks the ends of a range.
  tl.cursor = -1;
  function cursorTo(i) {
    const pts = tl.pts.slice().sort((a, b) => a.ts - b.ts || a.d.i - b.d.i);
    if (!pts.length) return null;
    tl.sorted = pts;
    tl.cursor = Math.max(0, Math.min(pts.length - 1, i));
    const p = pts[tl.cursor];
    tl.hoverEl.setAttribute('cx', p.px);
    tl.hoverEl.setAttribute('cy', p.py);
    const unit = p.d.s.sample_types[p.d.idx].unit;
    $('timeline-live').textContent = (p.d.name || seriesName(p.d.s.labels)) + ': ' + fmtValue(p.v, unit) + ' ' + state.type + ' at ' + fmtTime(p.ts) +
      ' (point ' + (tl.cursor + 1) + ' of ' + pts.length + '; Enter opens it)';
    return p;
  }
  $('timeline').addEventListener('keydown', (e) => {
    if (!tl.pts.length) return;
    const k = e.key;
    if (k === 'ArrowRight' || k === 'ArrowLeft') {
      e.preventDefault();
      cursorTo(tl.cursor < 0 ? (k === 'ArrowRight' ? 0 : tl.pts.length - 1) : tl.cursor + (k === 'ArrowRight' ? 1 : -1));
    } else if ((k === 'ArrowUp' || k === 'ArrowDown') && tl.cursor >= 0) {
      e.preventDefault();
      const cur = tl.sorted[tl.cursor];
      const others = tl.sorted.map((p, i) => [p, i]).filter(([p]) => p.d.i !== cur.d.i)
        .filter(([p]) => (k === 'ArrowUp' ? p.py < cur.py : p.py > cur.py))
        .sort((a, b) => Math.abs(a[0].ts - cur.ts) - Math.abs(b[0].ts - cur.ts) || Math.abs(a[0].py - cur.py) - Math.abs(b[0].py - cur.py));
      if (others.length) cursorTo(others[0][1]);
    } else if (k === 'Enter' && tl.cursor >= 0) {
      e.preventDefault();
      const p = tl.sorted[tl.cursor];
      if (e.shiftKey) {
        if (tl.anchor === null) { tl.anchor = p.ts; markSelected(); showSelection(); return; }
        const r = { from: Math.min(tl.anchor, p.ts), to: Math.max(tl.anchor, p.ts) };
        tl.anchor = null;
        if (p.d.side) tl.next = p.d.side;
        select(r);
        return;
      }
      openPoint(p);
    }
  });

  function revealProfile() {
    // Bring the profile into view when it opens below the fold.
    const panel = $('profile-panel');
    if (panel.getBoundingClientRect().top > window.innerHeight - 120) panel.scrollIntoView({ behavior: 'smooth', block: 'start' });
  }

  // A range was chosen (drag, shift-click, or a click in compare mode).
  function select(r) {
    if (state.cmp && sidesOn()) {
      state[tl.next] = r; // each side its own line: the range of the side chosen
    } else if (state.cmp) {
      if (tl.next === 'a' || !state.a) { state.a = r; tl.next = 'b'; } else state.b = r;
    } else {
      state.sel = r;
    }
    state.series = '';
    state.t = 0;
    writeURL(true);
    redrawSelections();
    showSelection();
    loadView();
    revealProfile();
  }

  // The bar under the timeline: what is selected, and what a drag does next.
  function showSelection() {
    const bar = $('selection');
    const cmpBtn = $('compare');
    cmpBtn.classList.toggle('on', state.cmp);
    cmpBtn.setAttribute('aria-pressed', state.cmp ? 'true' : 'false');
    const span = (r, side) => {
      const same = r.from === r.to, n = countIn(r, side);
      return '<span class="when">' + esc(fmtTime(r.from)) + (same ? '' : ' – ' + esc(fmtTime(r.to))) + '</span> <span class="muted">· ' +
        n + ' profile' + (n === 1 ? '' : 's') + '</span>';
    };
    let html = '';
    if (state.cmp) {
      const chip = (k, label) => {
        const r = state[k];
        return '<span class="chip sel-' + k + (tl.next === k ? ' next' : '') + '" data-pick="' + k + '" title="click, then drag on the timeline to choose ' + label + ' again">' +
          '<b>' + label + '</b> ' + (r ? span(r, k) : '<span class="muted">' + (qA() !== qB() ? 'the whole window' : tl.next === k ? 'drag on the timeline (or click a point)' : 'not chosen') + '</span>') + '</span>';
      };
      html = chip('a', 'A (base)') + '<span class="vs">vs</span>' + chip('b', 'B') +
        (state.a && state.b ? ' <button type="button" class="small" id="sel-swap">Swap</button>' : '') +
        ' <button type="button" class="small" id="sel-clear">Clear</button>';
    } else if (tl.anchor !== null) {
      html = '<span class="muted">Shift-click a second point to merge the range from ' + esc(fmtTime(tl.anchor)) + '.</span>';
    } else if (state.sel) {
      html = '<span class="chip sel-m"><b>Merged</b> ' + span(state.sel) + '</span> <button type="button" class="small" id="sel-clear">Clear</button>';
    }
    bar.innerHTML = html;
    bar.hidden = !html;
    // each side's selector (issue 31), kept while one is being typed
    $('cmp-bar').hidden = !state.cmp;
    if (!$('cmp-bar').contains(document.activeElement)) { $('cmp-qa').value = qA(); $('cmp-qb').value = qB(); }
    $('timeline-hint').textContent = sidesOn() ?
      'Compare two selectors, a line each: drag along a side\'s line (or click one of its points) to choose that side\'s range.' : state.cmp ?
      'Compare: drag across the timeline (or click a point) to choose A, the base, then again for B. Frames that grew from A to B are red, those that shrank green.' :
      'Click a point to open that profile. Drag across the timeline, or shift-click two points, to merge every profile in between. Alt+drag zooms into a window.';
  }

  $('selection').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (b && b.id === 'sel-clear') {
      state.sel = null; state.a = state.b = null; tl.next = 'a'; tl.anchor = null;
      writeURL(true); redrawSelections(); showSelection(); loadView();
      return;
    }
    if (b && b.id === 'sel-swap') {
      [state.a, state.b] = [state.b, state.a];
      writeURL(true); redrawSelections(); showSelection(); loadView();
      return;
    }
    const c = e.target.closest('[data-pick]');
    if (c) { tl.next = c.getAttribute('data-pick'); showSelection(); }
  });

  // The two selectors of a comparison, and "compare with previous period".
  function applySides() {
    const a = $('cmp-qa').value.trim(), b = $('cmp-qb').value.trim();
    state.qa = a && a !== state.query ? a : '';
    state.qb = b && b !== state.query ? b : '';
    writeURL(true); redrawSelections(); showSelection(); loadView(); revealProfile();
    run(false); // the timeline: a line per side (or back to the query's series)
  }
  $('cmp-apply').addEventListener('click', applySides);
  // "compare versions" from the label explorer: two values of a label, each
  // side's selector, over the whole window
  document.addEventListener('pd:compare', (e) => {
    state.cmp = true; state.sel = null; state.series = ''; state.t = 0;
    state.a = state.b = null; tl.next = 'a'; tl.anchor = null;
    $('cmp-qa').value = e.detail.a; $('cmp-qb').value = e.detail.b;
    applySides();
  });
  for (const id of ['cmp-qa', 'cmp-qb']) $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); applySides(); } });
  $('cmp-prev').addEventListener('click', () => {
    const w = ui.lastRange || window_(), len = w.to - w.from;
    state.a = { from: w.from - len, to: w.from - 1 };
    state.b = { from: w.from, to: w.to };
    tl.next = 'a';
    writeURL(true); redrawSelections(); showSelection(); loadView(); revealProfile();
  });

  $('compare').addEventListener('click', () => {
    tl.anchor = null;
    if (!state.cmp) {
      state.cmp = true;
      // What was open becomes A: the merged range, or the opened profile.
      state.a = state.sel || (state.t ? { from: state.t, to: state.t } : null);
      state.b = null;
      state.sel = null;
      tl.next = state.a ? 'b' : 'a';
    } else {
      state.cmp = false;
      state.qa = state.qb = '';
      state.sel = state.b || state.a;
      state.a = state.b = null;
      tl.next = 'a';
    }
    state.series = '';
    state.t = 0;
    writeURL(true);
    if (ui.lastRange) drawTimeline(); // a comparison of two selectors drew a line per side
    redrawSelections();
    showSelection();
    loadView();
  });
  window.addEventListener('resize', () => { if (ui.lastRange && !$('timeline-panel').hidden) drawTimeline(); if (flame.root) drawFlame(); });

  /* ------------------------------------------------------------ tooltip */

  function showTip(e, html) {
    const tip = $('tooltip');
    tip.innerHTML = html;
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = e.clientX + 14, y = e.clientY + 14;
    if (x + w > window.innerWidth - 8) x = e.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = e.clientY - h - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { $('tooltip').hidden = true; }

  /* ------------------------------------------------------------ profile */

  function profileURL(series, t, report, sampleIndex) {
    // the call graph is a merge-path report: the merge of this one profile
    let u = report === 'callgraph' ?
      '/api/v1/query?mode=merge&query=' + encodeURIComponent(series) + '&from=' + (t / 1000).toFixed(3) + '&to=' + (t / 1000).toFixed(3) + '&report=' + report :
      '/api/v1/query?query=' + encodeURIComponent(series) + '&time=' + (t / 1000).toFixed(3) + '&report=' + report;
    if (sampleIndex && report !== 'proto') u += '&sample_index=' + encodeURIComponent(sampleIndex);
    return u + filterQuery();
  }

  // The sample type to show for a series: the chosen one when the series has
  // it (or when the timeline does not know the series), else its default.
  function sampleIndexFor(series) {
    if (!state.type) return '';
    const s = ui.lastRange && ui.lastRange.series.find((x) => exactSelector(x.labels) === series);
    if (!s) return state.type;
    return (s.sample_types || []).some((st) => st.type === state.type) ? state.type : '';
  }


  // A series' exact selector as shown: name{labels} without internal labels.
  function shownSeries(series) {
    const s = ui.lastRange && ui.lastRange.series.find((x) => exactSelector(x.labels) === series);
    return s ? seriesName(s.labels) : series.replace(/(\{|, )__[A-Za-z0-9_]*__="(?:[^"\\]|\\.)*"/g, '$1').replace(/\{, /, '{');
  }

  // What the profile panel shows, from the state: one profile, the merge of
  // a range, or the diff of two ranges (A = base). null: nothing.
  function viewSpec() {
    const q = state.query;
    const name = ((q.match(/^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)/) || [])[1]) || 'profile';
    const file = name.replace(/[^A-Za-z0-9_.-]/g, '_');
    const withIdx = (u, report, idx) => u + '&report=' + report +
      (idx && report !== 'proto' ? '&sample_index=' + encodeURIComponent(idx) : '') +
      (report === 'flamegraph' ? '&nodes=4000' : '') + filterQuery();
    // hidden legend entries are left out of merges and diffs (exclude=)
    const out = new Set(ui.hidden);
    for (const s of (ui.lastRange ? ui.lastRange.series : [])) if (leftOut(s)) out.add(exactSelector(s.labels));
    const excl = [...out].map((k) => '&exclude=' + encodeURIComponent(k)).join('') + mergeCounterParams();
    const mergeURL = (r, sel = q) => '/api/v1/query?mode=merge&query=' + encodeURIComponent(sel) + '&from=' + secs(r.from) + '&to=' + secs(r.to) + excl;
    const range = (r) => fmtTime(r.from) + (r.from === r.to ? '' : ' – ' + fmtTime(r.to));
    // a comparison: two ranges of the timeline, or two selectors (issue 31:
    // query_a/query_b) over their ranges (the whole window when not chosen)
    const twoSel = state.cmp && qA() !== qB();
    if (state.cmp && ((state.a && state.b) || twoSel)) {
      const whole = ui.lastRange ? { from: ui.lastRange.from, to: ui.lastRange.to } : window_();
      const a = state.a || whole, b = state.b || whole, sa = qA(), sb = qB();
      const norm = state.diffAbs ? '' : '&normalize=true';
      const base = '/api/v1/query?mode=diff&query_a=' + encodeURIComponent(sa) + '&query_b=' + encodeURIComponent(sb) +
        '&mode_a=merge&mode_b=merge&from_a=' + secs(a.from) + '&to_a=' + secs(a.to) + '&from_b=' + secs(b.from) + '&to_b=' + secs(b.to) + excl + norm;
      const side = (sel) => (twoSel ? sel + ' · ' : '');
      return {
        kind: 'diff', heading: 'Comparison',
        title: (twoSel ? '' : q + ' · ') + 'B ' + side(sb) + range(b) + (twoSel ? '' : ' (' + countIn(b) + ')') +
          ' vs A ' + side(sa) + range(a) + (twoSel ? ' (base)' : ' (' + countIn(a) + ', base)'),
        url: (report, idx) => withIdx(base, report, idx),
        sides: { a: (report, idx) => withIdx(mergeURL(a, sa), report, idx), b: (report, idx) => withIdx(mergeURL(b, sb), report, idx) },
        proto: withIdx(base, 'proto'),
        file: file + '-diff-' + b.from + '.pb.gz',
        cmd: 'go tool pprof -http=:' + (state.diffAbs ? '' : ' -normalize') + " -diff_base='" + location.origin + withIdx(mergeURL(a, sa), 'proto') +
          "' '" + location.origin + withIdx(mergeURL(b, sb), 'proto') + "'",
        dlText: 'Download diff (pprof)',
      };
    }
    const r = state.cmp ? state.a : state.sel;
    if (r) {
      const u = mergeURL(r);
      return {
        kind: 'merge', heading: state.cmp ? 'A (base) — now choose B' : 'Merged profiles',
        title: q + ' · ' + range(r) + ' · ' + countIn(r) + ' profiles merged',
        url: (report, idx) => withIdx(u, report, idx),
        proto: withIdx(u, 'proto'),
        file: file + '-merge-' + r.from + '-' + r.to + '.pb.gz',
        cmd: "go tool pprof -http=: '" + location.origin + withIdx(u, 'proto') + "'",
        dlText: 'Download merged pprof',
      };
    }
    if (state.series && state.t && !state.cmp) {
      const series = state.series, t = state.t, si = sampleIndexFor(series);
      return {
        kind: 'single', heading: 'Profile', title: shownSeries(series) + ' @ ' + fmtTime(t), fixedIdx: si,
        url: (report, idx) => profileURL(series, t, report, idx),
        proto: profileURL(series, t, 'proto'),
        file: file + '-' + t + '.pb.gz',
        cmd: "go tool pprof -http=: '" + location.origin + profileURL(series, t, 'proto') + "'",
        dlText: 'Download pprof',
      };
    }
    return null;
  }

  async function loadView() {
    const seq = ++profileSeq;
    const panel = $('profile-panel');
    const v = viewSpec();
    if (!v) { panel.hidden = true; return; }
    panel.hidden = false;
    panel.setAttribute('data-kind', v.kind);
    $('agg-field').hidden = v.kind === 'single';
    $('profile-heading').textContent = v.heading;
    $('profile-title').textContent = v.title;
    const dl = $('download');
    dl.href = v.proto;
    dl.textContent = v.dlText;
    dl.setAttribute('download', v.file);
    $('pprof-cmd').textContent = v.cmd;
    const fold = $('export-folded');
    fold.href = v.url('folded', v.kind === 'single' ? v.fixedIdx : state.type);
    fold.setAttribute('download', v.file.replace(/\.pb\.gz$/, '.folded.txt'));
    // Pyroscope's flamebearer JSON (report=flamebearer: the renderer of
    // /pyroscope/render): the flame graph as drawn (its max nodes); a
    // comparison as "double", each side as summed — the reader compares
    // shares itself with leftTicks/rightTicks
    const fbear = $('export-flamebearer');
    fbear.href = v.url('flamebearer', v.kind === 'single' ? v.fixedIdx : state.type).replace('&normalize=true', '') + '&nodes=' + state.maxNodes;
    fbear.setAttribute('download', v.file.replace(/\.pb\.gz$/, '.flamebearer.json'));
    $('profile-summary').textContent = 'loading…';
    busy(panel, true);
    try {
      const si = v.kind === 'single' ? v.fixedIdx : state.type;
      // one request, one merge on the server, for the table and the flame graph
      // the canvas draws large trees at once: up to FG_NODES nodes (the API keeps the largest)
      const both = async (idx) => { const d = await api(v.url('view', idx) + topQuery() + '&fg_nodes=' + state.maxNodes); return [d.top, d.flamegraph]; };
      let top, fg;
      profile.view = v;
      profile.idx = si;
      profile.diff = v.kind === 'diff';
      if (profile.diff && !['base_flat', 'new_flat', 'flat', 'flat_rel', 'cum', 'function'].includes(profile.sortKey)) profile.sortKey = 'flat';
      if (!profile.diff && !['flat', 'flat_pct', 'cum', 'cum_pct', 'function'].includes(profile.sortKey)) profile.sortKey = 'flat';
      try {
        [top, fg] = await both(si);
      } catch (e) {
        if (!si || v.kind !== 'single') throw e;
        [top, fg] = await both(''); // this profile lacks the chosen sample type: show its default
        profile.idx = '';
      }
      if (seq !== profileSeq) return;
      showError('');
      $('profile-error').hidden = true;
      const st = top.sample_type || {};
      const diff = v.kind === 'diff';
      profile.top = top;
      profile.unit = st.unit || '';
      profile.diff = diff;
      const n = (top.rows_total !== undefined ? top.rows_total : (top.rows || []).length);
      if (diff && !state.diffAbs) {
        $('profile-summary').innerHTML = esc(st.type || '') + ' · <b>share of each side\'s total</b> (B scaled to A\'s total ' +
          esc(fmtValue(top.base_total, st.unit)) + ', as pprof -normalize): a change is a change of share, whatever the number of profiles on each side · ' + n + ' functions';
      } else if (diff) {
        const d = top.total || 0;
        $('profile-summary').innerHTML = esc(st.type || '') + ' · <b>absolute</b> · A (base) ' + esc(fmtValue(top.base_total, st.unit)) +
          ' → B ' + esc(fmtValue(top.new_total, st.unit)) + ' · <span class="' + (d > 0 ? 'pos' : d < 0 ? 'neg' : '') + '">Δ ' +
          esc(signed(d, st.unit)) + (top.base_total ? ' (' + relChange(top.base_total, top.new_total) + ')' : '') + '</span> · ' + n + ' functions';
      } else {
        $('profile-summary').textContent = (st.type || '') + ' · total ' + fmtValue(top.total, st.unit) + ' · ' + n + ' functions';
      }
      $('top-table').setAttribute('data-total', String(top.total));
      drawTop();
      const t0 = performance.now();
      flame.root = prepareFlame(fg, diff);
      flame.functions = (fg && fg.functions) || {}; // where each function comes from (the API's root)
      fc.setTree(flame.root, diff);
      flame.zoom = flame.root;
      flame.cur = null;
      // the zoom of the URL, when the same path exists in this profile
      if (state.zoomPath) {
        let n = flame.root;
        for (const name of state.zoomPath.split('\n')) { n = n && n.children.find((c) => c.name === name); }
        if (n) flame.zoom = n;
      }
      if ($('flame-search').value !== state.search) $('flame-search').value = state.search;
      flame.unit = st.unit || '';
      flame.diff = diff;
      $('flamegraph').setAttribute('data-total', String(fg.value || 0));
      $('flame-legend').hidden = !diff;
      $('diff-field').hidden = !diff;
      $('diff-norm').value = state.diffAbs ? 'abs' : '';
      $('flame-measure').textContent = state.diffAbs ? 'colour: absolute change B − A (width: A + B)' :
        'colour: change of share of each side\'s total (width: A + B, B scaled to A\'s total)';
      $('sandwich').hidden = true;
      closeSource();
      showTrimmed(fg);
      drawFlame();
      loadSides(v, seq);
      // what the first paint cost (tree + layout + paint), for tools and tests
      fc.timing.firstPaint = performance.now() - t0;
      $('flamegraph').setAttribute('data-paint-ms', fc.timing.firstPaint.toFixed(1));
      if ($('view-callgraph').getAttribute('aria-pressed') === 'true') showCallgraph(true);
    } catch (e) {
      if (seq !== profileSeq) return;
      // said where it happened, and nothing of an older view left beside it
      $('profile-summary').textContent = '';
      $('profile-error').textContent = 'Loading the ' + (v.kind === 'single' ? 'profile' : v.kind) + ' failed: ' + e.message;
      $('profile-error').hidden = false;
      flame.root = null; fc.rects = []; fc.rows = []; $('flamegraph').textContent = ''; $('flamegraph').removeAttribute('data-total');
      $('flame-crumbs').textContent = ''; $('flame-pkgs').hidden = true; $('flame-match').textContent = '';
      $('top-table').tBodies[0].innerHTML = ''; $('top-table').removeAttribute('data-total'); $('top-more').hidden = true;
    } finally {
      if (seq === profileSeq) busy(panel, false);
    }
  }

  // "N nodes trimmed (max M)" when the API kept fewer nodes than the tree has
  // (the flame graph root's nodes / nodes_total), with the max as a setting.
  function showTrimmed(fg) {
    const el = $('flame-trimmed');
    const kept = fg && fg.nodes, all = fg && fg.nodes_total;
    const cut = kept !== undefined && all !== undefined ? all - kept : 0;
    el.hidden = !(cut > 0) && state.maxNodes === FG_NODES;
    $('trimmed-text').textContent = cut > 0 ? cut.toLocaleString('en-US') + ' nodes trimmed (max ' + kept.toLocaleString('en-US') + ')' :
      'all ' + (all || 0).toLocaleString('en-US') + ' nodes drawn';
    el.classList.toggle('cut', cut > 0);
    $('max-nodes').value = String(state.maxNodes);
  }
  $('max-nodes').addEventListener('change', () => {
    const v = parseInt($('max-nodes').value, 10);
    state.maxNodes = v >= 0 ? v : FG_NODES;
    writeURL(false);
    loadView();
  });
  $('diff-norm').addEventListener('change', () => {
    state.diffAbs = $('diff-norm').value === 'abs';
    writeURL(false);
    loadView();
  });

  // A comparison's two sides, side by side (each its own flame graph, the
  // same zoom path in both: a click in either zooms both).
  const sideFc = { a: null, b: null, roots: { a: null, b: null } };
  async function loadSides(v, seq) {
    const box = $('side-by-side');
    box.hidden = !v.sides;
    if (!v.sides) return;
    if (!sideFc.a) { sideFc.a = new FlameCanvas($('flame-a')); sideFc.b = new FlameCanvas($('flame-b')); }
    busy(box, true);
    try {
      const [fa, fb] = await Promise.all(['a', 'b'].map((k) => api(v.sides[k]('flamegraph', state.type).replace('&nodes=4000', '&nodes=2000'))));
      if (seq !== profileSeq) return;
      sideFc.roots.a = prepareFlame(fa, false);
      sideFc.roots.b = prepareFlame(fb, false);
      for (const k of ['a', 'b']) {
        $('side-' + k + '-total').textContent = fmtValue(sideFc.roots[k].value, flame.unit);
        sideFc[k].setTree(sideFc.roots[k], false);
      }
      drawSides();
    } catch (e) {
      if (seq === profileSeq) $('flame-a').textContent = $('flame-b').textContent = e.message;
    } finally { busy(box, false); }
  }
  function drawSides() {
    if (!sideFc.roots.a || $('side-by-side').hidden) return;
    const path = state.zoomPath ? state.zoomPath.split('\n') : [];
    for (const k of ['a', 'b']) {
      const root = sideFc.roots[k];
      if (!root.value) { $('flame-' + k).innerHTML = '<p class="muted">no samples</p>'; continue; }
      let n = root;
      for (const name of path) { const c = n.children.find((x) => x.name === name); if (!c) break; n = c; }
      const f = sideFc[k];
      if (!f.canvas.isConnected) { $('flame-' + k).textContent = ''; $('flame-' + k).appendChild(f.canvas); }
      f.zoom = n; f.up = state.flameUp; f.diff = false;
      f.draw();
    }
  }
  for (const k of ['a', 'b']) {
    $('flame-' + k).addEventListener('click', (e) => {
      const r = sideFc[k] && sideFc[k].hit(e);
      if (!r || !r.node) return;
      // the linked zoom: the same path in the diff and in both sides
      const names = [];
      for (let x = r.node; x && x.parent; x = x.parent) names.unshift(x.name);
      let n = flame.root;
      for (const name of names) { const c = n && n.children.find((x) => x.name === name); if (!c) break; n = c; }
      if (n) { flame.zoom = n; drawFlame(); }
    });
  }

  function signed(v, unit) { return (v > 0 ? '+' : '') + fmtValue(v, unit); }
  // The change from a to b as a percentage of a ("new" when a is 0).
  function relChange(a, b) {
    if (!a) return b ? 'new' : '0%';
    const p = (100 * (b - a)) / Math.abs(a);
    if (Math.abs(p) < 0.05) return '0%'; // unchanged (a scaled side rounds by a unit)
    return (p > 0 ? '+' : '') + (Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)) + '%';
  }

  // The flame graph as drawn, as a PNG (the canvas' pixels).
  $('export-png').addEventListener('click', () => {
    if (!fc.canvas || !fc.rects.length) return;
    const v = profile.view;
    fc.canvas.toBlob((blob) => {
      if (!blob) return;
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = (v ? v.file.replace(/\.pb\.gz$/, '') : 'flamegraph') + '.png';
      document.body.appendChild(a);
      a.click();
      setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
    }, 'image/png');
  });

  $('copy-cmd').addEventListener('click', async () => {
    const text = $('pprof-cmd').textContent;
    try {
      await navigator.clipboard.writeText(text);
      $('copy-cmd').textContent = 'Copied';
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents($('pprof-cmd'));
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      $('copy-cmd').textContent = 'Press Ctrl-C';
    }
    setTimeout(() => { $('copy-cmd').textContent = 'Copy'; }, 1500);
  });

  /* ------------------------------------------------------------ top table */

  // The server sorts, filters and cuts the rows (report=top's sort, order,
  // filter and limit): the table asks again when any of them changes, so
  // "sorted by cum" means the largest by cum of the whole profile, not of the
  // rows that happened to come first by flat.
  const profile = { top: null, unit: '', sortKey: 'flat', asc: false, filter: '', limit: 100, diff: false, view: null, idx: '', seq: 0 };
  // table column -> report=top's sort (diff columns of one side sort here)
  const SERVER_SORT = { flat: 'flat', flat_pct: 'flat', cum: 'cum', cum_pct: 'cum', function: 'name' };

  function topQuery() {
    const k = profile.sortKey;
    let q = '&limit=' + (profile.limit === Infinity ? 0 : profile.limit);
    const srv = SERVER_SORT[k];
    // a diff's default order is pprof's (|delta flat|); the other columns sort on the server
    if (srv && !(profile.diff && k === 'flat' && !profile.asc)) q += '&sort=' + srv + '&order=' + (profile.asc ? 'asc' : 'desc');
    if (profile.filter) q += '&filter=' + encodeURIComponent(profile.filter);
    return q;
  }

  async function refetchTop() {
    if (!profile.view) return;
    const seq = ++profile.seq;
    try {
      const top = await api(profile.view.url('top', profile.idx) + topQuery());
      if (seq !== profile.seq) return;
      profile.top = top;
      showError('');
      drawTop();
    } catch (e) {
      if (seq === profile.seq) showError('Loading the top table failed: ' + e.message);
    }
  }

  const TOP_COLS = [['flat', 'flat', 1], ['flat_pct', 'flat%', 1], ['cum', 'cum', 1], ['cum_pct', 'cum%', 1], ['function', 'function', 0]];
  // A diff: each side's flat, the delta of flat (with the change relative to
  // A) and of cum. flat/cum of a diff's rows are the deltas (B - A).
  const DIFF_COLS = [['base_flat', 'A (base) flat', 1], ['new_flat', 'B flat', 1], ['flat', 'Δ flat', 1], ['flat_rel', 'Δ%', 1],
    ['cum', 'Δ cum', 1], ['function', 'function', 0]];

  function drawTop() {
    const top = profile.top;
    const rows = (top.rows || []).slice();
    const total = top.total || 0;
    const k = profile.sortKey;
    const cols = profile.diff ? DIFF_COLS : TOP_COLS;
    const keyOf = (r) => (k === 'flat_rel' ? r.flat : r[k]);
    if (!SERVER_SORT[k]) { // a diff's one-side columns: the server's rows, sorted here
      const dir = profile.asc ? -1 : 1;
      rows.sort((a, b) => dir * (Math.abs(keyOf(b)) - Math.abs(keyOf(a))) || Math.abs(b.cum) - Math.abs(a.cum));
    }
    const shown = rows;
    const thead = $('top-table').tHead;
    const want = cols.map((c) => c[0]).join();
    if (thead.getAttribute('data-cols') !== want) {
      thead.innerHTML = '<tr>' + cols.map((c) => '<th data-key="' + c[0] + '"' + (c[2] ? ' class="num"' : '') + '>' + esc(c[1]) + '</th>').join('') + '</tr>';
      thead.setAttribute('data-cols', want);
    }
    thead.querySelectorAll('th').forEach((th) => {
      const on = th.getAttribute('data-key') === k;
      th.classList.toggle('sorted', on);
      th.classList.toggle('asc', on && profile.asc);
      th.setAttribute('aria-sort', on ? (profile.asc ? 'ascending' : 'descending') : 'none');
      th.tabIndex = 0;
    });
    const u = profile.unit;
    const sgn = (v) => (v > 0 ? 'pos' : v < 0 ? 'neg' : 'zero');
    // a change the Δ% rounds to 0% is not coloured (as the flame graph's grey)
    const fsgn = (r) => (relChange(r.base_flat, r.new_flat) === '0%' ? 'zero' : sgn(r.flat));
    const rowHTML = profile.diff ? (r) =>
      '<tr data-fn="' + esc(r.function) + '">' +
      '<td class="num">' + esc(fmtValue(r.base_flat, u)) + '</td>' +
      '<td class="num">' + esc(fmtValue(r.new_flat, u)) + '</td>' +
      '<td class="num delta ' + fsgn(r) + '">' + esc(signed(r.flat, u)) + '</td>' +
      '<td class="num delta ' + fsgn(r) + '">' + esc(relChange(r.base_flat, r.new_flat)) + '</td>' +
      '<td class="num delta ' + sgn(r.cum) + '">' + esc(signed(r.cum, u)) + '</td>' +
      '<td class="fn" title="' + esc(r.file || '') + '">' + esc(r.function) + '</td></tr>'
      : (r) =>
      '<tr data-fn="' + esc(r.function) + '">' +
      '<td class="num">' + esc(fmtValue(r.flat, u)) + '</td>' +
      '<td class="num">' + fmtPct(r.flat, total) + '</td>' +
      '<td class="num">' + esc(fmtValue(r.cum, u)) + '</td>' +
      '<td class="num">' + fmtPct(r.cum, total) + '<span class="bar" style="width:' + Math.round(40 * Math.abs(r.cum) / (Math.abs(total) || 1)) + 'px"></span></td>' +
      '<td class="fn" title="' + esc(r.file || '') + '">' + esc(r.function) + ' <button type="button" class="link sw-open" title="callers and callees of this function">sandwich</button>' +
      ' <button type="button" class="link src-open" title="the source file of this function, cost per line">source</button></td></tr>';
    $('top-table').tBodies[0].innerHTML = shown.map(rowHTML).join('') ||
      '<tr><td colspan="' + cols.length + '" class="muted">' + (profile.filter ? 'No function matches the filter.' :
        profile.diff ? 'No differences in this sample type.' : 'This profile has no samples of this type.') + '</td></tr>';
    const more = $('top-more');
    const cut = top.rows_cut || 0;
    const all = top.rows_total !== undefined ? top.rows_total : rows.length + cut;
    more.hidden = cut === 0;
    more.innerHTML = cut ? 'Showing ' + shown.length + ' of ' + all + ' functions' + (profile.filter ? ' matching the filter' : '') +
      '. <a href="#" id="top-all">Show all</a>' : '';
  }

  function sortBy(key) {
    if (!profile.top) return;
    if (profile.sortKey === key) profile.asc = !profile.asc;
    else { profile.sortKey = key; profile.asc = key === 'function'; }
    writeURL(false);
    if (SERVER_SORT[key]) refetchTop(); else drawTop();
  }
  $('top-table').tHead.addEventListener('click', (e) => {
    const th = e.target.closest('th[data-key]');
    if (th) sortBy(th.getAttribute('data-key'));
  });
  $('top-table').tHead.addEventListener('keydown', (e) => {
    const th = e.target.closest('th[data-key]');
    if (th && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); sortBy(th.getAttribute('data-key')); }
  });
  let filterTimer = null;
  $('top-filter').addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => { profile.filter = $('top-filter').value.trim(); writeURL(false); refetchTop(); }, 200);
  });
  $('top-more').addEventListener('click', (e) => {
    if (e.target.id !== 'top-all') return;
    e.preventDefault();
    profile.limit = Infinity;
    writeURL(false);
    refetchTop();
  });
  // A click on a row highlights that function in the flame graph.
  $('top-table').tBodies[0].addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-fn]');
    if (!tr) return;
    if (e.target.closest('.sw-open')) { openSandwich(tr.getAttribute('data-fn')); return; }
    if (e.target.closest('.src-open')) { showSource(tr.getAttribute('data-fn')); return; }
    const fn = tr.getAttribute('data-fn');
    $('flame-search').value = state.search = '^' + fn.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
    writeURL(false);
    highlightFlame();
    $('flamegraph').scrollIntoView({ behavior: 'smooth', block: 'nearest' });
  });

  /* ------------------------------------------------------------ flame graph */

  // The flame graph is painted on a canvas by flame.js (FlameCanvas: exact
  // widths, "…" for runs under a pixel, hit-testing); this part keeps the
  // page around it: zoom (breadcrumbs, the URL), tooltip, keyboard, search.
  // A diff's frames are as wide as A and B together (so a frame that
  // vanished in B still shows, and children fit in their parent), colored by
  // the change: red grew, green shrank, grey unchanged.
  const fc = new FlameCanvas($('flamegraph'));
  const flame = {
    root: null, zoom: null, unit: '', diff: false, cur: null,
    get nodes() { return fc.rects.filter((r) => r.node).map((r) => r.node); },
  };

  function prepareFlame(tree, diff) {
    const walk = (n, parent, depth) => {
      const node = { name: n.name, value: n.value || 0, self: n.self || 0, parent, depth, children: [] };
      if (diff) {
        node.base = n.base || 0; node.new = n.new || 0;
        node.base_self = n.base_self || 0; node.new_self = n.new_self || 0;
        node.size = node.base + node.new;
      } else node.size = node.value;
      const ch = n.children;
      if (ch) for (let i = 0; i < ch.length; i++) node.children.push(walk(ch[i], node, depth + 1));
      return node;
    };
    return walk(tree || { name: 'root', value: 0 }, null, 0);
  }

  function drawFlame() {
    const box = $('flamegraph');
    const zoom = flame.zoom, root = flame.root;
    const total = root.size || 0;
    if (!total) {
      box.innerHTML = '<p class="muted" style="padding:8px">' + (flame.diff ? 'Neither selection has samples of this type.' : 'This profile has no samples of this type.') + '</p>';
      fc.rects = [];
    } else {
      fc.zoom = zoom; fc.up = state.flameUp; fc.cb = state.cb; fc.diff = flame.diff;
      fc.draw();
    }
    // breadcrumbs of the zoom, and the zoom in the URL
    const crumbs = [];
    for (let a = zoom; a; a = a.parent) crumbs.unshift(a);
    $('flame-crumbs').innerHTML = zoom === root ? '' : crumbs.map((c, i) => i === crumbs.length - 1 ?
      '<span aria-current="true">' + esc(c.name === 'root' ? 'all' : c.name) + '</span>' :
      '<a href="#" data-depth="' + i + '">' + esc(c.name === 'root' ? 'all' : c.name) + '</a>').join(' › ');
    const zp = zoom === root ? '' : crumbs.slice(1).map((c) => c.name).join('\n');
    if (zp !== state.zoomPath) { state.zoomPath = zp; writeURL(false); }
    if (flame.diff) drawSides();
    $('flame-reset').hidden = zoom === root;
    box.setAttribute('data-zoom', zoom === root ? '' : zoom.name);
    // the colour legend: the packages drawn widest (a click searches the package)
    const pk = flame.diff || !total ? [] : fc.packages(10);
    $('flame-pkgs').hidden = !pk.length;
    $('flame-pkgs').innerHTML = pk.length ? '<span class="muted">colour by package:</span> ' + pk.map((e) =>
      '<button type="button" class="pkg" data-pkg="' + esc(e.pkg) + '" title="highlight the functions of ' + esc(e.pkg) + '">' +
      '<span class="sw" data-color="' + esc(e.color) + '"></span>' + esc(e.pkg) + '</button>').join('') : '';
    $('flame-pkgs').querySelectorAll('.sw').forEach((el) => { el.style.background = el.getAttribute('data-color'); });
    highlightFlame();
  }
  // the canvas follows the box's width
  let flameWidth = 0;
  new ResizeObserver(() => {
    const w = $('flamegraph').clientWidth;
    if (w && w !== flameWidth && flame.root && fc.rects.length) { flameWidth = w; fc.draw(); }
    else flameWidth = w;
  }).observe($('flamegraph'));

  $('flamegraph').addEventListener('click', (e) => {
    const r = fc.hit(e);
    if (!r || !r.node) return;
    flame.zoom = r.node;
    drawFlame();
  });
  $('flamegraph').addEventListener('mousemove', (e) => {
    const r = fc.hit(e);
    fc.setHover(r);
    $('flamegraph').style.cursor = r && r.node ? 'pointer' : '';
    if (!r) { hideTip(); return; }
    if (r.kind === 'more') {
      showTip(e, '<b>' + r.count + ' frames</b> under a pixel each<br>' +
        esc(fmtValue(r.value, flame.unit)) + ' together<br><i>zoom into the caller to see them</i>');
      return;
    }
    const n = r.node;
    const total = flame.root.value;
    const nm = '<b>' + esc(n.name === 'root' ? 'all samples' : n.name) + '</b><br>';
    if (flame.diff) {
      const u = flame.unit, d = n.new - n.base;
      showTip(e, nm + 'A (base) ' + esc(fmtValue(n.base, u)) + ' → B ' + esc(fmtValue(n.new, u)) +
        '<br>Δ <b>' + esc(signed(d, u)) + '</b> (' + esc(relChange(n.base, n.new)) + ')' +
        (n.base_self || n.new_self ? '<br>self: A ' + esc(fmtValue(n.base_self, u)) + ' → B ' + esc(fmtValue(n.new_self, u)) : '') +
        '<br><i>click to zoom</i>');
      return;
    }
    const parentPct = n.parent ? ' · ' + fmtPct(n.value, n.parent.value) + ' of caller' : '';
    showTip(e, nm + sourceTip(n.name) +
      esc(fmtValue(n.value, flame.unit)) + ' (' + fmtPct(n.value, total) + ' of total' + parentPct + ')' +
      (n.self ? '<br>self ' + esc(fmtValue(n.self, flame.unit)) + ' (' + fmtPct(n.self, total) + ')' : '') +
      '<br><i>click to zoom · right-click: callers and callees (and the source) · v: source</i>');
  });
  $('flamegraph').addEventListener('mouseleave', () => { fc.setHover(null); hideTip(); });

  // Where a function comes from, for its tooltip: file:line, and the binary
  // (mapping file and build id) — the flame graph's "functions" of the API.
  function sourceTip(name) {
    const f = (flame.functions || {})[name];
    if (!f) return '';
    const file = f.file ? esc(f.file) + (f.line ? ':' + f.line : '') : '';
    const bin = f.mapping ? esc(f.mapping.split('/').pop()) + (f.build_id ? ' <span class="muted">(build id ' + esc(f.build_id.slice(0, 12)) + ')</span>' : '') : '';
    return (file ? '<span class="tl src-file">' + file + '</span><br>' : '') + (bin ? '<span class="tl src-bin">' + bin + '</span><br>' : '');
  }
  $('flame-reset').addEventListener('click', () => { flame.zoom = flame.root; drawFlame(); });

  // Keyboard on the flame graph (it takes the focus): arrows move over the
  // frames drawn (Up/Down: caller/first callee as drawn, Left/Right: the
  // neighbours of the same caller), Enter zooms, "s" opens the sandwich view.
  function markKbd(n) {
    flame.cur = fc.cur = n;
    fc.paint();
    $('flamegraph').setAttribute('data-current', n.name);
    $('flame-live').textContent = (n.name === 'root' ? 'all samples' : n.name) + ': ' + fmtValue(n.value, flame.unit) +
      ' (' + fmtPct(n.value, flame.root.value) + ' of total); Enter zooms, s shows callers and callees';
  }
  $('flamegraph').addEventListener('keydown', (e) => {
    if (!flame.root) return;
    const drawn = new Set(flame.nodes);
    let n = flame.cur && drawn.has(flame.cur) ? flame.cur : flame.zoom;
    const sib = (d) => { const p = n.parent; if (!p) return null; const v = p.children.filter((c) => drawn.has(c)); const j = v.indexOf(n) + d; return v[j] || null; };
    let next = null;
    const up = state.flameUp ? 'ArrowDown' : 'ArrowUp', down = state.flameUp ? 'ArrowUp' : 'ArrowDown';
    if (e.key === up) next = n.parent && drawn.has(n.parent) ? n.parent : null;
    else if (e.key === down) next = n.children.find((c) => drawn.has(c)) || null;
    else if (e.key === 'ArrowLeft') next = sib(-1);
    else if (e.key === 'ArrowRight') next = sib(1);
    else if (e.key === 'Enter') { e.preventDefault(); flame.zoom = n; drawFlame(); markKbd(n); return; }
    else if (e.key === 's' && n !== flame.root) { e.preventDefault(); openSandwich(n.name); return; }
    else if (e.key === 'v' && n !== flame.root) { e.preventDefault(); showSource(n.name); return; }
    else return;
    e.preventDefault();
    if (next) markKbd(next);
  });

  // The call graph tab: the API's SVG (Graphviz, as pprof -svg) of the same
  // selection and sample type, instead of the flame graph.
  function showCallgraph(on) {
    const btn = $('view-callgraph');
    btn.setAttribute('aria-pressed', on ? 'true' : 'false');
    btn.classList.toggle('on', on);
    $('flamegraph').hidden = on;
    $('flame-search').disabled = on;
    const cg = $('callgraph');
    cg.hidden = !on;
    if (!on || !profile.view) return;
    const url = profile.view.url('callgraph', profile.idx);
    if (cg.getAttribute('data-url') === url) return;
    cg.setAttribute('data-url', url);
    cg.innerHTML = '<p class="muted">rendering the call graph…</p>';
    const img = new Image();
    img.alt = 'call graph of ' + $('profile-title').textContent;
    img.onload = () => { cg.innerHTML = ''; cg.appendChild(img); };
    const failed = () => { cg.innerHTML = '<p class="error">The call graph could not be drawn (is Graphviz installed on the server?).</p>'; };
    img.onerror = failed;
    // the API's SVG writes raw values ("76340000000"): its labels get human
    // units (76.34s) here, then the image is the rewritten SVG
    const unit = profile.unit;
    fetch(url).then((r) => (r.ok ? r.text() : Promise.reject(new Error('HTTP ' + r.status)))).then((svg) => {
      if (cg.getAttribute('data-url') !== url) return;
      const human = svg.replace(/(<text[^>]*>)([^<]*)(<\/text>)/g, (m, open, txt, close) => open + humanLabel(txt, unit) + close);
      cg.svg = human; // the SVG shown, for tools and tests
      if (cg.blobURL) URL.revokeObjectURL(cg.blobURL);
      img.src = cg.blobURL = URL.createObjectURL(new Blob([human], { type: 'image/svg+xml' }));
    }).catch(failed);
  }
  // A call graph label with its values in units: "2688 (0.04%)", "of 6557184
  // (99.98%)", " 3276800" (an edge), "Total: 6558496"; other text unchanged.
  function humanLabel(txt, unit) {
    const m = /^(\s*)(of |Total: )?(-?\d+)( \(.*\))?(\s*)$/.exec(txt);
    return m ? m[1] + (m[2] || '') + esc(fmtValue(+m[3], unit)) + (m[4] || '') + m[5] : txt;
  }
  $('view-callgraph').addEventListener('click', () => {
    const on = $('view-callgraph').getAttribute('aria-pressed') !== 'true';
    state.view = on ? 'callgraph' : '';
    writeURL(false);
    showCallgraph(on);
  });
  // merges and diffs: the sum of the profiles or their average (a gauge's meaning)
  $('agg').addEventListener('change', () => { state.agg = ['sum', 'avg'].includes($('agg').value) ? $('agg').value : ''; writeURL(false); loadView(); });

  /* ------------------------------------------------ cumulative types, gauges (issue 12) */

  // Go's allocs/block/mutex as scraped count since the process started: the
  // API shows them as deltas by default (query_range's sample_types[].kind
  // says "cumulative"); Counters: raw asks for the stored counters
  // (delta=false). Merges of a gauge type (kind "gauge": inuse_*, goroutine)
  // default to agg=avg, the profile on average over the range; else sum.
  function kindOf(type) {
    for (const s of (ui.lastRange && ui.lastRange.series) || [])
      for (const st of s.sample_types || []) if (st.type === type && st.kind) return st.kind;
    return '';
  }
  function anyCumulative() {
    return ((ui.lastRange && ui.lastRange.series) || []).some((s) => (s.sample_types || []).some((st) => st.kind === 'cumulative'));
  }
  function mergeCounterParams() {
    const agg = state.agg || (kindOf(state.type) === 'gauge' ? 'avg' : '');
    return (state.raw ? '&delta=false' : '') + (agg ? '&agg=' + agg : '');
  }
  function showCounters() {
    $('counters-field').hidden = !anyCumulative() && !state.raw;
    $('counters').value = state.raw ? 'raw' : 'delta';
    $('agg').options[0].textContent = 'auto (' + (kindOf(state.type) === 'gauge' ? 'averaged' : 'summed') + ')';
  }
  $('counters').addEventListener('change', () => {
    state.raw = $('counters').value === 'raw';
    writeURL(false);
    run(false).then(() => loadView());
  });
  $('sample-type').addEventListener('change', showCounters);

  // Keys: "/" searches the flame graph, Esc resets its zoom and search.
  document.addEventListener('keydown', (e) => {
    const typing = e.target.closest && e.target.closest('input, select, textarea');
    if (e.key === '/' && !typing && !$('profile-panel').hidden) {
      e.preventDefault();
      $('flame-search').focus();
    } else if (e.key === 'Escape' && flame.root && !$('profile-panel').hidden) {
      if (e.target === $('flame-search') && $('flame-search').value) { $('flame-search').value = ''; state.search = ''; writeURL(false); highlightFlame(); return; }
      if (flame.zoom !== flame.root) { flame.zoom = flame.root; drawFlame(); }
    }
  });
  // debounced: the walk over a large tree runs once the typing pauses
  let searchTimer = null;
  $('flame-search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { state.search = $('flame-search').value.trim(); writeURL(false); highlightFlame(); }, 120);
  });
  $('flame-pkgs').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-pkg]');
    if (!b) return;
    $('flame-search').value = state.search = '^' + b.getAttribute('data-pkg').replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '\\.';
    writeURL(false);
    highlightFlame();
  });
  $('flame-crumbs').addEventListener('click', (e) => {
    const a = e.target.closest('a[data-depth]');
    if (!a) return;
    e.preventDefault();
    let n = flame.zoom;
    const chain = [];
    for (let x = n; x; x = x.parent) chain.unshift(x);
    flame.zoom = chain[+a.getAttribute('data-depth')] || flame.root;
    drawFlame();
  });
  $('flame-up').addEventListener('click', () => {
    state.flameUp = !state.flameUp;
    $('flame-up').setAttribute('aria-pressed', String(state.flameUp));
    $('flame-up').textContent = state.flameUp ? 'Icicle' : 'Flame';
    writeURL(false);
    drawFlame();
  });
  $('diff-palette').addEventListener('change', () => {
    state.cb = $('diff-palette').checked;
    writeURL(false);
    document.body.classList.toggle('cb', state.cb);
    drawFlame();
  });

  // The search: frames whose name matches the regexp stay bright (the rest
  // dimmed), and the outermost matches' share is shown. Names are tested once
  // each per regexp; fc.timing.search is the last one's cost (ms).
  function highlightFlame() {
    const box = $('flamegraph');
    const q = $('flame-search').value.trim();
    let re = null, bad = '';
    if (q) { try { re = new RegExp(q); } catch (e) { bad = e.message; } }
    $('flame-search').setAttribute('aria-invalid', bad ? 'true' : 'false');
    $('flame-match').classList.toggle('bad', !!bad);
    if (bad) { $('flame-match').textContent = 'not a regular expression: ' + bad; re = null; }
    box.classList.toggle('searching', !!re);
    if (!flame.root || !fc.rects.length) { if (!bad) $('flame-match').textContent = ''; return; }
    const t0 = performance.now();
    const m = fc.search(re);
    fc.timing.search = performance.now() - t0;
    if (bad) return;
    if (!m) { $('flame-match').textContent = ''; return; }
    const drawn = fc.rects.reduce((k, r) => k + (r.match ? 1 : 0), 0);
    box.setAttribute('data-matches', String(drawn));
    $('flame-match').textContent = (flame.diff ? 'matched: A ' + fmtValue(m.base, flame.unit) + ' → B ' + fmtValue(m.new, flame.unit) + ' (Δ ' + signed(m.new - m.base, flame.unit) + ')' :
      'matched ' + fmtValue(m.sum, flame.unit) + ' (' + fmtPct(m.sum, flame.root.value) + ')') + ' · ' + drawn + ' frames drawn';
  }

  /* ------------------------------------------------------------ focus / ignore */

  // pprof's -focus / -ignore on the profile shown: the API filters the
  // samples (a single profile then goes through the merge path).
  function filterQuery() {
    return (state.focus ? '&focus=' + encodeURIComponent(state.focus) : '') + (state.ignore ? '&ignore=' + encodeURIComponent(state.ignore) : '');
  }
  const exactRe = (name) => '^' + name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
  function setFilter(kind, re) {
    state[kind] = re;
    showFilters();
    writeURL(true);
    loadView();
  }
  function showFilters() {
    const chips = [['focus', 'focus on'], ['ignore', 'ignoring']].filter(([k]) => state[k]).map(([k, label]) =>
      '<span class="chip filter-chip" data-kind="' + k + '">' + label + ' <code>' + esc(state[k]) + '</code> <button type="button" class="small" data-clear="' + k +
      '" aria-label="remove the ' + k + ' filter">✕</button></span>').join(' ');
    $('filters').innerHTML = chips;
    $('filters').hidden = !chips;
  }
  $('filters').addEventListener('click', (e) => { const b = e.target.closest('button[data-clear]'); if (b) setFilter(b.getAttribute('data-clear'), ''); });
  $('sandwich-focus').addEventListener('click', () => setFilter('focus', exactRe($('sandwich-fn').textContent)));
  $('sandwich-ignore').addEventListener('click', () => setFilter('ignore', exactRe($('sandwich-fn').textContent)));

  /* ------------------------------------------------------------ sandwich */

  // The sandwich view of function fn (as Pyroscope's): over every call site
  // of fn in the flame graph tree (outermost occurrences only, so recursion
  // counts once), its callers as a tree from fn up to the roots, and its
  // callees merged into one tree under fn. Values are fn's (cumulative).
  function sandwichTrees(root, fn) {
    const mk = (name) => ({ name, value: 0, children: [], kids: new Map() });
    const add = (parent, name, v) => {
      let c = parent.kids.get(name);
      if (!c) { c = mk(name); parent.kids.set(name, c); parent.children.push(c); }
      c.value += v;
      return c;
    };
    const callers = mk(fn), callees = mk(fn);
    const mergeInto = (dst, n) => { for (const c of n.children) mergeInto(add(dst, c.name, c.value), c); };
    const walk = (n) => {
      if (n.name === fn && n !== root) {
        callers.value += n.value;
        callees.value += n.value;
        let at = callers;
        for (let a = n.parent; a && a !== root; a = a.parent) at = add(at, a.name, n.value);
        mergeInto(callees, n);
        return; // outermost occurrence: its subtree is in callees already
      }
      n.children.forEach(walk);
    };
    walk(root);
    return { callers, callees };
  }

  function openSandwich(fn) {
    if (!flame.root) return;
    const { callers, callees } = sandwichTrees(flame.root, fn);
    $('sandwich').hidden = false;
    $('sandwich-fn').textContent = fn;
    $('sandwich').setAttribute('data-value', String(callers.value));
    $('sandwich-total').textContent = fmtValue(callers.value, flame.unit) + ' (' + fmtPct(callers.value, flame.root.value) + ' of total)';
    $('sandwich-callers').innerHTML = miniFlame(callers, flame.unit, true);
    $('sandwich-callees').innerHTML = miniFlame(callees, flame.unit, true);
    $('sandwich').scrollIntoView({ behavior: 'smooth', block: 'nearest' });
  }
  $('sandwich-close').addEventListener('click', () => { $('sandwich').hidden = true; });

  /* ------------------------------------------------------------ source view */

  // The source view (source.js) of function fn over the selection shown: the
  // view's own query parameters on /api/v1/source (a comparison: side B).
  function showSource(fn) {
    const v = profile.view;
    if (!v) return;
    const u = (v.kind === 'diff' && v.sides ? v.sides.b : v.url)('source', profile.idx);
    openSource(fn, u.replace('/api/v1/query?', '/api/v1/source?').replace('&report=source', '') + '&function=' + encodeURIComponent(fn));
  }
  $('sandwich-source').addEventListener('click', () => showSource($('sandwich-fn').textContent));
  // right-click a frame (or "s" on a focused table row) opens its sandwich
  $('flamegraph').addEventListener('contextmenu', (e) => {
    const r = fc.hit(e);
    const n = r && r.node;
    if (!n || n === flame.root) return;
    e.preventDefault();
    openSandwich(n.name);
  });

  route();
})();
