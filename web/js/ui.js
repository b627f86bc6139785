// The UI's shared pieces, for every feature module: the toast, the confirm
// dialog, a tool's lane badge, and the preview of a file (text and code
// highlighted, images, CSV as a table) that the Files tab and the tool cards
// both show.
import { $, h } from './html.js';
import { highlightCode, languageOf } from './highlight.js';
import { filmstrip, sheetTables } from './office.js';

const CSV_MAX_ROWS = 500;

// A short message at the bottom of the screen (role alert) for 5 s: an
// error's message, or a text.
export function toast(what) {
  const t = $('#toast');
  t.textContent = what instanceof Error ? what.message : String(what);
  t.hidden = false;
  clearTimeout(t._timer);
  t._timer = setTimeout(() => (t.hidden = true), 5000);
}

// Asks with the page's modal <dialog id="confirm"> (the focus starts on
// Cancel; Escape cancels): resolves true when the user chose the action.
export function confirmDialog({ title, text, action = 'Delete' }) {
  const d = $('#confirm');
  $('h2', d).textContent = title;
  $('.what', d).textContent = text;
  $('button[value="ok"]', d).textContent = action;
  d.returnValue = '';
  return new Promise((resolve) => {
    d.onclose = () => resolve(d.returnValue === 'ok');
    d.showModal();
    $('button[value="cancel"]', d).focus();
  });
}

const LANES = { fast: 'fast', sandbox: 'sandbox', browser: 'browser' };

// Where a tool ran: fast (in the chat server), sandbox, browser.
export function laneBadge(lane) {
  const l = LANES[lane] || 'fast';
  const title = {
    fast: 'fast lane: ran in the chat server, no container',
    sandbox: "sandbox lane: ran in this chat's isolated sandbox",
    browser: 'browser lane: ran in an isolated browser session',
  }[l];
  return h(`span.lane.lane-${l}`, { title, text: l });
}

// A file's preview (GET .../files/preview, or a preview tool's result: {kind,
// text | base64, mime, truncated}) as nodes; name: the file's name.
export function renderPreview(p, name) {
  const out = [];
  if (p.kind === 'pages') {
    out.push(...filmstrip(p, name));
  } else if (p.kind === 'sheets') {
    out.push(...sheetTables(p));
  } else if (p.kind === 'error') {
    out.push(h('p.error', { text: p.error }));
  } else if (p.kind === 'image' && p.base64) {
    out.push(h('img.preview-image', { src: `data:${p.mime || 'image/png'};base64,${p.base64}`, alt: name }));
  } else if (p.kind === 'text' && typeof p.text === 'string') {
    if (/\.csv$/i.test(name) || p.mime === 'text/csv') out.push(csvTable(p.text));
    else {
      const code = h('code', { text: p.text });
      highlightCode(code, languageOf(name));
      out.push(h('pre.preview-text', {}, code));
    }
  } else {
    out.push(h('p.muted', { text: `No preview for this kind of file (${p.mime || 'binary'}). Download it to open it.` }));
  }
  if (p.truncated) out.push(h('p.muted', { text: 'Only the start of the file is shown.' }));
  return out;
}

// RFC 4180 CSV (quotes, doubled quotes, newlines inside quotes) as a table.
export function parseCsv(text, maxRows = CSV_MAX_ROWS) {
  const rows = [];
  let row = [];
  let field = '';
  let q = false;
  for (let i = 0; i < text.length && rows.length < maxRows; i++) {
    const c = text[i];
    if (q) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') q = false;
      else field += c;
    } else if (c === '"' && field === '') q = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if ((field !== '' || row.length) && rows.length < maxRows) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

function csvTable(text) {
  const rows = parseCsv(text);
  if (!rows.length) return h('p.muted', { text: 'The file is empty.' });
  const [head, ...rest] = rows;
  return h(
    'div.table-wrap',
    {},
    h('table.csv', {}, h('thead', {}, h('tr', {}, head.map((c) => h('th', { text: c })))), h('tbody', {}, rest.map((r) => h('tr', {}, r.map((c) => h('td', { text: c })))))),
    rows.length >= CSV_MAX_ROWS ? h('p.muted', { text: `The first ${CSV_MAX_ROWS} rows.` }) : null,
  );
}
