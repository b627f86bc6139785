// The Telegram section of the settings page, against the Bot API stand-in
// (tests/lib/telegram-standin.mjs): the bot's name, "Link a chat" shows the
// deep link and the code; the code sent to the bot in a private chat links
// it and the page shows the chat without a reload; a test message arrives;
// unlinking after the confirm dialog. Without a token the section says the
// feature is off and offers nothing.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { startProgram, stopAll } from '../lib/harness.mjs';
import { startTelegramStandin } from '../lib/telegram-standin.mjs';
import { launchBrowser, newPage, screenshot, signIn, startStack } from './lib.mjs';

const TOKEN = '987654321:AAE-e2e-token-Qw1Er2Ty3Ui4Op5As6Df';
const CHAT = 820001;
const EMAIL = 'tg@example.com';
let stack, browser, tg;

before(async () => {
  tg = await startTelegramStandin({ token: TOKEN });
  stack = await startStack({ tag: 'e2e_tg', env: { TELEGRAM_BOT_TOKEN: TOKEN, TELEGRAM_API_URL: tg.url, TELEGRAM_POLL_TIMEOUT: '1s' } });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
  if (tg) await tg.close();
});

describe('the Telegram section of the settings page', () => {
  test('link a chat with the code, send a test message, unlink', async () => {
    const { page, context, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await page.goto(`${stack.base}/settings`);
    const sec = page.locator('section[aria-labelledby="settings-telegram"]');
    await sec.locator('#telegram-state dd', { hasText: '@tusko_test_bot' }).waitFor();
    assert.equal(await sec.locator('#telegram-state dd').nth(1).innerText(), 'not linked');
    await sec.getByRole('button', { name: 'Link a chat' }).click();
    const code = (await sec.locator('.telegram-code-text').innerText()).trim();
    assert.match(code, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(await sec.locator('.telegram-code a').getAttribute('href'), `https://t.me/tusko_test_bot?start=${code}`);
    await screenshot(page, 'settings-telegram-code');
    // the user presses Start in Telegram: the bot gets /start CODE
    tg.message(CHAT, `/start ${code}`, { username: 'tg_user' });
    await sec.locator('.telegram-status', { hasText: 'Linked.' }).waitFor({ timeout: 15000 });
    assert.match(await sec.locator('#telegram-state').innerText(), /@tg_user, linked/);
    assert.match(await sec.locator('#telegram-state').innerText(), /active/);
    assert.equal(await sec.locator('.telegram-code').isHidden(), true);
    await sec.getByRole('button', { name: 'Send a test message' }).click();
    await sec.locator('.telegram-status', { hasText: 'A test message is on its way.' }).waitFor();
    const deadline = Date.now() + 15000;
    while (!tg.to(CHAT).some((m) => /^A test message from Tusko/.test(m.text))) {
      assert.ok(Date.now() < deadline, 'the test message reached the chat');
      await new Promise((ok) => setTimeout(ok, 100));
    }
    await screenshot(page, 'settings-telegram-linked');
    await sec.getByRole('button', { name: 'Unlink' }).click();
    const dialog = page.getByRole('dialog', { name: 'Unlink Telegram?' });
    await dialog.getByRole('button', { name: 'Unlink' }).click();
    await sec.locator('.telegram-status', { hasText: 'Unlinked.' }).waitFor();
    await sec.locator('#telegram-state dd', { hasText: 'not linked' }).waitFor();
    assert.equal(await sec.getByRole('button', { name: 'Send a test message' }).count(), 0);
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.csp, []);
    await context.close();
  });

  test('without a bot token the section says Telegram is off and offers no button', async () => {
    const off = await startProgram('tusko', { env: { ...stack.tuskoEnv, DATABASE_URL: stack.pg.url, TELEGRAM_BOT_TOKEN: '' } });
    const { page, context } = await newPage(browser);
    await signIn(page, off.url, EMAIL);
    await page.goto(`${off.url}/settings`);
    const sec = page.locator('section[aria-labelledby="settings-telegram"]');
    await sec.locator('#telegram-state dd', { hasText: 'off: this server has no Telegram bot configured' }).waitFor();
    assert.equal(await sec.locator('button').count(), 0);
    await context.close();
    await off.stop();
  });
});
