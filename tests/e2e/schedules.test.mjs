// The Schedules page in the web UI (execution off): the zone defaults to the
// browser's (the context runs in Europe/Berlin), the preview reads the
// expression ("every weekday at 09:00, Europe/Berlin") with its next five fire
// times in the zone, a bad expression shows the server's message; a schedule
// is created, listed with its fire times, run now, and its run appears in the
// history as succeeded with a link to its chat, which holds the answer and is
// listed under "Scheduled" in the sidebar apart from the user's chats; pause
// and resume.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../lib/harness.mjs';
import { launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

let stack, browser;
const EMAIL = 'sched@example.com';

before(async () => {
  stack = await startStack({ tag: 'e2e_sched' });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
});

describe('the Schedules page', () => {
  let page, context, problems;

  before(async () => {
    ({ page, context, problems } = await newPage(browser, { timezoneId: 'Europe/Berlin' }));
    await signIn(page, stack.base, EMAIL);
  });
  after(async () => {
    if (!context) return;
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.csp, []);
    assert.deepEqual(problems.dialogs, []);
    await context.close();
  });

  test('create with a preview, see the next fire times, run now and watch the run appear in the history', async () => {
    // a chat of the user's own first, to see the grouping later
    await send(page, 'hello #scenario:text');
    await page.locator('article.turn[data-state="done"]').last().waitFor();

    await page.locator('#side-nav a[data-view="schedules"]').click();
    await page.locator('#schedules-title').waitFor();
    assert.equal(new URL(page.url()).pathname, '/schedules');
    assert.equal(await page.locator('#sched-tz').inputValue(), 'Europe/Berlin');
    const preview = page.locator('#sched-preview');
    await preview.locator('.sched-words').waitFor();
    assert.equal(await preview.locator('.sched-words').innerText(), 'every weekday at 09:00, Europe/Berlin');
    const fires = preview.locator('ol.sched-fires li');
    assert.equal(await fires.count(), 5);
    for (const t of await fires.allInnerTexts()) assert.match(t, /^\d{4}-\d\d-\d\d 09:00 \(\+0[12]:00\) Europe\/Berlin · \d{4}-\d\d-\d\d 0[78]:00 UTC$/, t);

    // a bad expression: the server's message, naming the field
    await page.locator('#sched-cron').fill('0 25 * * *');
    await preview.locator('[role="alert"]', { hasText: 'cron: hour: 25 is out of range 0-23' }).waitFor();

    await page.locator('#sched-name').fill('Daily digest');
    await page.locator('#sched-prompt').fill('digest #scenario:text');
    await page.locator('#sched-cron').fill('30 7 * * *');
    await preview.locator('.sched-words', { hasText: 'every day at 07:30, Europe/Berlin' }).waitFor();
    await page.locator('#sched-notify').selectOption('always');
    await page.locator('#sched-pause-after').check();
    await page.locator('.sched-form button[type="submit"]').click();
    const item = page.locator('#sched-list li.sched-item', { hasText: 'Daily digest' });
    await item.waitFor();
    // what the form sent
    const saved = await page.evaluate(async () => (await (await fetch('/api/schedules')).json()).schedules.find((x) => x.name === 'Daily digest'));
    assert.deepEqual([saved.notify, saved.pause_after_alert, saved.alert_after], ['always', true, 3]);
    assert.equal(await item.locator('ol.sched-fires li').count(), 5);
    assert.match(await item.locator('.sched-expr').innerText(), /30 7 \* \* \* · every day at 07:30, Europe\/Berlin/);

    await item.locator('button', { hasText: 'Run now' }).click();
    const row = item.locator('.sched-runs-table tbody tr[data-status="succeeded"]');
    await row.waitFor({ timeout: 30000 });
    assert.match(await row.innerText(), /succeeded \(manual\)/);
    assert.match(await row.locator('.run-detail').innerText(), /Hello! This is a scripted reply/);
    await screenshot(page, 'schedules-desktop');

    // the run's chat: listed under Scheduled, apart from the user's own chat
    await page.locator('#chats li.group', { hasText: 'Scheduled' }).waitFor();
    const order = await page.locator('#chats li').evaluateAll((lis) => lis.map((li) => (li.classList.contains('group') ? 'group' : li.dataset.origin)));
    assert.deepEqual(order, ['user', 'group', 'scheduled']);
    assert.match(await page.locator('#chats li[data-origin="scheduled"]').innerText(), /^Daily digest · \d{4}-\d\d-\d\d \d\d:\d\d$/);
    // (run now opened the history)
    assert.equal(await item.locator('button', { hasText: 'History' }).getAttribute('aria-expanded'), 'true');
    await item.locator('.sched-runs-table a', { hasText: 'open chat' }).click();
    await page.locator('article.turn[data-state="done"]').last().waitFor();
    assert.match(new URL(page.url()).pathname, /^\/c\/[0-9a-f-]{36}$/);
    assert.match(await page.locator('#messages').innerText(), /digest #scenario:text[\s\S]*Hello! This is a scripted reply/);

    // pause, then resume
    await page.locator('#side-nav a[data-view="schedules"]').click();
    const it = page.locator('#sched-list li.sched-item', { hasText: 'Daily digest' });
    await it.locator('button', { hasText: 'Pause' }).click();
    await page.locator('#sched-list li.sched-item[data-paused="true"] .sched-badge', { hasText: 'paused' }).waitFor();
    assert.match(await it.locator('.sched-paused').innerText(), /^Paused: Nothing fires until it is resumed/);
    await page.locator('#sched-list li.sched-item button', { hasText: 'Resume' }).click();
    await page.locator('#sched-list li.sched-item[data-paused="false"] ol.sched-fires').waitFor();
  });
});
