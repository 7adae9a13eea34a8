/*
 * profd web UI — autocomplete of the selector box: profile types, label names
 * and values, scoped to what is typed so far (its profile type and complete
 * matchers) and to the window on screen; accepting one closes quotes and
 * braces.
 */
import { state, ui } from './state.js';
import { $, api, esc, isInternal, labelName, quote, window_ } from './util.js';

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

export async function updateSuggest() {
  const input = $('selector');
  const ctx = context(input.value, input.selectionStart);
  if (!ctx) { closeSuggest(); return; }
  let list = [];
  const w = window_();
  const round = (t) => Math.floor(t / 60000) * 60;
  const timeOnly = 'start=' + round(w.from) + '&end=' + (round(w.to) + 60);
  if (ctx.kind === 'metric') list = (await labelValues('__name__', timeOnly)).map((v) => ({ text: v, kind: 'profile type' }));
  else if (ctx.kind === 'name') list = (await labelNames(scopeParams(input.value, ctx.start, ''))).filter((v) => !isInternal(v)).map((v) => ({ text: v, kind: 'label' }));
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

export function closeSuggest() {
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
