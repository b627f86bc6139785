// Helpers for the end-to-end tests of the web UI: one real stack per test file
// (Postgres, the scripted model server, tusko-sandboxd with the sandbox image
// when asked, tusko), one headless Chromium per file (Debian's
// /usr/bin/chromium driven by playwright-core), a new browser context per
// test, sign-in through the real form, and screenshots.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { ROOT, runProgram, startPostgres, startProgram, tmpdir } from '../lib/harness.mjs';
import { startModelServer } from '../model-server/server.mjs';

export const PASSWORD = 'correct horse battery';
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const SANDBOX_KEY = 'k-e2e-sandboxd-key-0123456789abcdef';
export const SHOTS = path.resolve(ROOT, process.env.SCREENSHOTS_DIR || 'tests/out/screenshots');

export const VIEWPORTS = {
  desktop: { width: 1440, height: 900 },
  phone: { width: 390, height: 844 },
};

// The stack: { pg, ms, sandboxd?, tusko, base, addUser(email) }.
export async function startStack({ sandbox = false, scenarios = {}, env = {}, tag = 'e2e' } = {}) {
  const pg = await startPostgres(tag);
  const ms = await startModelServer({ scenarios });
  let sandboxd = null;
  const extra = {};
  if (sandbox) {
    const image = process.env.SANDBOX_IMAGE_DIR;
    if (!image || !fs.existsSync(image)) throw new Error('SANDBOX_IMAGE_DIR is not set or missing: tests/setup.d/10-sandbox-image.sh builds the image');
    sandboxd = await startProgram('tusko-sandboxd', {
      env: {
        SANDBOXD_API_KEY: SANDBOX_KEY,
        SANDBOXD_LISTEN: '127.0.0.1:0',
        SANDBOXD_STATE_DIR: tmpdir('e2e-sbxd-'),
        SANDBOX_IMAGE_DIR: image,
        SANDBOX_WARM_POOL_SIZE: '1',
      },
    });
    extra.OPENSANDBOX_URL = sandboxd.url;
    extra.OPENSANDBOX_API_KEY = SANDBOX_KEY;
  }
  const tuskoEnv = {
    TUSKO_LISTEN: '127.0.0.1:0',
    TUSKO_MODELS: 'openai:gpt-4o-mini,anthropic:claude-sonnet-4',
    OPENAI_BASE_URL: `${ms.url}/v1`,
    OPENAI_API_KEY: 'sk-e2e',
    ANTHROPIC_BASE_URL: ms.url,
    ANTHROPIC_API_KEY: 'sk-ant-e2e',
    ...extra,
    ...env,
  };
  const tusko = await startProgram('tusko', { env: { DATABASE_URL: pg.url, ...tuskoEnv } });
  const addUser = (email) => {
    const r = runProgram('tusko', ['user', 'add', '--email', email, '--password-stdin'], { env: { DATABASE_URL: pg.url }, input: PASSWORD + '\n' });
    assert.equal(r.code, 0, `user add ${email}: ${r.stderr}`);
    return r.stdout.trim();
  };
  return {
    pg,
    ms,
    sandboxd,
    tusko,
    tuskoEnv,
    base: tusko.url,
    addUser,
    async stop() {
      await tusko.stop();
      if (sandboxd) {
        // a stopped sandboxd keeps users' sandboxes for its next start: delete them
        const h = { 'OPEN-SANDBOX-API-KEY': SANDBOX_KEY };
        const r = await fetch(`${sandboxd.url}/v1/sandboxes?pageSize=200`, { headers: h });
        const items = r.ok ? (await r.json()).items || [] : [];
        for (const x of items) await fetch(`${sandboxd.url}/v1/sandboxes/${x.id}`, { method: 'DELETE', headers: h });
        await sandboxd.stop();
      }
      await ms.close();
    },
  };
}

// Drops files on an element the way a drag from the desktop does.
export async function dropFiles(page, selector, files) {
  const dt = await page.evaluateHandle((fs) => {
    const d = new DataTransfer();
    for (const f of fs) d.items.add(new File([f.text], f.name, { type: f.type || 'application/octet-stream' }));
    return d;
  }, files);
  for (const type of ['dragenter', 'dragover', 'drop']) await page.dispatchEvent(selector, type, { dataTransfer: dt });
}

// One browser per test file.
export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: scripts/deps.sh installs Debian's chromium`);
  // playwright gives the browser a new temporary --user-data-dir of its own
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-gpu'],
  });
}

// A new context and page; collects page errors, CSP reports and dialogs (an
// alert() would be XSS) so a test can assert there were none.
export async function newPage(browser, { viewport = 'desktop', theme = 'light', acceptDownloads = false, timezoneId } = {}) {
  const context = await browser.newContext({ viewport: VIEWPORTS[viewport] || viewport, colorScheme: theme, acceptDownloads, deviceScaleFactor: 1, reducedMotion: 'reduce', timezoneId });
  const page = await context.newPage();
  const problems = { errors: [], dialogs: [], csp: [], console: [] };
  page.on('pageerror', (e) => problems.errors.push(String(e)));
  page.on('dialog', async (d) => {
    problems.dialogs.push(d.message());
    await d.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.console.push(m.text());
  });
  await page.exposeBinding('__tuskoCsp', (_src, v) => problems.csp.push(v));
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => window.__tuskoCsp && window.__tuskoCsp(`${e.violatedDirective} ${e.blockedURI}`));
  });
  page.setDefaultTimeout(20000);
  return { context, page, problems };
}

export async function signIn(page, base, email) {
  await page.goto(base + '/');
  await page.locator('#email').fill(email);
  await page.locator('#password').fill(PASSWORD);
  await page.locator('#signin-submit').click();
  await page.locator('body[data-view="app"]').waitFor();
}

// Types a message into the composer and sends it with Enter.
export async function send(page, text) {
  const box = page.locator('#prompt');
  await box.fill(text);
  await box.press('Enter');
}

export function turns(page) {
  return page.locator('article.turn');
}

export async function lastTurnDone(page, state = 'done') {
  await page.locator(`article.turn[data-state="${state}"]`).last().waitFor();
}

export async function screenshot(page, name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}
