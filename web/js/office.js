// Office documents in the chat and the Files panel: a filmstrip of slide or
// page pictures (arrow keys move, a click enlarges), sheets as tables with a
// tab per sheet, and compare_files' side-by-side view (old left, new right,
// word changes highlighted inline, unchanged runs folded).
import { h } from './html.js';

// The pictures of a preview ({kind: "pages", pages: [{page, mime, base64,
// title, body, notes, text}], page_count, first, last, rendered, notes}).
export function filmstrip(p, name) {
  const pages = (p.pages || []).filter((x) => x.base64 && /^image\/(png|jpeg)$/.test(x.mime));
  const unit = p.family === 'slides' ? 'Slide' : 'Page';
  const out = [];
  const range = `${unit}s ${p.first}–${p.last} of ${p.page_count}`;
  if (!pages.length) {
    // no pictures: the text of each slide or page, and why
    for (const n of p.notes || []) out.push(h('p.muted', { text: n }));
    out.push(
      h(
        'ol.page-texts',
        {},
        (p.pages || []).map((x) => h('li', {}, x.title ? h('strong', { text: x.title }) : null, h('pre.preview-text', { text: x.body || x.text || '' }), x.notes ? h('p.muted', { text: `Notes: ${x.notes}` }) : null)),
      ),
    );
    return out;
  }
  let cur = 0;
  const src = (x) => `data:${x.mime || 'image/png'};base64,${x.base64}`;
  const main = h('img.film-main', { alt: `${name}: ${unit.toLowerCase()} ${pages[0].page}`, src: src(pages[0]) });
  const caption = h('div.film-caption');
  const thumbs = pages.map((x, i) =>
    h('button.film-thumb', { type: 'button', title: `${unit} ${x.page}`, 'aria-label': `${unit} ${x.page}`, onclick: () => show(i) }, h('img', { src: src(x), alt: '', loading: 'lazy' }), h('span', { text: String(x.page) })),
  );
  const strip = h('div.filmstrip', { tabindex: '0', role: 'group', 'aria-label': `${name}: ${range} (arrow keys move, Enter enlarges)` });
  function show(i) {
    cur = Math.max(0, Math.min(pages.length - 1, i));
    const x = pages[cur];
    main.src = src(x);
    main.alt = `${name}: ${unit.toLowerCase()} ${x.page}`;
    thumbs.forEach((t, k) => t.classList.toggle('current', k === cur));
    thumbs[cur].scrollIntoView({ block: 'nearest', inline: 'nearest' });
    caption.replaceChildren(h('span.muted', { text: `${unit} ${x.page} of ${p.page_count}` }), x.title ? h('strong', { text: ` ${x.title}` }) : null, x.notes ? h('div.film-notes', { text: `Notes: ${x.notes}` }) : null);
  }
  function enlarge() {
    const big = h('img.film-big', { src: main.src, alt: main.alt });
    const dlg = h('dialog.film-dialog', { 'aria-label': main.alt }, h('button.btn.small.film-close', { type: 'button', onclick: () => dlg.close(), text: 'Close' }), big);
    dlg.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
        show(cur + (e.key === 'ArrowRight' ? 1 : -1));
        big.src = main.src;
        big.alt = main.alt;
        e.preventDefault();
      }
    });
    dlg.addEventListener('close', () => {
      dlg.remove();
      strip.focus();
    });
    dlg.addEventListener('click', (e) => e.target === dlg && dlg.close());
    document.body.append(dlg);
    dlg.showModal();
  }
  main.addEventListener('click', enlarge);
  strip.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown') show(cur + 1);
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') show(cur - 1);
    else if (e.key === 'Home') show(0);
    else if (e.key === 'End') show(pages.length - 1);
    else if (e.key === 'Enter') enlarge();
    else return;
    e.preventDefault();
  });
  strip.append(main, caption, h('div.film-thumbs', {}, thumbs));
  out.push(strip);
  out.push(h('p.muted.film-range', { text: p.last < p.page_count ? `${range}: ask for pages "${p.last + 1}-${Math.min(p.page_count, p.last + (p.family === 'slides' ? 30 : 20))}" for more.` : range }));
  show(0);
  return out;
}

// One table per sheet, a tab each.
export function sheetTables(p) {
  const sheets = p.sheets || [];
  const panes = sheets.map((s) => {
    const [head = [], ...rest] = s.rows || [];
    const note = s.truncated ? `${s.total_rows} rows × ${s.total_cols} columns; the first 200 × 50 shown.` : `${s.total_rows} rows × ${s.total_cols} columns.`;
    return h(
      'div.sheet-pane',
      {},
      h('div.table-wrap', {}, h('table.csv', {}, h('thead', {}, h('tr', {}, head.map((c) => h('th', { text: c })))), h('tbody', {}, rest.map((r) => h('tr', {}, r.map((c) => h('td', { text: c }))))))),
      h('p.muted', { text: note }),
    );
  });
  const tabs = sheets.map((s, i) => h('button.sheet-tab', { type: 'button', role: 'tab', text: s.name, onclick: () => pick(i) }));
  function pick(i) {
    panes.forEach((x, k) => (x.hidden = k !== i));
    tabs.forEach((t, k) => {
      t.classList.toggle('current', k === i);
      t.setAttribute('aria-selected', k === i ? 'true' : 'false');
    });
  }
  if (sheets.length) pick(0);
  return [sheets.length > 1 ? h('div.sheet-tabs', { role: 'tablist' }, tabs) : null, ...panes, ...(p.notes || []).map((n) => h('p.muted', { text: n }))];
}

// Word hunks ([["eq"|"del"|"ins", text]]) as one side: old keeps eq+del, new eq+ins.
// Long unchanged runs are folded to their ends.
function side(hunks, keep) {
  const fold = (t) => (t.length > 160 ? `${t.slice(0, 60)} … ${t.slice(-60)}` : t);
  return hunks.filter(([op]) => op === 'eq' || op === keep).map(([op, t]) => (op === 'eq' ? document.createTextNode(fold(t)) : h(op === 'del' ? 'del' : 'ins', { text: t })));
}

// compare_files' answer side by side.
export function compareView(d) {
  const head = h('div.cmp-head', {}, h('span.cmp-old', { text: String(d.a || '').split('/').pop() }), h('span.cmp-new', { text: String(d.b || '').split('/').pop() }));
  const rows = (d.changes || []).map((c) => {
    const left = h('div.cmp-cell.cmp-old');
    const right = h('div.cmp-cell.cmp-new');
    if (c.hunks) {
      left.append(...side(c.hunks, 'del'));
      right.append(...side(c.hunks, 'ins'));
    } else {
      if (c.old !== undefined) left.append(h('del', { text: c.old }));
      if (c.new !== undefined) right.append(h('ins', { text: c.new }));
    }
    return h(`div.cmp-row.cmp-${c.kind}`, {}, h('div.cmp-where', { text: `${c.kind} · ${c.old_where && c.old_where !== c.where ? `${c.old_where} → ` : ''}${c.where}` }), left, right);
  });
  const out = [h('p.cmp-summary', { text: d.summary || '' })];
  if (rows.length) out.push(h('div.cmp', {}, head, rows));
  if (d.more) out.push(h('p.muted', { text: `… and ${d.more} more changes.` }));
  for (const n of d.notes || []) out.push(h('p.muted', { text: n }));
  return out;
}
