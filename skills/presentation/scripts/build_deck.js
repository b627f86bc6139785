#!/usr/bin/env node
// build_deck.js DECK_JSON OUT_PPTX: builds a .pptx from deck.json (see
// references/deck-schema.md) with pptxgenjs: title bars, bullets, native
// charts, tables and speaker notes.
'use strict';
const fs = require('fs');
const PptxGenJS = require('pptxgenjs');

function fail(msg) {
  process.stderr.write(`build_deck: ${msg}\n`);
  process.exit(1);
}

const [, , inPath, outPath] = process.argv;
if (!inPath || !outPath) fail('usage: build_deck.js deck.json deck.pptx');
let deck;
try {
  deck = JSON.parse(fs.readFileSync(inPath, 'utf8'));
} catch (e) {
  fail(`cannot read ${inPath}: ${e.message}`);
}
if (!Array.isArray(deck.slides) || deck.slides.length === 0) fail('"slides" must be a non-empty list');

const theme = deck.theme || {};
const accent = /^[0-9A-Fa-f]{6}$/.test(theme.accent || '') ? theme.accent : '1F6FEB';
const font = theme.font || 'Liberation Sans';
const pptx = new PptxGenJS();
pptx.layout = 'LAYOUT_WIDE'; // 13.33 x 7.5 in
pptx.title = deck.title || 'Presentation';
if (deck.author) pptx.author = deck.author;

const W = 13.33;
function titleBar(slide, text) {
  slide.addShape(pptx.ShapeType.rect, { x: 0, y: 0, w: W, h: 0.12, fill: { color: accent }, line: { color: accent } });
  slide.addText(String(text || ''), { x: 0.6, y: 0.35, w: W - 1.2, h: 1.0, fontFace: font, fontSize: 28, bold: true, color: '1A1A1A', valign: 'top', fit: 'shrink' });
}
function bulletsOf(list) {
  return (list || []).map((b) => {
    const s = String(b);
    const sub = s.startsWith('  ');
    return { text: s.trim(), options: { bullet: true, indentLevel: sub ? 1 : 0, fontSize: sub ? 18 : 22, breakLine: true } };
  });
}
const chartTypes = { bar: 'bar', line: 'line', pie: 'pie' };

deck.slides.forEach((s, i) => {
  const slide = pptx.addSlide();
  const layout = s.layout || 'bullets';
  switch (layout) {
    case 'title':
    case 'section':
    case 'closing':
      slide.background = { color: layout === 'section' ? accent : 'FFFFFF' };
      slide.addText(String(s.title || ''), { x: 0.8, y: 2.4, w: W - 1.6, h: 1.4, fontFace: font, fontSize: 40, bold: true, color: layout === 'section' ? 'FFFFFF' : '1A1A1A', fit: 'shrink' });
      if (s.subtitle) slide.addText(String(s.subtitle), { x: 0.8, y: 3.9, w: W - 1.6, h: 0.8, fontFace: font, fontSize: 22, color: layout === 'section' ? 'FFFFFF' : '555555' });
      if (layout !== 'section') slide.addShape(pptx.ShapeType.rect, { x: 0.8, y: 2.2, w: 1.5, h: 0.08, fill: { color: accent }, line: { color: accent } });
      break;
    case 'chart': {
      titleBar(slide, s.title);
      const c = s.chart || {};
      if (!chartTypes[c.type] || !Array.isArray(c.categories) || !Array.isArray(c.series)) fail(`slide ${i + 1}: chart needs type, categories and series`);
      const data = c.series.map((se) => ({ name: String(se.name || ''), labels: c.categories.map(String), values: (se.values || []).map(Number) }));
      slide.addChart(chartTypes[c.type], data, {
        x: 0.8, y: 1.5, w: W - 1.6, h: 5.4, chartColors: [accent, '8B949E', 'F0883E', '3FB950', 'A371F7'],
        showLegend: data.length > 1 || c.type === 'pie', legendPos: 'b', valAxisTitle: c.unit || undefined, showValAxisTitle: !!c.unit,
        catAxisLabelFontFace: font, valAxisLabelFontFace: font, dataLabelFontFace: font,
      });
      break;
    }
    case 'table': {
      titleBar(slide, s.title);
      const t = s.table || {};
      if (!Array.isArray(t.header) || !Array.isArray(t.rows)) fail(`slide ${i + 1}: table needs header and rows`);
      const rows = [t.header.map((h) => ({ text: String(h), options: { bold: true, color: 'FFFFFF', fill: { color: accent } } }))];
      for (const r of t.rows) rows.push(r.map((v) => ({ text: String(v) })));
      slide.addTable(rows, { x: 0.8, y: 1.6, w: W - 1.6, fontFace: font, fontSize: 16, border: { type: 'solid', color: 'D0D7DE', pt: 1 } });
      break;
    }
    case 'two-column':
      titleBar(slide, s.title);
      slide.addText(bulletsOf(s.bullets), { x: 0.6, y: 1.6, w: W / 2 - 0.9, h: 5.2, fontFace: font, valign: 'top', color: '1A1A1A' });
      slide.addText(bulletsOf(s.right), { x: W / 2 + 0.3, y: 1.6, w: W / 2 - 0.9, h: 5.2, fontFace: font, valign: 'top', color: '1A1A1A' });
      break;
    default:
      titleBar(slide, s.title);
      slide.addText(bulletsOf(s.bullets), { x: 0.6, y: 1.6, w: W - 1.2, h: 5.2, fontFace: font, valign: 'top', color: '1A1A1A' });
  }
  slide.addText(String(i + 1), { x: W - 1.0, y: 7.0, w: 0.6, h: 0.35, fontFace: font, fontSize: 11, color: '8B949E', align: 'right' });
  if (s.notes) slide.addNotes(String(s.notes));
});

pptx.writeFile({ fileName: outPath }).then(
  (f) => process.stdout.write(`wrote ${f} (${deck.slides.length} slides)\n`),
  (e) => fail(e.message),
);
