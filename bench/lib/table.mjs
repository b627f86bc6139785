// What the bench programs share: medians and p95 of timings, and the table
// they print (columns what, median, p95, unit, n, note).

export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { med: q(0.5), p95: q(0.95), n: s.length };
}

// Prints the title line, the header and rows (arrays of 6 strings).
export function printTable(title, rows) {
  const head = ['what', 'median', 'p95', 'unit', 'n', 'note'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => r.map((c, i) => (i === 0 || i === 5 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ');
  console.log(title);
  console.log(line(head));
  console.log(w.map((n) => '-'.repeat(n)).join('  '));
  for (const r of rows) console.log(line(r));
}
