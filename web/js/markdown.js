// Markdown views: text rendered to safe HTML by the server (POST /api/markdown,
// cmark-gfm in safe mode) and shown block by block.
//
// While an answer streams, its text grows; each view asks for a render when it
// changed, at most one request in flight for all views together (the views
// that changed meanwhile go in the next batch). A new render replaces only the
// top-level blocks that differ, so earlier paragraphs, highlighted code and a
// reader's text selection stay put: no jumps while streaming.
import { api } from './api.js';
import { h, icon, trustedFragment } from './html.js';
import { highlightCode } from './highlight.js';

const dirty = new Set();
let inflight = false;
let captured = null; // the views made inside captureViews()

// Runs fn and returns the Markdown views it made (to wait until a batch of
// history is rendered before showing it: see ChatView.loadEarlier).
export function captureViews(fn) {
  const prev = captured;
  captured = [];
  try {
    fn();
    return captured;
  } finally {
    captured = prev;
  }
}

function schedule(view) {
  dirty.add(view);
  if (!inflight) queueMicrotask(flush);
}

async function flush() {
  if (inflight || dirty.size === 0) return;
  inflight = true;
  const views = [...dirty].slice(0, 200);
  for (const v of views) dirty.delete(v);
  const texts = views.map((v) => v.text);
  try {
    const r = await api('/api/markdown', { method: 'POST', json: { texts } });
    views.forEach((v, i) => v.apply(texts[i], r.html[i]));
  } catch (e) {
    // the text stays readable: shown as plain text until a later render works
    views.forEach((v, i) => v.applyPlain(texts[i]));
  } finally {
    inflight = false;
    if (dirty.size) queueMicrotask(flush);
  }
}

export class MarkdownView {
  constructor(el) {
    this.el = el; // container, class "md"
    this.el.classList.add('md');
    this.text = '';
    this.shown = null; // the text the DOM shows
    this.blocks = []; // [{src, node}]
    this.onrender = null;
    if (captured) captured.push(this);
  }

  set(text) {
    if (text === this.text) return;
    this.text = text;
    schedule(this);
  }

  append(delta) {
    this.set(this.text + delta);
  }

  // Resolves once what is set now is on screen.
  rendered() {
    if (this.shown === this.text) return Promise.resolve();
    return new Promise((resolve) => {
      const prev = this.onrender;
      this.onrender = () => {
        if (prev) prev();
        if (this.shown === this.text) resolve();
      };
    });
  }

  apply(text, html) {
    const fresh = [...trustedFragment(html).childNodes].filter((n) => n.nodeType === Node.ELEMENT_NODE);
    if (this.plain) {
      this.plain.remove();
      this.plain = null;
    }
    fresh.forEach((node, i) => {
      const src = node.outerHTML;
      const old = this.blocks[i];
      if (old && old.src === src) return;
      const shown = enhance(node);
      if (old) old.node.replaceWith(shown);
      else this.el.append(shown);
      this.blocks[i] = { src, node: shown };
    });
    for (const b of this.blocks.splice(fresh.length)) b.node.remove();
    this.done(text);
  }

  applyPlain(text) {
    for (const b of this.blocks.splice(0)) b.node.remove();
    if (!this.plain) this.plain = this.el.appendChild(h('p.plain'));
    this.plain.textContent = text;
    this.done(text);
  }

  done(text) {
    this.shown = text;
    const f = this.onrender;
    this.onrender = null;
    if (f) f();
  }
}

// What the server's HTML does not say: links open in a new tab without an
// opener; code blocks get highlighting, a language label and a copy button.
function enhance(node) {
  const links = node.matches('a') ? [node] : node.querySelectorAll('a');
  for (const a of links) {
    a.target = '_blank';
    a.rel = 'noopener noreferrer nofollow';
  }
  let top = node;
  const pres = node.matches('pre') ? [node] : [...node.querySelectorAll('pre')];
  for (const pre of pres) {
    const code = pre.querySelector('code');
    if (!code) continue;
    const m = /language-([\w+#.-]+)/.exec(code.className);
    const lang = m ? m[1] : '';
    highlightCode(code, lang);
    const copy = h('button.copy', { type: 'button', title: 'Copy code', 'aria-label': 'Copy code' }, icon('copy'), h('span', { text: 'Copy' }));
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(code.textContent);
        copy.lastChild.textContent = 'Copied';
      } catch {
        copy.lastChild.textContent = 'Copy failed';
      }
      setTimeout(() => (copy.lastChild.textContent = 'Copy'), 1500);
    });
    const bar = h('div.codebar', {}, h('span.lang', { text: lang || 'text' }), copy);
    const wrap = h('div.codeblock');
    if (pre === node) top = wrap;
    else pre.replaceWith(wrap);
    wrap.append(bar, pre);
  }
  return top;
}

// Clicks on links inside rendered Markdown: only http(s) and mailto open
// (the server already drops everything else; this is the second lock).
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('.md a');
  if (!a) return;
  const href = a.getAttribute('href') || '';
  if (!/^(https?:\/\/|mailto:)/i.test(href)) e.preventDefault();
});
