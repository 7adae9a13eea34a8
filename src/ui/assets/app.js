/*
 * profd web UI — plain JavaScript, no build step, no dependencies.
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
 *   hide=EXACT_SELECTOR (repeated: legend entries switched off; left out of
 *                merges and diffs by the API's exclude=)
 *
 * API (Prometheus envelope {"status":"success","data":…}):
 *   /api/v1/query_range?query=&from=&to=     → [{labels, sample_types, timestamps, totals}]
 *   /api/v1/query?query=&time=&report=top|flamegraph|proto[&sample_index=]
 *   /api/v1/query?mode=merge&query=&from=&to=&report=…
 *   /api/v1/query?mode=diff&query_a=&query_b=&mode_a=merge&mode_b=merge
 *                 &from_a=&to_a=&from_b=&to_b=&report=…
 *   /api/v1/labels, /api/v1/label/NAME/values, /api/v1/targets
 */
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const RANGES = { '5m': 300, '15m': 900, '1h': 3600, '6h': 21600, '24h': 86400, '7d': 604800 };
  // 24 distinct colours (no repeat within 24 series): Tableau 10, then
  // darker and lighter variants of hues it lacks, each readable on white.
  const COLORS = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#dc2626', '#0891b2', '#ca8a04',
    '#db2777', '#4b5563', '#65a30d', '#7c3aed', '#0d9488', '#1e3a8a', '#9a3412', '#14532d', '#581c87',
    '#991b1b', '#155e75', '#854d0e', '#9d174d', '#111827', '#3f6212', '#4338ca', '#be185d'];

  const state = {
    query: '', range: '1h', type: '', refresh: 0, series: '', t: 0,
    fromText: '', toText: '', // from=/to= of the URL ('' = the relative range)
    focus: '', ignore: '',    // pprof's -focus/-ignore regexps on the profile shown (the API's filters)
    flameUp: false,           // flame (root at the bottom) instead of icicle
    cb: false,                // colour-blind-safe diff palette (blue grew / orange shrank)
    zoomPath: '',             // the zoomed frame: names from the root, joined by "\n"
    search: '',               // the flame graph search
    sel: null,          // {from, to} ms: the merged range
    cmp: false,         // compare mode
    a: null, b: null,   // {from, to} ms: compare's base (A) and new (B) selections
  };
  let lastRange = null;      // {from, to, series: [...]} of the last query_range
  let hidden = new Set();    // legend keys switched off
  let refreshTimer = null;
  let targetsTimer = null;
  let runSeq = 0, profileSeq = 0;

  /* ------------------------------------------------------------ helpers */

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  // GET an API path; resolves to `data` or throws an Error with the API's message.
  async function api(path) {
    let resp;
    try {
      resp = await fetch(path, { headers: { Accept: 'application/json' } });
    } catch (e) {
      throw new Error('profd is not reachable: ' + e.message);
    }
    const text = await resp.text();
    let body = null;
    try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
    if (!resp.ok || !body || body.status !== 'success') {
      const msg = body && body.error ? body.error : (text.slice(0, 300) || resp.statusText);
      const kind = body && body.errorType ? body.errorType + ': ' : '';
      throw new Error(kind + msg + ' (HTTP ' + resp.status + ')');
    }
    return body.data;
  }

  // A selector string value, Go/PromQL-escaped.
  function quote(v) {
    return '"' + String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
  }

  // A label name as a selector writes it: classic names bare, any other
  // UTF-8 name quoted (Prometheus 3: {"otel.scope.name"="x"}).
  function labelName(n) {
    return /^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n) ? n : quote(n);
  }

  // The selector that matches exactly this label set.
  function exactSelector(labels) {
    const names = Object.keys(labels).sort((a, b) => (a === '__name__' ? -1 : b === '__name__' ? 1 : a < b ? -1 : a > b ? 1 : 0));
    return '{' + names.map((n) => labelName(n) + '=' + quote(labels[n])).join(', ') + '}';
  }

  // Display form: name{a="b", …} without __name__ inside the braces.
  function seriesName(labels) {
    const names = Object.keys(labels).filter((n) => n !== '__name__').sort();
    return (labels.__name__ || '') + '{' + names.map((n) => labelName(n) + '=' + quote(labels[n])).join(', ') + '}';
  }

  /* ------------------------------------------------------------ units */

  const TIME_UNITS = { nanoseconds: 1, microseconds: 1e3, milliseconds: 1e6, seconds: 1e9 };

  function trimNum(x, digits) {
    const s = x.toFixed(digits);
    return s.indexOf('.') >= 0 ? s.replace(/\.?0+$/, '') : s;
  }

  function fmtBytes(v) {
    const a = Math.abs(v);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0, x = a;
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return (v < 0 ? '-' : '') + (i === 0 ? String(Math.round(x)) : trimNum(x, x < 10 ? 2 : x < 100 ? 1 : 0)) + ' ' + units[i];
  }

  function fmtNanos(ns) {
    const a = Math.abs(ns), sign = ns < 0 ? '-' : '';
    if (a === 0) return '0';
    if (a < 1e3) return sign + trimNum(a, 0) + 'ns';
    if (a < 1e6) return sign + trimNum(a / 1e3, a < 1e4 ? 2 : 1) + 'µs';
    if (a < 1e9) return sign + trimNum(a / 1e6, a < 1e7 ? 2 : 1) + 'ms';
    if (a < 60e9) return sign + trimNum(a / 1e9, a < 1e10 ? 2 : 1) + 's';
    if (a < 3600e9) return sign + trimNum(a / 60e9, a < 600e9 ? 2 : 1) + 'min';
    if (a < 86400e9) return sign + trimNum(a / 3600e9, 2) + 'h';
    return sign + trimNum(a / 86400e9, 2) + 'd';
  }

  function fmtCount(v) {
    const a = Math.abs(v);
    if (a < 1e4) return String(Math.round(v * 100) / 100);
    if (a < 1e6) return trimNum(v / 1e3, 1) + 'k';
    if (a < 1e9) return trimNum(v / 1e6, 2) + 'M';
    return trimNum(v / 1e9, 2) + 'G';
  }

  function fmtValue(v, unit) {
    if (v === null || v === undefined || isNaN(v)) return '–';
    if (unit === 'bytes') return fmtBytes(v);
    if (TIME_UNITS[unit]) return fmtNanos(v * TIME_UNITS[unit]);
    return fmtCount(v);
  }

  function fmtPct(v, total) {
    if (!total) return '0%';
    const p = (100 * v) / total;
    return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
  }

  function fmtTime(ms) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
      p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }

  function fmtAgo(ms) {
    if (!ms) return 'never';
    const s = Math.round((Date.now() - ms) / 1000);
    if (s < 2) return 'just now';
    if (s < 90) return s + 's ago';
    if (s < 5400) return Math.round(s / 60) + 'm ago';
    return Math.round(s / 3600) + 'h ago';
  }

  // The scale of a value axis: values are shown as v/base + suffix, one
  // suffix for the whole axis so that the ticks read alike.
  function axisScale(max, unit) {
    let steps;
    if (unit === 'bytes') steps = [[1, ' B'], [1024, ' KiB'], [1024 ** 2, ' MiB'], [1024 ** 3, ' GiB'], [1024 ** 4, ' TiB']];
    else if (TIME_UNITS[unit]) {
      const ns = TIME_UNITS[unit];
      steps = [[1, 'ns'], [1e3, 'µs'], [1e6, 'ms'], [1e9, 's'], [60e9, 'min'], [3600e9, 'h'], [86400e9, 'd']].map(([b, s]) => [b / ns, s]);
    } else steps = [[1, ''], [1e3, 'k'], [1e6, 'M'], [1e9, 'G']];
    let pick = steps[0];
    for (const st of steps) if (max >= st[0]) pick = st;
    return { base: pick[0], suffix: pick[1] };
  }

  // Nice axis ticks for [0, max]: {ticks, fmt}.
  function valueTicks(max, unit) {
    const sc = axisScale(max, unit);
    const m = max / sc.base || 1;
    const raw = m / 4;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = [1, 2, 2.5, 5, 10].map((k) => k * mag).find((k) => k >= raw * 0.999999);
    if (unit !== 'bytes' && !TIME_UNITS[unit] && sc.base === 1) step = Math.max(1, Math.round(step)); // whole counts
    const ticks = [];
    for (let i = 0; i <= 12; i++) {
      ticks.push(i * step * sc.base);
      if (i * step >= m * 0.999999) break;
    }
    const fmt = (v) => (v === 0 ? '0' : trimNum(v / sc.base, 3) + sc.suffix);
    return { ticks, fmt };
  }

  function timeTicks(from, to) {
    const span = to - from;
    const steps = [1e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3,
      7200e3, 10800e3, 21600e3, 43200e3, 86400e3];
    const step = steps.find((s) => span / s <= 8) || 86400e3;
    const tzOff = new Date(from).getTimezoneOffset() * 60e3;
    const ticks = [];
    let t = Math.ceil((from - tzOff) / step) * step + tzOff;
    for (; t <= to; t += step) ticks.push(t);
    return { ticks, step };
  }

  function fmtTick(ms, step) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    const hm = p(d.getHours()) + ':' + p(d.getMinutes());
    if (step < 60e3) return hm + ':' + p(d.getSeconds());
    if (step >= 86400e3 || (d.getHours() === 0 && d.getMinutes() === 0 && step >= 3600e3)) return (d.getMonth() + 1) + '/' + d.getDate() + (step < 86400e3 ? ' ' + hm : '');
    return hm;
  }

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
    hidden = new Set(q.getAll('hide'));
    state.sel = state.cmp ? null : parseSpan(q.get('sel'));
    state.focus = q.get('focus') || '';
    state.flameUp = q.get('flame') === 'up';
    state.cb = q.get('palette') === 'cb';
    state.zoomPath = q.get('zoom') || '';
    state.search = q.get('search') || '';
    state.ignore = q.get('ignore') || '';
    state.a = state.cmp ? parseSpan(q.get('a')) : null;
    state.b = state.cmp ? parseSpan(q.get('b')) : null;
    tl.next = state.a && !state.b ? 'b' : state.a ? 'b' : 'a';
  }

  // A time of the URL → ms: RFC 3339, Unix seconds (decimals allowed) or ms
  // (13+ digits), "now", "now-90s"/"now-15m"/"now-1h"/"now-2d"/"now-1w". null if none.
  function parseTime(v, now) {
    v = String(v || '').trim();
    let m = /^now(?:-(\d+(?:\.\d+)?)(ms|s|m|h|d|w))?$/.exec(v);
    if (m) return m[1] ? now - +m[1] * { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3 }[m[2]] : now;
    if (/^\d{13,}$/.test(v)) return +v;
    if (/^\d+(\.\d+)?$/.test(v)) return Math.round(+v * 1000);
    if (/^\d{4}-\d\d-\d\dT/.test(v)) { const t = Date.parse(v); return isNaN(t) ? null : t; }
    return null;
  }
  const isRelative = (v) => /^now/.test(String(v || '').trim());
  const pinned = () => !!state.fromText && !(isRelative(state.fromText) && isRelative(state.toText));
  const iso = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');

  // The window a query covers now: from=/to= when given, else the last `range`.
  function window_() {
    const now = Date.now();
    if (state.fromText) {
      const f = parseTime(state.fromText, now), t = parseTime(state.toText, now);
      if (f !== null && t !== null && t > f) return { from: f, to: t };
    }
    return { from: now - RANGES[state.range] * 1000, to: now };
  }

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
    const chosen = (state.series && state.t) || state.sel || (state.cmp && (state.a || state.b));
    if (chosen && !pinned() && lastRange) { state.fromText = iso(lastRange.from); state.toText = iso(lastRange.to); showRange(); }
    if (state.fromText) { q.set('from', state.fromText); q.set('to', state.toText); }
    for (const k of hidden) q.append('hide', k);
    if (state.focus) q.set('focus', state.focus);
    if (state.flameUp) q.set('flame', 'up');
    if (state.cb) q.set('palette', 'cb');
    if (state.zoomPath) q.set('zoom', state.zoomPath);
    if (state.search) q.set('search', state.search);
    if (state.ignore) q.set('ignore', state.ignore);
    if (state.type) q.set('type', state.type);
    if (state.refresh) q.set('refresh', String(state.refresh));
    addCounterParams(q);
    if (state.series && state.t && !state.sel && !state.cmp) { q.set('series', state.series); q.set('t', String(state.t)); }
    if (state.sel && !state.cmp) q.set('sel', spanText(state.sel));
    if (state.cmp) {
      q.set('cmp', '1');
      if (state.a) q.set('a', spanText(state.a));
      if (state.b) q.set('b', spanText(state.b));
    }
    const path = location.pathname === '/targets' ? '/' : location.pathname;
    const url = path + (q.toString() ? '?' + q.toString() : '');
    if (url !== location.pathname + location.search) history[push ? 'pushState' : 'replaceState'](null, '', url);
  }

  /* ------------------------------------------------------------ routing */

  function route() {
    const targets = location.pathname === '/targets', status = location.pathname === '/status';
    $('view-profiles').hidden = targets || status;
    $('view-targets').hidden = !targets;
    $('view-status').hidden = !status;
    $('nav-profiles').classList.toggle('active', !targets && !status);
    $('nav-targets').classList.toggle('active', targets);
    $('nav-status').classList.toggle('active', status);
    clearInterval(targetsTimer);
    targetsTimer = null;
    if (status) {
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
      if (state.query) run(false);
      else { $('timeline-panel').hidden = true; $('intro').hidden = false; }
      showSelection();
      showFilters();
      $('flame-up').setAttribute('aria-pressed', String(state.flameUp));
      $('flame-up').textContent = state.flameUp ? 'Icicle' : 'Flame';
      $('diff-palette').checked = state.cb;
      document.body.classList.toggle('cb', state.cb);
      loadView();
    }
  }

  document.addEventListener('click', (e) => {
    const a = e.target.closest('a[data-nav]');
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    const to = a.getAttribute('data-nav');
    if (to === '/targets' || to === '/status') history.pushState(null, '', to);
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
  $('type-chips').addEventListener('click', (e) => {
    const a = e.target.closest('a[data-q]');
    if (!a) return;
    e.preventDefault();
    $('selector').value = a.getAttribute('data-q');
    submit();
  });

  /* ------------------------------------------------------------ query */

  function submit() {
    state.query = $('selector').value.trim();
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
    hidden = new Set();
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
  }
  function tzName() {
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
    try {
        const data = await api('/api/v1/query_range?query=' + encodeURIComponent(state.query) +
                               '&from=' + (from / 1000).toFixed(3) +
                               '&to=' + (to / 1000).toFixed(3) + rangeCounterParams());
        if (seq !== runSeq)
            return;
        showError('');
        lastRange = {from, to, series : Array.isArray(data) ? data : []};
        $('intro').hidden = true;
        $('timeline-panel').hidden = false;
        fillSampleTypes();
        showCounters();
        drawTimeline();
        showSelection();
        if (explorer.on)
            loadExplorer();
        const v = viewSpec();
        if (v && !$('profile-panel').hidden)
            $('profile-title').textContent = v.title;
    } catch (e) {
      if (seq !== runSeq) return;
      showError(e.message);
      if (userAction) { $('timeline-panel').hidden = true; }
    } finally {
      if (seq === runSeq) btn.disabled = false;
    }
  }

  // Sample types of every returned series, in order of first appearance.
  function fillSampleTypes() {
    const sel = $('sample-type');
    const seen = new Map();
    for (const s of lastRange.series) for (const st of s.sample_types || []) if (!seen.has(st.type)) seen.set(st.type, st.unit);
    const types = [...seen.keys()];
    // The default: Go puts the default sample type last (inuse_space, cpu, delay).
    let chosen = state.type && seen.has(state.type) ? state.type : '';
    if (!chosen && lastRange.series.length) {
      const st = lastRange.series[0].sample_types || [];
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

  function drawTimeline() {
    const box = $('timeline');
    const legend = $('legend');
    const series = lastRange ? lastRange.series : [];
    const type = state.type;
    const W = Math.max(320, box.clientWidth || 800), H = box.clientHeight || 260;
    const M = { l: 70, r: 16, t: 10, b: 26 };
    const from = lastRange.from, to = lastRange.to;
    let unit = '';
    let max = 0, npts = 0;
    const drawn = [];
    series.forEach((s, i) => {
      const key = exactSelector(s.labels);
      const idx = (s.sample_types || []).findIndex((st) => st.type === type);
      const color = COLORS[i % COLORS.length];
      const entry = { s, i, key, idx, color, off: hidden.has(key) };
      drawn.push(entry);
      if (idx < 0 || entry.off) return;
      unit = unit || s.sample_types[idx].unit;
      s.timestamps.forEach((ts, j) => { const v = s.totals[j][idx]; if (v > max) max = v; npts++; });
    });
    tl.unit = unit;
    const vt = valueTicks(max || 1, unit);
    const ticks = vt.ticks;
    const ymax = ticks[ticks.length - 1] || 1;
    const x = (t) => M.l + ((t - from) / (to - from)) * (W - M.l - M.r);
    const y = (v) => H - M.b - (v / ymax) * (H - M.t - M.b);
    tl.x = x; tl.y = y;
    tl.inv = (px) => from + ((px - M.l) / (W - M.l - M.r)) * (to - from);
    tl.plot = { l: M.l, r: W - M.r, t: M.t, b: H - M.b };

    let svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ' + W + ' ' + H + '" preserveAspectRatio="none">';
    svg += '<g class="grid">';
    for (const v of ticks) svg += '<line x1="' + M.l + '" x2="' + (W - M.r) + '" y1="' + y(v) + '" y2="' + y(v) + '"/>';
    svg += '</g><g class="axis">';
    for (const v of ticks) svg += '<text x="' + (M.l - 6) + '" y="' + (y(v) + 4) + '" text-anchor="end">' + esc(vt.fmt(v)) + '</text>';
    const tt = timeTicks(from, to);
    for (const t of tt.ticks) svg += '<text x="' + x(t) + '" y="' + (H - 8) + '" text-anchor="middle">' + esc(fmtTick(t, tt.step)) + '</text>';
    svg += '</g><g class="sels">' + selectionRects() + '</g><rect class="brush" x="-99" y="' + M.t + '" width="0" height="' + (H - M.t - M.b) + '"/>';

    tl.pts = [];
    const showDots = npts <= 3000;
    for (const d of drawn) {
      if (d.idx < 0 || d.off) continue;
      const s = d.s;
      let path = '';
      let dots = '';
      s.timestamps.forEach((ts, j) => {
        const v = s.totals[j][d.idx];
        const px = x(ts), py = y(v);
        path += (j ? 'L' : 'M') + px.toFixed(1) + ' ' + py.toFixed(1);
        tl.pts.push({ px, py, ts, v, d });
        if (showDots) dots += '<circle class="pt" r="3.2" cx="' + px.toFixed(1) + '" cy="' + py.toFixed(1) + '" fill="' + d.color + '" data-ts="' + ts + '" data-series="' + d.i + '"/>';
      });
      svg += '<g class="series"><path d="' + path + '" stroke="' + d.color + '"/>' + dots + '</g>';
    }
    if (!npts) {
      const why = !series.length ? 'No series match this selector in the selected range.' :
        'No series has the sample type "' + type + '".';
      svg += '<text class="empty" x="' + (W / 2) + '" y="' + (H / 2) + '" text-anchor="middle">' + esc(why) + '</text>';
    }
    svg += '<circle class="selected" r="7" cx="-99" cy="-99"/><circle class="hover" r="6" cx="-99" cy="-99"/></svg>';
    box.innerHTML = svg;
    tl.svg = box.firstChild;
    tl.hoverEl = box.querySelector('circle.hover');
    tl.selEl = box.querySelector('circle.selected');
    tl.brushEl = box.querySelector('rect.brush');
    markSelected();

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

  $('legend').addEventListener('click', (e) => {
    const li = e.target.closest('li[data-key]');
    if (!li) return;
    const k = li.getAttribute('data-key');
    if (hidden.has(k)) hidden.delete(k); else hidden.add(k);
    li.setAttribute('aria-pressed', hidden.has(k) ? 'false' : 'true');
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
    const g = tl.svg && tl.svg.querySelector('g.sels');
    if (g) g.innerHTML = selectionRects();
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
  function countIn(r) {
    let n = 0;
    for (const s of (lastRange ? lastRange.series : [])) {
      if (hidden.has(exactSelector(s.labels))) continue; // hidden series are not merged
      for (const ts of s.timestamps) if (ts >= r.from && ts <= r.to) n++;
    }
    return n;
  }

  // The range a drag from pixel x0 to x1 selects: from the first to the last
  // profile inside it (so the range names real profiles), or null.
  function dragRange(x0, x1) {
    const t0 = tl.inv(Math.min(x0, x1)), t1 = tl.inv(Math.max(x0, x1));
    let lo = Infinity, hi = -Infinity;
    for (const s of lastRange.series) for (const ts of s.timestamps) if (ts >= t0 && ts <= t1) { lo = Math.min(lo, ts); hi = Math.max(hi, ts); }
    return lo <= hi ? { from: lo, to: hi } : null;
  }

  $('timeline').addEventListener('mousedown', (e) => {
    if (e.button !== 0 || !tl.svg || !tl.pts.length) return;
    e.preventDefault();
    const x = svgX(e);
    // Alt+drag zooms the window to the dragged time (a zoom brush apart
    // from the merge brush); a plain drag merges
    tl.drag = { x0: x, x1: x, moved: false, zoom: e.altKey };
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
    const r = dragRange(d.x0, d.x1);
    const who = state.cmp ? (tl.next === 'a' ? 'A (base): ' : 'B: ') : '';
    showTip(e, who + (r ? esc(fmtTime(r.from)) + ' – ' + esc(fmtTime(r.to)) + '<br><b>' + countIn(r) + ' profiles</b>' : 'no profiles here'));
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
    const r = dragRange(d.x0, d.x1);
    if (r) select(r);
  });

  $('timeline').addEventListener('mousemove', (e) => {
    if (tl.drag && tl.drag.moved) return;
    const p = nearest(e);
    if (!p) { hideTip(); if (tl.hoverEl) tl.hoverEl.setAttribute('cx', -99); return; }
    tl.hoverEl.setAttribute('cx', p.px);
    tl.hoverEl.setAttribute('cy', p.py);
    const unit = p.d.s.sample_types[p.d.idx].unit;
    const act = tl.anchor !== null ? 'shift-click: end of the range' : state.cmp ? 'click: ' + (tl.next === 'a' ? 'A (base)' : 'B') + ' = this profile' : 'click to open · drag to merge a range';
    showTip(e, '<div class="tl">' + esc(seriesName(p.d.s.labels)) + '</div>' +
      '<b>' + esc(fmtValue(p.v, unit)) + '</b> ' + esc(state.type) + '<br>' + esc(fmtTime(p.ts)) +
      ' <span class="tl">(' + esc(fmtAgo(p.ts)) + ')</span><br><i>' + esc(act) + '</i>');
  });
  $('timeline').addEventListener('mouseleave', () => { if (!tl.drag) hideTip(); if (tl.hoverEl) tl.hoverEl.setAttribute('cx', -99); });
  $('timeline').addEventListener('click', (e) => {
    if (tl.justDragged) return;
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
    if (state.cmp) { select({ from: p.ts, to: p.ts }); return; }
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
    $('timeline-live').textContent = seriesName(p.d.s.labels) + ': ' + fmtValue(p.v, unit) + ' ' + state.type + ' at ' + fmtTime(p.ts) +
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
    if (state.cmp) {
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
    const span = (r) => {
      const same = r.from === r.to;
      return '<span class="when">' + esc(fmtTime(r.from)) + (same ? '' : ' – ' + esc(fmtTime(r.to))) + '</span> <span class="muted">· ' +
        countIn(r) + ' profile' + (countIn(r) === 1 ? '' : 's') + '</span>';
    };
    let html = '';
    if (state.cmp) {
      const chip = (k, label) => {
        const r = state[k];
        return '<span class="chip sel-' + k + (tl.next === k ? ' next' : '') + '" data-pick="' + k + '" title="click, then drag on the timeline to choose ' + label + ' again">' +
          '<b>' + label + '</b> ' + (r ? span(r) : '<span class="muted">' + (tl.next === k ? 'drag on the timeline (or click a point)' : 'not chosen') + '</span>') + '</span>';
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
    $('timeline-hint').textContent = state.cmp ?
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
      state.sel = state.b || state.a;
      state.a = state.b = null;
      tl.next = 'a';
    }
    state.series = '';
    state.t = 0;
    writeURL(true);
    redrawSelections();
    showSelection();
    loadView();
  });
  window.addEventListener('resize', () => { if (lastRange && !$('timeline-panel').hidden) drawTimeline(); if (flame.root) drawFlame(); });

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
    const s = lastRange && lastRange.series.find((x) => exactSelector(x.labels) === series);
    if (!s) return state.type;
    return (s.sample_types || []).some((st) => st.type === state.type) ? state.type : '';
  }

  const secs = (ms) => (ms / 1000).toFixed(3);

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
    const excl = [...hidden].map((k) => '&exclude=' + encodeURIComponent(k)).join('');
    const mergeURL = (r) => '/api/v1/query?mode=merge&query=' + encodeURIComponent(q) +
                            '&from=' + secs(r.from) + '&to=' + secs(r.to) + excl +
                            mergeCounterParams();
    const range = (r) => fmtTime(r.from) + (r.from === r.to ? '' : ' – ' + fmtTime(r.to));
    if (state.cmp && state.a && state.b) {
      const a = state.a, b = state.b;
      const base = '/api/v1/query?mode=diff&query_a=' + encodeURIComponent(q) +
                   '&query_b=' + encodeURIComponent(q) +
                   '&mode_a=merge&mode_b=merge&from_a=' + secs(a.from) + '&to_a=' + secs(a.to) +
                   '&from_b=' + secs(b.from) + '&to_b=' + secs(b.to) + excl + mergeCounterParams();
      return {
        kind: 'diff', heading: 'Comparison',
        title: q + ' · B ' + range(b) + ' (' + countIn(b) + ') vs A ' + range(a) + ' (' + countIn(a) + ', base)',
        url: (report, idx) => withIdx(base, report, idx),
        proto: withIdx(base, 'proto'),
        file: file + '-diff-' + b.from + '.pb.gz',
        cmd: "go tool pprof -http=: -diff_base='" + location.origin + withIdx(mergeURL(a), 'proto') + "' '" + location.origin + withIdx(mergeURL(b), 'proto') + "'",
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
        kind: 'single', heading: 'Profile', title: series + ' @ ' + fmtTime(t), fixedIdx: si,
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
    $('profile-heading').textContent = v.heading;
    $('profile-title').textContent = v.title;
    const dl = $('download');
    dl.href = v.proto;
    dl.textContent = v.dlText;
    dl.setAttribute('download', v.file);
    $('pprof-cmd').textContent = v.cmd;
    $('profile-summary').textContent = 'loading…';
    panel.classList.add('loading');
    try {
      const si = v.kind === 'single' ? v.fixedIdx : state.type;
      // one request, one merge on the server, for the table and the flame graph
      const both = async (idx) => { const d = await api(v.url('view', idx) + topQuery() + '&fg_nodes=4000'); return [d.top, d.flamegraph]; };
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
      const st = top.sample_type || {};
      const diff = v.kind === 'diff';
      profile.top = top;
      profile.unit = st.unit || '';
      profile.diff = diff;
      const n = (top.rows_total !== undefined ? top.rows_total : (top.rows || []).length);
      if (diff) {
        const d = top.total || 0;
        $('profile-summary').innerHTML = esc(st.type || '') + ' · A (base) ' + esc(fmtValue(top.base_total, st.unit)) +
          ' → B ' + esc(fmtValue(top.new_total, st.unit)) + ' · <span class="' + (d > 0 ? 'pos' : d < 0 ? 'neg' : '') + '">Δ ' +
          esc(signed(d, st.unit)) + (top.base_total ? ' (' + relChange(top.base_total, top.new_total) + ')' : '') + '</span> · ' + n + ' functions';
      } else {
        $('profile-summary').textContent = (st.type || '') + ' · total ' + fmtValue(top.total, st.unit) + ' · ' + n + ' functions';
      }
      $('top-table').setAttribute('data-total', String(top.total));
      drawTop();
      flame.root = prepareFlame(fg, diff);
      flame.zoom = flame.root;
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
      $('sandwich').hidden = true;
      drawFlame();
      if ($('view-callgraph').getAttribute('aria-pressed') === 'true') showCallgraph(true);
    } catch (e) {
      if (seq !== profileSeq) return;
      $('profile-summary').textContent = '';
      showError('Loading the ' + (v.kind === 'single' ? 'profile' : v.kind) + ' failed: ' + e.message);
    } finally {
      if (seq === profileSeq) panel.classList.remove('loading');
    }
  }

  function signed(v, unit) { return (v > 0 ? '+' : '') + fmtValue(v, unit); }
  // The change from a to b as a percentage of a ("new" when a is 0).
  function relChange(a, b) {
    if (!a) return b ? 'new' : '0%';
    const p = (100 * (b - a)) / Math.abs(a);
    return (p > 0 ? '+' : '') + (Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)) + '%';
  }

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
    const rowHTML = profile.diff ? (r) =>
      '<tr data-fn="' + esc(r.function) + '">' +
      '<td class="num">' + esc(fmtValue(r.base_flat, u)) + '</td>' +
      '<td class="num">' + esc(fmtValue(r.new_flat, u)) + '</td>' +
      '<td class="num delta ' + sgn(r.flat) + '">' + esc(signed(r.flat, u)) + '</td>' +
      '<td class="num delta ' + sgn(r.flat) + '">' + esc(relChange(r.base_flat, r.new_flat)) + '</td>' +
      '<td class="num delta ' + sgn(r.cum) + '">' + esc(signed(r.cum, u)) + '</td>' +
      '<td class="fn" title="' + esc(r.file || '') + '">' + esc(r.function) + '</td></tr>'
      : (r) =>
      '<tr data-fn="' + esc(r.function) + '">' +
      '<td class="num">' + esc(fmtValue(r.flat, u)) + '</td>' +
      '<td class="num">' + fmtPct(r.flat, total) + '</td>' +
      '<td class="num">' + esc(fmtValue(r.cum, u)) + '</td>' +
      '<td class="num">' + fmtPct(r.cum, total) + '<span class="bar" style="width:' + Math.round(40 * Math.abs(r.cum) / (Math.abs(total) || 1)) + 'px"></span></td>' +
      '<td class="fn" title="' + esc(r.file || '') + '">' + esc(r.function) + ' <button type="button" class="link sw-open" title="callers and callees of this function">sandwich</button></td></tr>';
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
    filterTimer = setTimeout(() => { profile.filter = $('top-filter').value.trim(); refetchTop(); }, 200);
  });
  $('top-more').addEventListener('click', (e) => {
    if (e.target.id !== 'top-all') return;
    e.preventDefault();
    profile.limit = Infinity;
    refetchTop();
  });
  // A click on a row highlights that function in the flame graph.
  $('top-table').tBodies[0].addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-fn]');
    if (!tr) return;
    if (e.target.closest('.sw-open')) { openSandwich(tr.getAttribute('data-fn')); return; }
    const fn = tr.getAttribute('data-fn');
    $('flame-search').value = '^' + fn.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
    highlightFlame();
    $('flamegraph').scrollIntoView({ behavior: 'smooth', block: 'nearest' });
  });

  /* ------------------------------------------------------------ flame graph */

  // Icicle layout: the root on top, callees below; width ∝ value.
  const ROW = 18;
  // A diff's frames are as wide as A and B together (so a frame that
  // vanished in B still shows, and children fit in their parent), colored by
  // the change: red grew, green shrank, grey unchanged.
  const flame = { root: null, zoom: null, unit: '', nodes: [], diff: false };

  function prepareFlame(tree, diff) {
    const walk = (n, parent, depth) => {
      const node = { name: n.name, value: n.value || 0, self: n.self || 0, parent, depth, children: [] };
      if (diff) {
        node.base = n.base || 0; node.new = n.new || 0;
        node.base_self = n.base_self || 0; node.new_self = n.new_self || 0;
        node.size = node.base + node.new;
      } else node.size = node.value;
      for (const c of n.children || []) node.children.push(walk(c, node, depth + 1));
      return node;
    };
    return walk(tree || { name: 'root', value: 0 }, null, 0);
  }

  // Red for growth, green for shrinkage; the stronger, the larger the change
  // relative to the frame's larger side.
  function diffColor(n) {
    const d = n.new - n.base;
    if (d === 0 || n.name === 'root') return n.name === 'root' ? '#c7cbd1' : '#d9dbe0';
    const rel = Math.min(1, Math.abs(d) / Math.max(Math.abs(n.base), Math.abs(n.new), 1));
    const light = Math.round(88 - 36 * Math.sqrt(rel));
    if (state.cb) return d > 0 ? 'hsl(214,80%,' + light + '%)' : 'hsl(30,90%,' + light + '%)'; // Okabe-Ito-like blue/orange
    return d > 0 ? 'hsl(2,85%,' + light + '%)' : 'hsl(140,60%,' + light + '%)';
  }
  const diffClass = (n) => (n.name === 'root' ? '' : n.new > n.base ? 'grew' : n.new < n.base ? 'shrank' : 'same');

  // Color by package (the text before the last "." of the function name).
  function frameColor(name) {
    if (name === 'root') return '#c7cbd1';
    const m = name.match(/^(.*?)\.[^./]*(\(|$)/);
    const pkg = m ? m[1].replace(/\(.*$/, '') : name;
    let h = 2166136261;
    for (let i = 0; i < pkg.length; i++) { h ^= pkg.charCodeAt(i); h = Math.imul(h, 16777619); }
    h >>>= 0;
    if (/^runtime\b|^runtime\./.test(name)) return 'hsl(' + (200 + (h % 30)) + ',35%,' + (72 + (h >> 8) % 10) + '%)';
    return 'hsl(' + (10 + (h % 40)) + ',' + (75 + (h >> 8) % 20) + '%,' + (60 + (h >> 16) % 14) + '%)';
  }

  function drawFlame() {
    const box = $('flamegraph');
    const W = box.clientWidth || 1000;
    const zoom = flame.zoom, root = flame.root;
    const total = root.size || 0;
    const nodes = [];
    // Ancestors of the zoomed frame: full width, dimmed.
    const chain = [];
    for (let a = zoom.parent; a; a = a.parent) chain.unshift(a);
    let html = '';
    let maxDepth = zoom.depth;
    chain.forEach((a) => {
      nodes.push(a);
      html += frameHTML(a, nodes.length - 1, 0, 100, a.depth, 'ancestor', W);
    });
    const zv = zoom.size || 0;
    // Exact widths: a frame is as wide as its value, never wider (no
    // minimum: padding and border are inside the width, box-sizing). Children
    // under a pixel each are merged into one "…" frame of their total width
    // (at most as wide as they are together); their own children are not drawn.
    const place = (n, left, width) => {
      nodes.push(n);
      if (n.depth > maxDepth) maxDepth = n.depth;
      html += frameHTML(n, nodes.length - 1, left, width, n.depth, '', W);
      let x = left, thinW = 0, thinN = 0, thinX = null, thinV = 0;
      for (const c of n.children) {
        const cw = zv ? (width * c.size) / (n.size || 1) : 0;
        if (cw * W / 100 < 1) {
          if (thinX === null) thinX = x;
          thinW += cw; thinN++; thinV += c.size;
        } else {
          if (thinN) { html += moreHTML(thinX, thinW, n.depth + 1, thinN, thinV); thinX = null; thinW = thinN = thinV = 0; }
          place(c, x, cw);
        }
        x += cw;
      }
      if (thinN && thinW * W / 100 >= 0.5) html += moreHTML(thinX, thinW, n.depth + 1, thinN, thinV);
    };
    const moreHTML = (left, width, depth, count, value) => {
      if (depth > maxDepth) maxDepth = depth;
      return '<div class="frame more" data-more="' + count + '" data-value="' + value + '" title="' + count + ' frames under a pixel each" style="left:' +
        left.toFixed(4) + '%;width:' + width.toFixed(4) + '%;top:' + depth * ROW + 'px"></div>';
    };
    place(zoom, 0, 100);
    flame.nodes = nodes;
    if (state.flameUp) { // flame: the root at the bottom (rows mirrored)
      html = html.replace(/top:(\d+)px/g, (m, y) => 'top:' + (maxDepth * ROW - +y) + 'px');
    }
    box.innerHTML = html;
    box.style.height = (maxDepth + 1) * ROW + 2 + 'px';
    // breadcrumbs of the zoom, and the zoom in the URL
    const crumbs = [];
    for (let a = zoom; a; a = a.parent) crumbs.unshift(a);
    $('flame-crumbs').innerHTML = zoom === root ? '' : crumbs.map((c, i) => i === crumbs.length - 1 ?
      '<span aria-current="true">' + esc(c.name === 'root' ? 'all' : c.name) + '</span>' :
      '<a href="#" data-depth="' + i + '">' + esc(c.name === 'root' ? 'all' : c.name) + '</a>').join(' › ');
    const zp = zoom === root ? '' : crumbs.slice(1).map((c) => c.name).join('\n');
    if (zp !== state.zoomPath) { state.zoomPath = zp; writeURL(false); }
    $('flame-reset').hidden = zoom === root;
    if (!total) box.innerHTML = '<p class="muted" style="padding:8px">' + (flame.diff ? 'Neither selection has samples of this type.' : 'This profile has no samples of this type.') + '</p>', box.style.height = 'auto';
    highlightFlame();
  }

  function frameHTML(n, i, left, width, depth, cls, W) {
    const px = width * W / 100;
    const label = px > 28 ? esc(n.name === 'root' ? 'all' : n.name) : '';
    const dc = flame.diff ? ' ' + diffClass(n) : '';
    return '<div class="frame ' + cls + dc + (px < 8 ? ' thin' : '') + '" data-i="' + i + '" data-name="' + esc(n.name) + '"' + (flame.diff ? ' data-delta="' + (n.new - n.base) + '"' : '') +
      ' style="left:' + left.toFixed(4) + '%;width:' + width.toFixed(4) + '%;top:' + depth * ROW + 'px;background:' +
      (flame.diff ? diffColor(n) : frameColor(n.name)) + '">' + label + '</div>';
  }

  $('flamegraph').addEventListener('click', (e) => {
    const el = e.target.closest('.frame[data-i]');
    if (!el) return;
    const n = flame.nodes[+el.getAttribute('data-i')];
    if (!n) return;
    flame.zoom = n;
    drawFlame();
  });
  $('flamegraph').addEventListener('mousemove', (e) => {
    const more = e.target.closest('.frame.more');
    if (more) {
      showTip(e, '<b>' + more.getAttribute('data-more') + ' frames</b> under a pixel each<br>' +
        esc(fmtValue(+more.getAttribute('data-value'), flame.unit)) + ' together<br><i>zoom into the caller to see them</i>');
      return;
    }
    const el = e.target.closest('.frame[data-i]');
    if (!el) { hideTip(); return; }
    const n = flame.nodes[+el.getAttribute('data-i')];
    if (!n) return;
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
    showTip(e, '<b>' + esc(n.name === 'root' ? 'all samples' : n.name) + '</b><br>' +
      esc(fmtValue(n.value, flame.unit)) + ' (' + fmtPct(n.value, total) + ' of total' + parentPct + ')' +
      (n.self ? '<br>self ' + esc(fmtValue(n.self, flame.unit)) + ' (' + fmtPct(n.self, total) + ')' : '') +
      '<br><i>click to zoom · right-click: callers and callees</i>');
  });
  $('flamegraph').addEventListener('mouseleave', hideTip);
  $('flame-reset').addEventListener('click', () => { flame.zoom = flame.root; drawFlame(); });

  // Keyboard on the flame graph (it takes the focus): arrows move over the
  // frames drawn (Up/Down: caller/first callee as drawn, Left/Right: the
  // neighbours of the same caller), Enter zooms, "s" opens the sandwich view.
  function markKbd(n) {
    flame.cur = n;
    $('flamegraph').querySelectorAll('.frame.kbd').forEach((el) => el.classList.remove('kbd'));
    const i = flame.nodes.indexOf(n);
    const el = i >= 0 && $('flamegraph').querySelector('.frame[data-i="' + i + '"]');
    if (el) {
      el.classList.add('kbd');
      $('flamegraph').setAttribute('aria-activedescendant', '');
      $('flame-live').textContent = (n.name === 'root' ? 'all samples' : n.name) + ': ' + fmtValue(n.value, flame.unit) +
        ' (' + fmtPct(n.value, flame.root.value) + ' of total); Enter zooms, s shows callers and callees';
    }
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
    img.onerror = () => { cg.innerHTML = '<p class="error">The call graph could not be drawn (is Graphviz installed on the server?).</p>'; };
    img.src = url;
  }
  $('view-callgraph').addEventListener('click', () => showCallgraph($('view-callgraph').getAttribute('aria-pressed') !== 'true'));

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

  function highlightFlame() {
    const box = $('flamegraph');
    const q = $('flame-search').value.trim();
    let re = null, bad = '';
    if (q) { try { re = new RegExp(q); } catch (e) { bad = e.message; } }
    box.classList.toggle('searching', !!re);
    $('flame-search').setAttribute('aria-invalid', bad ? 'true' : 'false');
    $('flame-match').classList.toggle('bad', !!bad);
    if (bad) { $('flame-match').textContent = 'not a regular expression: ' + bad; return; }
    if (!re || !flame.root) { $('flame-match').textContent = ''; return; }
    box.querySelectorAll('.frame[data-i]').forEach((el) => el.classList.toggle('match', re.test(el.getAttribute('data-name'))));
    // Matched share: the value of the outermost matching frames.
    let sum = 0, sa = 0, sb = 0;
    const walk = (n) => { if (n !== flame.root && re.test(n.name)) { sum += n.value; sa += n.base || 0; sb += n.new || 0; return; } n.children.forEach(walk); };
    walk(flame.root);
    $('flame-match').textContent = flame.diff ? 'matched: A ' + fmtValue(sa, flame.unit) + ' → B ' + fmtValue(sb, flame.unit) + ' (Δ ' + signed(sb - sa, flame.unit) + ')' :
      'matched ' + fmtValue(sum, flame.unit) + ' (' + fmtPct(sum, flame.root.value) + ')';
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
  // right-click a frame (or "s" on a focused table row) opens its sandwich
  $('flamegraph').addEventListener('contextmenu', (e) => {
    const el = e.target.closest('.frame[data-i]');
    const n = el && flame.nodes[+el.getAttribute('data-i')];
    if (!n || n === flame.root) return;
    e.preventDefault();
    openSandwich(n.name);
  });

  /* ------------------------------------------------------------ label explorer */

  // For the current selector and window: every label name with its number of
  // values; a name picked → the values' small timelines (the top 8 by total of
  // the chosen sample type, from the query_range already loaded) and the
  // merged flame graph of each side by side; a value clicked → its matcher is
  // added to the selector.
  const explorer = { on: false, name: '', seq: 0 };
  const TOPK = 8;

  // The selector with one more matcher: name="value".
  function withMatcher(q, name, value) {
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

  async function loadExplorer() {
    if (!explorer.on || !lastRange) return;
    const seq = ++explorer.seq;
    const w = { from: lastRange.from, to: lastRange.to };
    const qp = '&match[]=' + encodeURIComponent(state.query) + '&start=' + secs(w.from) + '&end=' + secs(w.to);
    $('explorer-summary').textContent = 'loading…';
    try {
      const names = (await api('/api/v1/labels?' + qp.slice(1))).filter((n) => n !== '__name__');
      const counts = await Promise.all(names.map((n) => api('/api/v1/label/' + encodeURIComponent(n) + '/values?' + qp.slice(1)).then((v) => v.length)));
      if (seq !== explorer.seq) return;
      const order = names.map((n, i) => [n, counts[i]]).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
      $('explorer-summary').textContent = order.length + ' label' + (order.length === 1 ? '' : 's') + ' on ' + lastRange.series.length + ' series · pick one to break the selection down';
      $('explorer-names').innerHTML = order.map(([n, c]) => '<li><button type="button" class="chip' + (n === explorer.name ? ' on' : '') +
        '" data-name="' + esc(n) + '" aria-pressed="' + (n === explorer.name) + '">' + esc(n) + ' <span class="muted">' + c + '</span></button></li>').join('');
      if (explorer.name && order.some(([n]) => n === explorer.name)) showValues(explorer.name);
      else $('explorer-values').innerHTML = '';
    } catch (e) {
      if (seq === explorer.seq) $('explorer-summary').textContent = e.message;
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
    for (const s of lastRange.series) {
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
    const x = (t) => 2 + ((t - lastRange.from) / (lastRange.to - lastRange.from)) * (W - 4);
    const y = (v) => H - 2 - (v / max) * (H - 6);
    $('explorer-values').innerHTML = '<p class="muted">' + esc(name) + ': ' + byValue.size + ' value' + (byValue.size === 1 ? '' : 's') +
      (byValue.size > TOPK ? ', the ' + TOPK + ' largest by total ' + esc(type) : '') + '. Click one to add it to the selector.</p>' +
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
      const u = '/api/v1/query?mode=merge&query=' + encodeURIComponent(q) + '&from=' + secs(lastRange.from) + '&to=' + secs(lastRange.to) +
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
  function miniFlame(tree, unit, withRoot) {
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

  $('explorer-values').addEventListener('click', (e) => pickValue(e.target.closest('.explorer-card')));
  $('explorer-values').addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pickValue(e.target.closest('.explorer-card')); } });
  function pickValue(card) {
    if (!card || !explorer.name) return;
    $('selector').value = withMatcher(state.query, explorer.name, card.getAttribute('data-value'));
    explorer.name = '';
    submit();
  }

  /* ------------------------------------------------------------ suggestions */

  const cache = { names: null, values: new Map() };
  let sugg = { items: [], active: -1, ctx: null };

  // Suggestions are scoped like Grafana's: to the series the text typed so
  // far selects (its profile type and its complete matchers, not the one being
  // typed) and to the window on screen (rounded to the minute for the cache).
  function scopeParams(text, upto, except) {
    const name = (text.match(/^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)/) || [])[1] || '';
    const inner = text.indexOf('{') >= 0 ? text.slice(text.indexOf('{') + 1, upto) : '';
    const ms = [];
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g;
    let m;
    while ((m = re.exec(inner))) if (m[1] !== except) ms.push(m[1] + m[2] + '"' + m[3] + '"');
    const w = window_();
    const round = (t) => Math.floor(t / 60000) * 60;
    let q = 'start=' + round(w.from) + '&end=' + (round(w.to) + 60);
    if (name || ms.length) q += '&match[]=' + encodeURIComponent(name + '{' + ms.join(',') + '}');
    return q;
  }
  async function labelNames(scope) {
    const k = 'names?' + scope;
    if (!cache.values.has(k)) cache.values.set(k, api('/api/v1/labels?' + scope).catch(() => { cache.values.delete(k); return []; }));
    return cache.values.get(k);
  }
  async function labelValues(name, scope) {
    const k = name + '?' + scope;
    if (!cache.values.has(k)) cache.values.set(k, api('/api/v1/label/' + encodeURIComponent(name) + '/values?' + scope).catch(() => { cache.values.delete(k); return []; }));
    return cache.values.get(k);
  }

  // What the text before the caret is in the middle of:
  //   {kind:'metric', prefix, start}           outside braces: a profile type
  //   {kind:'name', prefix, start}             inside braces, a label name
  //   {kind:'value', name, prefix, start, q}   inside a quoted value of label `name`
  function context(text, caret) {
    const s = text.slice(0, caret);
    let inBraces = false, closed = false, quote = null, tokStart = 0, lastName = '', valStart = -1, lastQuoted = null;
    let i = 0;
    for (; i < s.length; i++) {
      const c = s[i];
      if (quote) {
        if (c === '\\') { i++; continue; }
        if (c === quote) { lastQuoted = s.slice(valStart, i).replace(/\\(.)/g, '$1'); quote = null; tokStart = i + 1; }
        continue;
      }
      if (c === '{') { inBraces = true; tokStart = i + 1; }
      else if (c === '}') { inBraces = false; closed = true; tokStart = i + 1; }
      else if (c === ',' ) tokStart = i + 1;
      else if (c === '"' || c === "'" || c === '`') {
        quote = c; valStart = i + 1;
        // a classic name before the operator, or a quoted one ({"k8s.pod"="…)
        const seg = s.slice(tokStart, i);
        const m = seg.match(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*$/);
        lastName = m ? m[1] : /^\s*(=~|!~|!=|=)\s*$/.test(seg) && lastQuoted !== null ? lastQuoted : '';
      }
    }
    if (quote) return inBraces && lastName ? { kind: 'value', name: lastName, prefix: s.slice(valStart), start: valStart, q: quote } : null;
    const tok = s.slice(tokStart);
    if (!inBraces) {
      if (closed) return null;
      const m = tok.match(/^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?$/);
      return m ? { kind: 'metric', prefix: m[1] || '', start: caret - (m[1] || '').length } : null;
    }
    const m = tok.match(/^\s*([a-zA-Z_][a-zA-Z0-9_]*)?$/);
    return m ? { kind: 'name', prefix: m[1] || '', start: caret - (m[1] || '').length } : null;
  }

  async function updateSuggest() {
    const input = $('selector');
    const ctx = context(input.value, input.selectionStart);
    if (!ctx) { closeSuggest(); return; }
    let list = [];
    const w = window_();
    const round = (t) => Math.floor(t / 60000) * 60;
    const timeOnly = 'start=' + round(w.from) + '&end=' + (round(w.to) + 60);
    if (ctx.kind === 'metric') list = (await labelValues('__name__', timeOnly)).map((v) => ({ text: v, kind: 'profile type' }));
    else if (ctx.kind === 'name') list = (await labelNames(scopeParams(input.value, ctx.start, ''))).filter((v) => v !== '__name__').map((v) => ({ text: v, kind: 'label' }));
    else list = (await labelValues(ctx.name, scopeParams(input.value, ctx.start, ctx.name))).map((v) => ({ text: v, kind: ctx.name }));
    // The input may have changed while we waited.
    const now = context(input.value, input.selectionStart);
    if (!now || now.kind !== ctx.kind || now.start !== ctx.start) return;
    const p = now.prefix.toLowerCase();
    list = list.filter((it) => it.text.toLowerCase().startsWith(p) && it.text !== now.prefix)
      .concat(list.filter((it) => !it.text.toLowerCase().startsWith(p) && it.text.toLowerCase().includes(p)));
    if (document.activeElement !== input || !list.length) { closeSuggest(); return; }
    sugg = { items: list.slice(0, 50), active: 0, ctx: now };
    const ul = $('suggest');
    ul.innerHTML = sugg.items.map((it, i) => '<li role="option" data-i="' + i + '" class="' + (i === 0 ? 'active' : '') + '">' +
      esc(it.text) + '<span class="kind">' + esc(it.kind) + '</span></li>').join('');
    ul.hidden = false;
    input.setAttribute('aria-expanded', 'true');
  }

  function closeSuggest() {
    $('suggest').hidden = true;
    $('selector').setAttribute('aria-expanded', 'false');
    sugg = { items: [], active: -1, ctx: null };
  }

  function acceptSuggest(i) {
    const it = sugg.items[i], ctx = sugg.ctx;
    if (!it || !ctx) return;
    const input = $('selector');
    const v = input.value, caret = input.selectionStart;
    let ins, after = v.slice(caret);
    if (ctx.kind === 'metric') ins = it.text;
    else if (ctx.kind === 'name') {
      ins = labelName(it.text) + '="';
      if (/^\s*(=~|!~|!=|=)/.test(after)) ins = labelName(it.text);
      // close what was opened: the quote, and the brace when none follows
      else if (!/^[^{]*\}/.test(after)) after = '"}' + after;
      else after = '"' + after;
    } else {
      const escd = it.text.replace(/\\/g, '\\\\').replace(new RegExp(ctx.q === '`' ? '(?!)' : ctx.q, 'g'), '\\' + ctx.q);
      ins = escd;
      // Swallow the rest of an existing value up to its closing quote.
      const close = after.indexOf(ctx.q);
      if (close >= 0 && !after.slice(0, close).includes(',')) after = after.slice(close);
      else ins += ctx.q;
    }
    input.value = v.slice(0, ctx.start) + ins + after;
    const pos = ctx.start + ins.length + (ctx.kind === 'value' && after.startsWith(ctx.q) ? 1 : 0);
    input.setSelectionRange(pos, pos);
    closeSuggest();
    input.focus();
    if (ctx.kind === 'name') updateSuggest();
  }

  $('selector').addEventListener('input', updateSuggest);
  $('selector').addEventListener('focus', updateSuggest);
  $('selector').addEventListener('click', updateSuggest);
  $('selector').addEventListener('blur', () => setTimeout(closeSuggest, 150));
  $('selector').addEventListener('keydown', (e) => {
    const open = !$('suggest').hidden && sugg.items.length;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      if (!open) { updateSuggest(); e.preventDefault(); return; }
      e.preventDefault();
      sugg.active = (sugg.active + (e.key === 'ArrowDown' ? 1 : -1) + sugg.items.length) % sugg.items.length;
      $('suggest').querySelectorAll('li').forEach((li, i) => li.classList.toggle('active', i === sugg.active));
      const a = $('suggest').querySelector('li.active');
      if (a) a.scrollIntoView({ block: 'nearest' });
    } else if ((e.key === 'Tab' || (e.key === 'Enter' && sugg.ctx && sugg.ctx.kind !== 'metric')) && open) {
      e.preventDefault();
      acceptSuggest(sugg.active);
    } else if (e.key === 'Escape') {
      closeSuggest();
    } else if (e.key === 'Enter') {
      closeSuggest();
    }
  });
  $('suggest').addEventListener('mousedown', (e) => {
    const li = e.target.closest('li[data-i]');
    if (!li) return;
    e.preventDefault();
    acceptSuggest(+li.getAttribute('data-i'));
  });

  /* ------------------------------------------------------------ targets */

  /* ------------------------------------------------------------ status */

  async function loadStatus() {
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

  async function loadTargets() {
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

  /* ------------------------------------------------ cumulative types, gauges (issue 12) */

  // Go's allocs/block/mutex as scraped count since the process started: the
  // API shows them as deltas by default (query_range's sample_types[].kind
  // says "cumulative"); the toggle asks for the raw counters (delta=false).
  // Merges of a gauge type (kind "gauge": inuse_*, goroutine) default to
  // agg=avg, the profile on average over the range; else sum. URL: delta=false, agg=.
  // (read lazily from the URL: writeURL may run before this part of the file)
  function counterState()
  {
      if (!counterState.v) {
          const q = new URLSearchParams(location.search);
          counterState.v = {
              raw : q.get('delta') === 'false',
              agg : [ 'sum', 'avg' ].includes(q.get('agg')) ? q.get('agg') : ''
          };
      }
      return counterState.v;
  }

  // The kind of sample type `type` in the loaded series ('' when unknown).
  function kindOf(type)
  {
      for (const s of (lastRange && lastRange.series) || []) {
          for (const st of s.sample_types || [])
              if (st.type === type && st.kind)
                  return st.kind;
      }
      return '';
  }
  function anyCumulative()
  {
      return ((lastRange && lastRange.series) || [])
          .some((s) => (s.sample_types || []).some((st) => st.kind === 'cumulative'));
  }
  function rangeCounterParams()
  {
      return counterState().raw ? '&delta=false' : '';
  }
  function mergeCounterParams()
  {
      const agg = counterState().agg || (kindOf(state.type) === 'gauge' ? 'avg' : '');
      return (counterState().raw ? '&delta=false' : '') + (agg ? '&agg=' + agg : '');
  }
  function addCounterParams(q)
  {
      if (counterState().raw)
          q.set('delta', 'false');
      if (counterState().agg)
          q.set('agg', counterState().agg);
  }
  function showCounters()
  {
      $('counters-field').hidden = !anyCumulative() && !counterState().raw;
      $('counters').value = counterState().raw ? 'raw' : 'delta';
      $('agg').value = counterState().agg;
      const gauge = kindOf(state.type) === 'gauge';
      $('agg').options[0].textContent = 'auto (' + (gauge ? 'avg' : 'sum') + ')';
  }
  $('counters').addEventListener('change', () => {
      counterState().raw = $('counters').value === 'raw';
      writeURL(false);
      run(false).then(() => loadView());
  });
  $('agg').addEventListener('change', () => {
      counterState().agg = $('agg').value;
      writeURL(false);
      loadView();
  });
  $('sample-type').addEventListener('change', showCounters);

  route();
})();
