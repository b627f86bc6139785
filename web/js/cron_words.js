// A readable line for a schedule's expression (the Schedules page's preview
// and list): "every weekday at 09:00, Europe/Berlin". No imports, so it runs
// under node too (tests/unit/web/schedules.test.mjs). What the expression
// really does is the server's (the fire times it answers); this only reads
// the common shapes, and gives '' for one it has no words for.
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const MACROS = { '@hourly': '0 * * * *', '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@weekly': '0 0 * * 0', '@monthly': '0 0 1 * *', '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *' };
const NAMES = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6, jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12 };

const pad = (n) => String(n).padStart(2, '0');
const num = (s) => (s.toLowerCase() in NAMES ? NAMES[s.toLowerCase()] : Number(s));

// A list field as words: "1,15" → "1 and 15", "mon-fri" → "Monday to Friday".
function listWords(field, name) {
  return field
    .split(',')
    .map((part) => {
      const [range, step] = part.split('/');
      const [a, b] = range.split('-');
      const w = (v) => (name ? name(num(v) % (name === dayName ? 7 : 13)) : String(num(v)));
      let s = range === '*' ? 'every' : b !== undefined ? `${w(a)} to ${w(b)}` : w(a);
      if (step) s = `every ${step}${range === '*' ? '' : ` from ${s}`}`;
      return s;
    })
    .join(', ')
    .replace(/, ([^,]*)$/, ' and $1');
}
const dayName = (d) => DAYS[d];
const monthName = (m) => MONTHS[m - 1];

// A readable line for an expression the server accepts; '' when it is not a
// simple one (the fire times still say what it does).
export function describeCron(expr, zone) {
  const e = (expr || '').trim();
  const z = zone ? `, ${zone}` : '';
  if (/^\d{4}-\d\d-\d\dT/.test(e)) {
    const d = new Date(e);
    return Number.isNaN(d.getTime()) ? '' : `once, at ${d.toISOString().replace('.000Z', 'Z')}`;
  }
  const f = (MACROS[e.toLowerCase()] || e).split(/\s+/);
  if (f.length !== 5) return '';
  const [mi, ho, dom, mon, dow] = f;
  let when;
  if (/^\d+$/.test(mi) && /^\d+$/.test(ho)) when = `at ${pad(ho)}:${pad(mi)}`;
  else if (/^\d+$/.test(mi) && ho === '*') when = mi === '0' ? 'every hour, on the hour' : `every hour at minute ${Number(mi)}`;
  else if (mi === '*' && ho === '*') when = 'every minute';
  else if (/^\*\/\d+$/.test(mi) && ho === '*') when = `every ${mi.slice(2)} minutes`;
  else when = `at minute ${listWords(mi)} of hour ${listWords(ho)}`;
  let days = '';
  const weekdays = /^(1-5|mon-fri)$/i.test(dow);
  if (dom === '*' && dow === '*') days = mon === '*' ? 'every day' : '';
  else if (dom === '*') days = weekdays ? 'every weekday' : `on ${listWords(dow, dayName)}`;
  else if (dow === '*') days = `on day ${listWords(dom)} of the month`;
  else days = `on day ${listWords(dom)} of the month or on ${listWords(dow, dayName)}`;
  const months = mon === '*' ? '' : ` in ${listWords(mon, monthName)}`;
  if (/^every (minute|hour|\d+ minutes)/.test(when) && days === 'every day' && !months) return `${when}${z}`;
  return `${days ? `${days} ` : ''}${when}${months}${z}`.replace(/^(\S)/, (c) => c.toLowerCase());
}

