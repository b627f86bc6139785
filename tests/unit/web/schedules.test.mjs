// The Schedules page's readable line for an expression (web/js/cron_words.js
// describeCron) under node, no DOM: a table of expressions and what a user
// reads; an expression it has no words for gives '' (the page then shows the
// fire times alone).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describeCron } from '../../../web/js/cron_words.js';

test('describeCron reads the common shapes', () => {
  const table = [
    ['0 9 * * mon-fri', 'Europe/Berlin', 'every weekday at 09:00, Europe/Berlin'],
    ['0 9 * * 1-5', 'UTC', 'every weekday at 09:00, UTC'],
    ['30 7 * * *', 'Asia/Kolkata', 'every day at 07:30, Asia/Kolkata'],
    ['* * * * *', 'UTC', 'every minute, UTC'],
    ['*/15 * * * *', 'UTC', 'every 15 minutes, UTC'],
    ['0 * * * *', 'UTC', 'every hour, on the hour, UTC'],
    ['5 * * * *', 'UTC', 'every hour at minute 5, UTC'],
    ['@daily', 'UTC', 'every day at 00:00, UTC'],
    ['@weekly', 'UTC', 'on Sunday at 00:00, UTC'],
    ['@monthly', 'UTC', 'on day 1 of the month at 00:00, UTC'],
    ['@yearly', 'UTC', 'on day 1 of the month at 00:00 in January, UTC'],
    ['0 12 1,15 * fri', 'UTC', 'on day 1 and 15 of the month or on Friday at 12:00, UTC'],
    ['0 18 * * sat,sun', 'UTC', 'on Saturday and Sunday at 18:00, UTC'],
    ['0 0 * * 7', 'UTC', 'on Sunday at 00:00, UTC'],
    ['0 8 * jun-aug mon', 'UTC', 'on Monday at 08:00 in June to August, UTC'],
    ['2026-12-24T09:00:00+01:00', 'UTC', 'once, at 2026-12-24T08:00:00Z'],
    ['0 0 * *', 'UTC', ''],
    ['', 'UTC', ''],
  ];
  for (const [expr, zone, want] of table) assert.equal(describeCron(expr, zone), want, expr);
});
