// USER_MAX_STREAMS in the web UI: with a limit of one stream, a second tab on
// the chat closes the first tab's stream; the first tab says why and offers to
// reconnect instead of reconnecting by itself (which would close the other
// tab's stream in turn). Reconnecting takes the stream back and shows what
// happened meanwhile.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../lib/harness.mjs';
import { lastTurnDone, launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

const scenarios = {
  'ui-first': { steps: [{ text: 'First answer.' }] },
  'ui-second': { steps: [{ text: 'Second answer, sent from the other tab.' }] },
};

let stack, browser;
const EMAIL = 'tabs@example.com';

before(async () => {
  stack = await startStack({ scenarios, env: { USER_MAX_STREAMS: '1' }, tag: 'e2e_limits' });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});
after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop(); // the model server too: a listening socket keeps the file's process alive
  await stopAll();
});

describe('the limit of open streams', () => {
  test('a tab whose stream was closed for the limit says so and reconnects only when asked', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Hello #scenario:ui-first');
    await lastTurnDone(page);
    const chat = new URL(page.url()).pathname;
    const bar = page.locator('#conn');
    assert.equal(await bar.isHidden(), true);
    // a second tab on the same chat takes the account's one stream
    const other = await context.newPage();
    await other.goto(stack.base + chat);
    await other.locator('.thread .msg.user', { hasText: 'Hello' }).waitFor();
    await bar.waitFor({ state: 'visible' });
    assert.match(await bar.innerText(), /too many chats open/);
    const again = bar.getByRole('button', { name: 'Reconnect' });
    await again.waitFor();
    await screenshot(page, 'stream-closed-banner');
    // it does not reconnect by itself: the other tab keeps its stream
    await page.waitForTimeout(1500);
    assert.equal(await other.locator('#conn').isHidden(), true, 'the newer tab keeps its stream');
    // the other tab chats; the first shows it only once reconnected
    await other.locator('#prompt').fill('From the other tab #scenario:ui-second');
    await other.locator('#prompt').press('Enter');
    await other.locator('article.turn[data-state="done"]').nth(1).waitFor();
    assert.equal(await page.locator('article.turn').count(), 1, 'the closed tab saw nothing more');
    await again.click();
    await bar.waitFor({ state: 'hidden' });
    await page.locator('.thread', { hasText: 'Second answer, sent from the other tab.' }).waitFor();
    assert.equal(await page.locator('article.turn').count(), 2);
    // and now the other tab is the one told
    await other.locator('#conn').waitFor({ state: 'visible' });
    assert.match(await other.locator('#conn').innerText(), /too many chats open/);
    assert.deepEqual(problems.errors, []);
    await context.close();
  });
});
