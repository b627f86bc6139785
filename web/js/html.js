// DOM helpers, and the one place HTML strings become DOM.
//
// The page runs under Trusted Types (require-trusted-types-for 'script' in its
// CSP): assigning a plain string to innerHTML throws. The only HTML this UI
// ever parses is (1) Markdown rendered by the server with cmark-gfm in safe
// mode (raw HTML turned into text, unsafe links dropped: src/app/markdown.c)
// and (2) highlight.js output for code the server already escaped. Both go
// through the policy below; everything else is built with createElement and
// textContent, so model output reaches the DOM as text.

const policy = window.trustedTypes
  ? window.trustedTypes.createPolicy('tusko-html', { createHTML: (s) => s })
  : { createHTML: (s) => s };

// Parses trusted HTML (see above) into a DocumentFragment.
export function trustedFragment(html) {
  const t = document.createElement('template');
  t.innerHTML = policy.createHTML(html);
  return t.content;
}

// Replaces el's content with trusted HTML (highlighter output).
export function setTrustedHTML(el, html) {
  el.innerHTML = policy.createHTML(html);
}

// h('button.primary', { type: 'submit', onclick: fn }, 'Send', icon('send'))
// Children: strings (as text), nodes, arrays, null/false (skipped).
export function h(spec, props = {}, ...children) {
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.append(c);
    else el.append(document.createTextNode(String(c)));
  }
}

const SVG = 'http://www.w3.org/2000/svg';
// An icon from web/icons.svg.
export function icon(name, cls = '') {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', `icon ${cls}`.trim());
  svg.setAttribute('aria-hidden', 'true');
  const use = document.createElementNS(SVG, 'use');
  use.setAttribute('href', `/assets/icons.svg#${name}`);
  svg.append(use);
  return svg;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

// "1.2 s", "340 ms"
export function fmtDuration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(Number(ms))) return '';
  ms = Number(ms);
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
