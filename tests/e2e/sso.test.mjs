// Sign-in with SSO from the web UI: a real OpenID Connect provider on loopback
// (oidc-provider, tests/lib/oidc-provider.mjs), tusko configured for it, and
// Chromium clicking "Sign in with SSO", logging in at the provider and landing
// back in the app — on the chat it started from.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { freePort, startPostgres, startProgram, stopAll } from '../lib/harness.mjs';
import { startOidcProvider } from '../lib/oidc-provider.mjs';
import { launchBrowser, newPage } from './lib.mjs';

let op, tusko, browser, base;

before(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  op = await startOidcProvider({
    clients: [{ client_id: 'tusko-ui', client_secret: 'secret-ui-0123456789', redirect_uris: [`${base}/api/auth/oidc/callback`] }],
  });
  op.accounts.set('lin', { email: 'lin@example.com', email_verified: true, name: 'Lin' });
  const pg = await startPostgres('e2e_sso');
  tusko = await startProgram('tusko', {
    env: {
      DATABASE_URL: pg.url,
      TUSKO_LISTEN: `127.0.0.1:${port}`,
      TUSKO_PUBLIC_URL: base,
      TUSKO_MODELS: 'openai:gpt-4o-mini',
      OIDC_ISSUER: op.issuer,
      OIDC_CLIENT_ID: 'tusko-ui',
      OIDC_CLIENT_SECRET: 'secret-ui-0123456789',
    },
  });
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (tusko) await tusko.stop();
  if (op) await op.stop();
  await stopAll();
});

test('"Sign in with SSO" goes to the provider and back into the app', async () => {
  const { context, page, problems } = await newPage(browser);
  await page.goto(base + '/');
  const sso = page.locator('#sso');
  await sso.waitFor();
  assert.equal(await sso.innerText(), 'Sign in with SSO');
  await sso.click();
  // the provider's own login and consent pages
  await page.waitForURL((u) => u.toString().startsWith(op.issuer));
  await page.locator('input[name="login"]').fill('lin');
  await page.locator('input[name="password"]').fill('any');
  await page.locator('button[type="submit"]').click();
  for (let i = 0; i < 5 && !page.url().startsWith(base); i++) {
    await page.waitForLoadState();
    if (page.url().startsWith(base)) break;
    await page.locator('button[type="submit"]').click();
    await page.waitForURL((u) => u.toString().startsWith(base) || /interaction/.test(u.toString()));
  }
  await page.locator('body[data-view="app"]').waitFor();
  assert.equal(await page.locator('#me').innerText(), 'lin@example.com');
  assert.equal(new URL(page.url()).pathname, '/');
  assert.deepEqual(problems.errors, []);
  assert.deepEqual(problems.csp, []);
  await context.close();
});

test('a sign-in that fails at the callback shows its reason on the sign-in page', async () => {
  const { context, page, problems } = await newPage(browser);
  // what a browser sees after a provider answers with a stale or forged state
  await page.goto(`${base}/api/auth/oidc/callback?state=${'0'.repeat(64)}&code=x`);
  await page.locator('#signin-error').waitFor();
  assert.equal(new URL(page.url()).pathname, '/');
  assert.match(await page.locator('#signin-error').innerText(), /^Sign-in failed: this sign-in is unknown, expired, already used/);
  assert.deepEqual(problems.errors, []);
  await context.close();
});
