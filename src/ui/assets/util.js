/*
 * profd web UI — helpers shared by the views: the API call, HTML escaping,
 * selectors, and units (values, axes, times in the zone shown: state.utc).
 */
import { state } from './state.js';

export const $ = (id) => document.getElementById(id);

/* ------------------------------------------------------------ helpers */

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

// GET an API path; resolves to `data` or throws an Error with the API's message.
export async function api(path) {
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
export function quote(v) {
  return '"' + String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
}

// A label name as a selector writes it: classic names bare, any other
// UTF-8 name quoted (Prometheus 3: {"otel.scope.name"="x"}).
export function labelName(n) {
  return /^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n) ? n : quote(n);
}

// The selector that matches exactly this label set.
export function exactSelector(labels) {
  const names = Object.keys(labels).sort((a, b) => (a === '__name__' ? -1 : b === '__name__' ? 1 : a < b ? -1 : a > b ? 1 : 0));
  return '{' + names.map((n) => labelName(n) + '=' + quote(labels[n])).join(', ') + '}';
}

// Internal labels (issue 31): names starting "__" (__name__, __delta__, …)
// are profd's and Prometheus' own; they are never offered or shown (a
// selector typed with them still works).
export const isInternal = (n) => String(n).startsWith('__');

// Display form: name{a="b", …} without the internal labels inside the braces.
export function seriesName(labels) {
  const names = Object.keys(labels).filter((n) => !isInternal(n)).sort();
  return (labels.__name__ || '') + '{' + names.map((n) => labelName(n) + '=' + quote(labels[n])).join(', ') + '}';
}

/* ------------------------------------------------------------ units */

export const TIME_UNITS = { nanoseconds: 1, microseconds: 1e3, milliseconds: 1e6, seconds: 1e9 };

export function trimNum(x, digits) {
  const s = x.toFixed(digits);
  return s.indexOf('.') >= 0 ? s.replace(/\.?0+$/, '') : s;
}

export function fmtBytes(v) {
  const a = Math.abs(v);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0, x = a;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (v < 0 ? '-' : '') + (i === 0 ? String(Math.round(x)) : trimNum(x, x < 10 ? 2 : x < 100 ? 1 : 0)) + ' ' + units[i];
}

export function fmtNanos(ns) {
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

export function fmtCount(v) {
  const a = Math.abs(v);
  if (a < 1e4) return String(Math.round(v * 100) / 100);
  if (a < 1e6) return trimNum(v / 1e3, 1) + 'k';
  if (a < 1e9) return trimNum(v / 1e6, 2) + 'M';
  return trimNum(v / 1e9, 2) + 'G';
}

export function fmtValue(v, unit) {
  if (v === null || v === undefined || isNaN(v)) return '–';
  if (unit === 'bytes') return fmtBytes(v);
  if (TIME_UNITS[unit]) return fmtNanos(v * TIME_UNITS[unit]);
  return fmtCount(v);
}

export function fmtPct(v, total) {
  if (!total) return '0%';
  const p = (100 * v) / total;
  return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
}

// The wall-clock parts of ms in the zone shown: UTC (tz=utc) or the browser's.
export function dateParts(ms) {
  const d = new Date(ms), u = state.utc;
  return {
    Y: u ? d.getUTCFullYear() : d.getFullYear(), M: (u ? d.getUTCMonth() : d.getMonth()) + 1,
    D: u ? d.getUTCDate() : d.getDate(), h: u ? d.getUTCHours() : d.getHours(),
    m: u ? d.getUTCMinutes() : d.getMinutes(), s: u ? d.getUTCSeconds() : d.getSeconds(),
  };
}
export const p2 = (n) => String(n).padStart(2, '0');
export function fmtTime(ms) {
  const d = dateParts(ms);
  return d.Y + '-' + p2(d.M) + '-' + p2(d.D) + ' ' + p2(d.h) + ':' + p2(d.m) + ':' + p2(d.s);
}
// ms → the value of an <input type="datetime-local"> in the zone shown, and back
// (null when the text is not a complete date and time).
export function toInputTime(ms) {
  const d = dateParts(ms);
  return d.Y + '-' + p2(d.M) + '-' + p2(d.D) + 'T' + p2(d.h) + ':' + p2(d.m) + ':' + p2(d.s);
}
export function fromInputTime(v) {
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?$/.exec(v || '');
  if (!m) return null;
  const a = [+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0)];
  const t = state.utc ? Date.UTC(...a) : new Date(...a).getTime();
  return isNaN(t) ? null : t;
}

export function fmtAgo(ms) {
  if (!ms) return 'never';
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 2) return 'just now';
  if (s < 90) return s + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  return Math.round(s / 3600) + 'h ago';
}

// The scale of a value axis: values are shown as v/base + suffix, one
// suffix for the whole axis so that the ticks read alike.
export function axisScale(max, unit) {
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
export function valueTicks(max, unit) {
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

export function timeTicks(from, to) {
  const span = to - from;
  const steps = [1e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3,
    7200e3, 10800e3, 21600e3, 43200e3, 86400e3];
  const step = steps.find((s) => span / s <= 8) || 86400e3;
  const tzOff = state.utc ? 0 : new Date(from).getTimezoneOffset() * 60e3;
  const ticks = [];
  let t = Math.ceil((from - tzOff) / step) * step + tzOff;
  for (; t <= to; t += step) ticks.push(t);
  return { ticks, step };
}

export function fmtTick(ms, step) {
  const d = dateParts(ms);
  const hm = p2(d.h) + ':' + p2(d.m);
  if (step < 60e3) return hm + ':' + p2(d.s);
  if (step >= 86400e3 || (d.h === 0 && d.m === 0 && step >= 3600e3)) return d.M + '/' + d.D + (step < 86400e3 ? ' ' + hm : '');
  return hm;
}

/* ------------------------------------------------------------ time window */

export const RANGES = { '5m': 300, '15m': 900, '1h': 3600, '6h': 21600, '24h': 86400, '7d': 604800 };
// 24 distinct colours (no repeat within 24 series): Tableau 10, then
// darker and lighter variants of hues it lacks, each readable on white.
export const COLORS = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#dc2626', '#0891b2', '#ca8a04',
  '#db2777', '#4b5563', '#65a30d', '#7c3aed', '#0d9488', '#1e3a8a', '#9a3412', '#14532d', '#581c87',
  '#991b1b', '#155e75', '#854d0e', '#9d174d', '#111827', '#3f6212', '#4338ca', '#be185d'];
// A time of the URL → ms: RFC 3339, Unix seconds (decimals allowed) or ms
// (13+ digits), "now", "now-90s"/"now-15m"/"now-1h"/"now-2d"/"now-1w". null if none.
export function parseTime(v, now) {
  v = String(v || '').trim();
  let m = /^now(?:-(\d+(?:\.\d+)?)(ms|s|m|h|d|w))?$/.exec(v);
  if (m) return m[1] ? now - +m[1] * { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3 }[m[2]] : now;
  if (/^\d{13,}$/.test(v)) return +v;
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(+v * 1000);
  if (/^\d{4}-\d\d-\d\dT/.test(v)) { const t = Date.parse(v); return isNaN(t) ? null : t; }
  return null;
}
// The window a query covers now: from=/to= when given, else the last `range`.
export function window_() {
  const now = Date.now();
  if (state.fromText) {
    const f = parseTime(state.fromText, now), t = parseTime(state.toText, now);
    if (f !== null && t !== null && t > f) return { from: f, to: t };
  }
  return { from: now - RANGES[state.range] * 1000, to: now };
}
export const secs = (ms) => (ms / 1000).toFixed(3);
