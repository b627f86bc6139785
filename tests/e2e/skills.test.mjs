// The skills in the web UI, in a real Chromium against a real stack: the
// composer's "/" menu lists the five built-ins, filters as you type, inserts
// "/name " with the keyboard or a click (phone size too), and a message so
// started reaches the model with the skill's instructions; the Skills section
// of the settings page uploads a SKILL.md, turns a skill off (gone from the
// menu), exports it as a .skill zip, and deletes it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../lib/harness.mjs';
import { lastTurnDone, launchBrowser, newPage, screenshot, signIn, startStack } from './lib.mjs';

const BUILTINS = ['code-review', 'financial-model', 'presentation', 'security-audit', 'word-report'];
const scenarios = { 'e2e-skill': { steps: [{ text: 'unused' }, { text: 'Reviewing.' }] } };
const EMAIL = 'sky@example.com';
let stack, browser;

before(async () => {
  stack = await startStack({ scenarios, tag: 'e2e_skills' });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});
after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
});

function clean(problems) {
  assert.deepEqual(problems.errors, [], 'page errors');
  assert.deepEqual(problems.dialogs, [], 'dialogs');
  assert.deepEqual(problems.csp, [], 'CSP / Trusted Types violations');
}

const menuNames = (page) => page.locator('#skills li strong').allTextContents();

describe('skills in the UI', () => {
  test('"/" lists the built-ins, filters as you type, Enter inserts "/name ", the skill reaches the model', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    const box = page.locator('#prompt');
    await box.click();
    await page.keyboard.type('/');
    await page.locator('#skills li').first().waitFor();
    assert.deepEqual(await menuNames(page), BUILTINS.map((n) => `/${n}`));
    assert.equal(await box.getAttribute('aria-expanded'), 'true');
    await screenshot(page, 'skills-menu');
    await page.keyboard.type('rep');
    await page.waitForFunction(() => [...document.querySelectorAll('#skills li strong')].map((e) => e.textContent).join() === '/word-report');
    assert.deepEqual(await menuNames(page), ['/word-report']);
    await page.keyboard.press('Backspace');
    await page.keyboard.press('Backspace');
    await page.keyboard.press('Backspace');
    await page.keyboard.type('zzz');
    await page.locator('#skills p.none', { hasText: 'No skill matches.' }).waitFor();
    for (let i = 0; i < 3; i++) await page.keyboard.press('Backspace');
    await page.keyboard.type('re');
    await page.waitForFunction(() => [...document.querySelectorAll('#skills li strong')].map((e) => e.textContent).join() === '/code-review,/presentation,/word-report');
    assert.deepEqual(await menuNames(page), ['/code-review', '/presentation', '/word-report']);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown'); // round to the first
    await page.keyboard.press('Enter');
    assert.equal(await box.inputValue(), '/code-review ');
    assert.ok(await page.locator('#skills').isHidden());
    await page.keyboard.type('the patch in a.diff #scenario:e2e-skill');
    await page.keyboard.press('Enter');
    await lastTurnDone(page);
    const rec = stack.ms.requests('e2e-skill').at(-1);
    const tool = rec.body.messages.at(-1);
    assert.equal(tool.role, 'tool');
    assert.match(tool.content, /^<skill_content name="code-review"/);
    assert.match(tool.content, /What the user asked to review: "the patch in a\.diff #scenario:e2e-skill"/);
    clean(problems);
    await context.close();
  });

  test('phone size: "/" opens the menu and a tap on a skill inserts it', async () => {
    const { context, page, problems } = await newPage(browser, { viewport: 'phone' });
    await signIn(page, stack.base, EMAIL);
    await page.locator('#prompt').click();
    await page.keyboard.type('/fin');
    await page.waitForFunction(() => [...document.querySelectorAll('#skills li strong')].map((e) => e.textContent).join() === '/financial-model');
    assert.deepEqual(await menuNames(page), ['/financial-model']);
    const item = page.locator('#skills li').first();
    const box = await item.boundingBox();
    assert.ok(box.height >= 40 && box.width <= 390, JSON.stringify(box));
    await item.click();
    assert.equal(await page.locator('#prompt').inputValue(), '/financial-model ');
    await screenshot(page, 'skills-menu-phone');
    clean(problems);
    await context.close();
  });

  test('the Skills section: upload, turn off (gone from the menu), export, delete', async () => {
    const { context, page, problems } = await newPage(browser, { acceptDownloads: true });
    await signIn(page, stack.base, EMAIL);
    await page.goto(stack.base + '/settings');
    const section = page.locator('section[aria-labelledby="settings-skills"]');
    await section.locator('li.skill').first().waitFor();
    assert.deepEqual(await section.locator('li.skill strong').allTextContents(), BUILTINS.map((n) => `/${n}`));
    // upload a SKILL.md
    const md = '---\nname: haiku\ndescription: Writes a haiku about the topic. Use for poems.\nuser-invocable: true\n---\n# Haiku\nThree lines about $ARGUMENTS.\n';
    await section.locator('#skill-upload').setInputFiles({ name: 'SKILL.md', mimeType: 'text/markdown', buffer: Buffer.from(md) });
    await section.locator('.skills-status', { hasText: '/haiku added (version 1).' }).waitFor();
    assert.match(await section.locator('.skills-status').textContent(), /Warnings: unknown key "user-invocable"/);
    const row = section.locator('li.skill[data-skill="haiku"]');
    await row.waitFor();
    assert.equal(await row.locator('.badge').textContent(), 'v1');
    // a broken one: the rule is shown, nothing added
    await section.locator('#skill-upload').setInputFiles({ name: 'SKILL.md', mimeType: 'text/markdown', buffer: Buffer.from('---\nname: Bad\n---\n') });
    await section.locator('.skills-status', { hasText: 'Not added: SKILL.md:' }).waitFor();
    assert.equal(await section.locator('li.skill').count(), 6);
    await screenshot(page, 'skills-settings');
    // in the composer's menu
    await page.goto(stack.base + '/');
    await page.locator('#prompt').click();
    await page.keyboard.type('/h');
    await page.locator('#skills li strong', { hasText: '/haiku' }).waitFor();
    // off: gone from the menu (the menu is loaded again after a change)
    await page.goto(stack.base + '/settings');
    await row.locator('input[type="checkbox"]').uncheck();
    await section.locator('.skills-status', { hasText: '/haiku is off.' }).waitFor();
    assert.equal(await row.locator('input[type="checkbox"]').isChecked(), false);
    await page.locator('#new-chat').click(); // in the page, no reload: the menu loads again after the change
    await page.locator('#prompt').click();
    await page.keyboard.type('/');
    await page.locator('#skills li').first().waitFor();
    assert.deepEqual(await menuNames(page), BUILTINS.map((n) => `/${n}`));
    await page.keyboard.press('Escape');
    // export: a .skill zip with the folder
    await page.goto(stack.base + '/settings');
    const [download] = await Promise.all([page.waitForEvent('download'), row.locator('a', { hasText: 'Export' }).click()]);
    assert.equal(download.suggestedFilename(), 'haiku.skill');
    const bytes = fs.readFileSync(await download.path());
    assert.equal(bytes.subarray(0, 4).toString('latin1'), 'PK\x03\x04');
    assert.ok(bytes.includes(Buffer.from('haiku/SKILL.md')));
    assert.ok(bytes.includes(Buffer.from(md)));
    // delete, confirmed in the dialog
    await row.locator('button', { hasText: 'Delete' }).click();
    await page.locator('#confirm button[value="ok"]').click();
    await section.locator('.skills-status', { hasText: '/haiku deleted.' }).waitFor();
    assert.equal(await section.locator('li.skill[data-skill="haiku"]').count(), 0);
    // built-ins have no delete button
    assert.equal(await section.locator('li.skill button', { hasText: 'Delete' }).count(), 0);
    clean(problems);
    await context.close();
  });
});
