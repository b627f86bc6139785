// The web UI end to end, without a sandbox service (execution is off):
// serving and security headers, sign-in and sign-out, the sidebar, streaming,
// stop, errors with retry, Markdown, reload mid-turn, model output that
// tries to inject script, and a long chat shown a page of turns at a time.
// Real Postgres, real tusko, the scripted model server, Debian's Chromium.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, runProgram, sse, stopAll } from '../lib/harness.mjs';
import { dropFiles, lastTurnDone, launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

const WORDS = Array.from({ length: 24 }, (_, i) => `word${i + 1}`);
const scenarios = {
  'ui-hello': { steps: [{ text: 'Hello! I am **Tusko**. How can I help?' }] },
  'ui-slow': { steps: [{ text: WORDS.join(' '), split: 'words', chunk_delay_ms: 120 }] },
  'ui-long': { steps: [{ text: WORDS.join(' '), split: 'words', chunk_delay_ms: 200 }] },
  'ui-reload': { steps: [{ text: WORDS.concat(WORDS.map((w) => `${w}b`)).join(' '), split: 'words', chunk_delay_ms: 200 }] },
  // (several paragraphs: taller once rendered than the empty answer before, so
  // showing earlier turns before their Markdown is on screen would move the page)
  'ui-short': { steps: [{ text: 'Short answer to {{last_user}}\n\nA second paragraph.\n\n- and\n- a list' }] },
  'ui-fail': { steps: [{ error: { status: 500, message: 'the model fell over' } }] },
  'ui-markdown': {
    steps: [
      {
        text: [
          '## Result',
          '',
          'A table:',
          '',
          '| name | count |',
          '|:-----|------:|',
          '| apples | 3 |',
          '| pears | 12 |',
          '',
          'Code:',
          '',
          '```python',
          'def greet(name):',
          '    return f"hi {name}"',
          '```',
          '',
          'See [the docs](https://example.com/docs) and ~~old~~ new.',
        ].join('\n'),
      },
    ],
  },
  'ui-xss': {
    steps: [
      {
        text: [
          'Script: <script>window.__xss = 1; alert("script")</script>',
          '',
          '<img src=x onerror="window.__xss = 2; alert(\'img\')">',
          '',
          '[click me](javascript:window.__xss=3;alert(3))',
          '',
          '<a href="javascript:alert(4)" onclick="window.__xss=4">raw link</a>',
          '',
          '<svg onload="window.__xss=5"><circle r="5"/></svg>',
          '',
          '![pixel](https://tracker.example/p.gif?c=secret)',
          '',
          '| cell |',
          '|---|',
          '| <b onmouseover="window.__xss=6">hover</b> |',
          '',
          '<iframe src="javascript:alert(7)"></iframe>',
        ].join('\n'),
        tool_calls: [{ name: 'plan_task', arguments: { goal: '<img src=x onerror="window.__xss=8">', milestones: ['<script>window.__xss=9</script>', 'two', 'three'] } }],
      },
      { text: 'Done: <b onclick="window.__xss=10">bold?</b>' },
    ],
  },
  'ui-plan': {
    steps: [
      { tool_calls: [{ name: 'plan_task', arguments: { goal: 'Write the Q3 summary', milestones: ['Collect the numbers', 'Draft the text', 'Review it'] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 1, status: 'done' }] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 2, status: 'done' }] } }] },
      { text: 'Two of three are done.' },
    ],
  },
  'ui-plan-bad': {
    steps: [
      { tool_calls: [{ name: 'plan_task', arguments: { goal: 'Tidy the notes', milestones: ['Read them', 'Sort them', 'File them'] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 9, status: 'done' }] } }] },
      { text: 'That update was refused.' },
    ],
  },
  // two subagents of one answer at once, each with its own tool calls
  'ui-two': {
    steps: [
      { text: 'Two at once.', tool_calls: [delegate('researcher', 'part A #scenario:ui-part-a'), delegate('reviewer', 'part B #scenario:ui-part-b')] },
      { text: 'Both answered.' },
    ],
  },
  'ui-part-a': { steps: [{ text: 'Looking.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'alpha' } }], delay_ms: 300 }, { text: 'answer A' }] },
  'ui-part-b': { steps: [{ tool_calls: [{ name: 'list_files', arguments: {} }], delay_ms: 300 }, { text: 'answer B' }] },
  // a subagent whose second model call never answers: stopped with the turn
  'ui-wait': { steps: [{ tool_calls: [delegate('researcher', 'wait #scenario:ui-hang')] }, { text: 'not reached' }] },
  'ui-hang': { steps: [{ text: 'Thinking.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'x' } }] }, { hang: true }] },
};
function delegate(role, task) {
  return { name: 'delegate_subagent', arguments: { role, task } };
}

let stack, browser;
const EMAIL = 'ada@example.com';

before(async () => {
  // (the long chat's 65 turns in a row: above the default 30 chat requests a minute)
  stack = await startStack({ scenarios, tag: 'e2e_chat', env: { CHAT_RATE_LIMIT_MAX: '1000' } });
  stack.addUser(EMAIL);
  stack.addUser('bob@example.com');
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
});

function clean(problems) {
  assert.deepEqual(problems.errors, [], 'page errors');
  assert.deepEqual(problems.dialogs, [], 'dialogs (alert/confirm) opened');
  assert.deepEqual(problems.csp, [], 'CSP / Trusted Types violations');
}

describe('serving', () => {
  test('the page and its assets come from the binary with security headers and ETags', async () => {
    const res = await fetch(stack.base + '/');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/html/);
    const csp = res.headers.get('content-security-policy');
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.match(csp, /require-trusted-types-for 'script'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.ok(res.headers.get('referrer-policy'));
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /\sstyle=/, 'no inline style attributes');
    assert.doesNotMatch(html, /\son[a-z]+=/, 'no inline event handlers');

    const js = await fetch(stack.base + '/assets/js/main.js');
    assert.equal(js.status, 200);
    assert.match(js.headers.get('content-type'), /^text\/javascript/);
    const etag = js.headers.get('etag');
    assert.match(etag, /^"[0-9a-f]{16}"$/);
    const again = await fetch(stack.base + '/assets/js/main.js', { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal((await fetch(stack.base + '/assets/css/app.css')).headers.get('content-type'), 'text/css; charset=utf-8');
    for (const p of ['/c/0190a1b2-0000-7000-8000-000000000000', '/memory', '/settings']) {
      const page = await fetch(stack.base + p);
      assert.equal(page.status, 200, p);
      assert.match(page.headers.get('content-security-policy'), /require-trusted-types-for 'script'/, p);
    }
    assert.equal((await fetch(stack.base + '/nope')).status, 404);
    for (const p of ['/assets/../sql/0001_users.sql', '/assets/%2e%2e/x', '/assets/js//main.js', '/assets/', '/assets/nope.js', '/assets/js%2fmain.js'])
      assert.equal((await fetch(stack.base + p)).status, 404, p);
  });

  test('the Markdown route needs a signed-in user', async () => {
    const r = await fetch(stack.base + '/api/markdown', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"text":"x"}' });
    assert.equal(r.status, 401);
  });
});

describe('signing in', () => {
  test('wrong password, then sign in, see the fail-closed banner, sign out', async () => {
    const { context, page, problems } = await newPage(browser);
    await page.goto(stack.base + '/');
    await page.locator('#email').fill(EMAIL);
    await page.locator('#password').fill('not the password');
    await page.locator('#signin-submit').click();
    await page.locator('#signin-error').filter({ hasText: 'Wrong email or password' }).waitFor();
    await screenshot(page, 'signin-desktop-light');
    await page.locator('#password').fill('correct horse battery');
    await page.locator('#password').press('Enter');
    await page.locator('body[data-view="app"]').waitFor();
    // execution is off here: the banner names the missing settings
    const banner = page.locator('#exec-banner');
    await banner.waitFor();
    assert.match(await banner.innerText(), /Execution is off/);
    assert.match(await banner.innerText(), /OPENSANDBOX_URL/);
    assert.match(await banner.innerText(), /OPENSANDBOX_API_KEY/);
    // the model picker lists the allowlist
    assert.deepEqual(await page.locator('#model option').allInnerTexts(), ['openai:gpt-4o-mini', 'anthropic:claude-sonnet-4']);
    await page.locator('#signout').click();
    await page.locator('body[data-view="signin"]').waitFor();
    const me = await page.evaluate(() => fetch('/api/me').then((r) => r.status));
    assert.equal(me, 401);
    clean(problems);
    await context.close();
  });
});

describe('chatting', () => {
  test('send a message and watch it stream in; the chat lands in the sidebar', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Count for me #scenario:ui-slow');
    const turn = page.locator('article.turn').last();
    const text = turn.locator('.segment');
    // part of the answer is on screen while the turn still runs, with a stop button
    await page.waitForFunction(() => {
      const t = document.querySelector('article.turn[aria-busy="true"] .segment');
      return t && /word3\b/.test(t.textContent) && !/word24/.test(t.textContent);
    });
    assert.equal(await page.locator('#send').getAttribute('aria-label'), 'Stop');
    // no layout jumps: while the text grows, what is above it stays where it
    // was (measured within the conversation, which scrolls to follow), and
    // the composer keeps its place and size
    const layout = () =>
      page.evaluate(() => {
        const top = (sel) => {
          const el = document.querySelector(sel);
          return el.getBoundingClientRect().top - document.querySelector('.thread').getBoundingClientRect().top;
        };
        const box = document.querySelector('.composer-box').getBoundingClientRect();
        const send = document.querySelector('#send').getBoundingClientRect();
        return { user: top('.msg.user'), text: top('article.turn .segment'), composer: [box.top, box.height], send: [send.width, send.height] };
      });
    const during = await layout();
    await lastTurnDone(page);
    const afterwards = await layout();
    assert.deepEqual(afterwards, during);
    assert.equal(await page.locator('#announcer').textContent(), 'Tusko answered.');
    assert.equal((await text.innerText()).trim(), WORDS.join(' '));
    assert.equal(await page.locator('#send').getAttribute('aria-label'), 'Send');
    assert.match(page.url(), /\/c\/[0-9a-f-]{36}$/);
    await page.locator('#chats li', { hasText: 'Count for me' }).waitFor();
    // the user's message once, above the answer
    assert.equal(await page.locator('.msg.user').count(), 1);
    clean(problems);
    await context.close();
  });

  test('Shift+Enter is a new line, Enter sends; the answer is Markdown', async () => {
    const { context, page, problems } = await newPage(browser, { acceptDownloads: false });
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    await signIn(page, stack.base, EMAIL);
    const box = page.locator('#prompt');
    await box.click();
    await box.type('first line');
    await box.press('Shift+Enter');
    await box.type('#scenario:ui-markdown');
    assert.equal(await box.inputValue(), 'first line\n#scenario:ui-markdown');
    await box.press('Enter');
    await lastTurnDone(page);
    const md = page.locator('article.turn .md').last();
    await md.locator('table').waitFor();
    assert.deepEqual(await md.locator('th').allInnerTexts(), ['name', 'count']);
    assert.equal(await md.locator('td[align="right"]').first().innerText(), '3');
    // highlighted code with a copy button
    const code = md.locator('.codeblock');
    assert.equal(await code.locator('.lang').innerText(), 'python');
    assert.ok((await code.locator('.hljs-keyword').count()) > 0, 'highlighted');
    await code.locator('button.copy').click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'def greet(name):\n    return f"hi {name}"\n');
    // links open in a new tab without an opener
    const a = md.locator('a', { hasText: 'the docs' });
    assert.equal(await a.getAttribute('href'), 'https://example.com/docs');
    assert.equal(await a.getAttribute('target'), '_blank');
    assert.match(await a.getAttribute('rel'), /noopener/);
    assert.equal(await md.locator('del').innerText(), 'old');
    assert.equal(await page.locator('.msg.user .bubble').last().innerText(), 'first line\n#scenario:ui-markdown');
    clean(problems);
    await context.close();
  });

  test('stop ends the turn where it is', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Take your time #scenario:ui-long');
    await page.waitForFunction(() => /word2\b/.test(document.querySelector('article.turn[aria-busy="true"] .segment')?.textContent || ''));
    await page.locator('#send[aria-label="Stop"]').click();
    await lastTurnDone(page, 'cancelled');
    const shown = await page.locator('article.turn .segment').last().innerText();
    assert.doesNotMatch(shown, /word24/);
    await page.locator('article.turn .turn-foot', { hasText: 'stopped' }).waitFor();
    assert.equal(await page.locator('#send').getAttribute('aria-label'), 'Send');
    clean(problems);
    await context.close();
  });

  test('a failing turn shows a clear error and retry sends it again', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'This breaks #scenario:ui-fail');
    await lastTurnDone(page, 'failed');
    const err = page.locator('.turn-error').last();
    await err.waitFor();
    assert.match(await err.innerText(), /fell over|500/);
    await screenshot(page, 'error-desktop-light');
    stack.ms.addScenario('ui-fail', { steps: [{ text: 'Better now.' }] });
    await err.locator('button', { hasText: 'Retry' }).click();
    await page.locator('article.turn[data-state="done"] .segment', { hasText: 'Better now.' }).waitFor();
    clean(problems);
    await context.close();
  });

  test('reload in the middle of a turn: the turn goes on and finishes', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Keep going #scenario:ui-reload');
    await page.waitForFunction(() => /word2\b/.test(document.querySelector('article.turn[aria-busy="true"] .segment')?.textContent || ''));
    const url = page.url();
    await page.reload();
    assert.equal(page.url(), url);
    await page.locator('article.turn[aria-busy="true"]').waitFor();
    await lastTurnDone(page);
    assert.equal((await page.locator('article.turn .segment').last().innerText()).trim(), WORDS.concat(WORDS.map((w) => `${w}b`)).join(' '));
    assert.equal(await page.locator('.msg.user').count(), 1);
    clean(problems);
    await context.close();
  });

  test('the plan card ticks its milestones', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Plan it #scenario:ui-plan');
    await lastTurnDone(page);
    const plan = page.locator('.card.plan').last();
    assert.equal(await plan.locator('.goal').innerText(), 'Write the Q3 summary');
    assert.deepEqual(await plan.locator('.milestone').evaluateAll((els) => els.map((e) => e.dataset.status)), ['done', 'done', 'in_progress']);
    assert.match(await plan.locator('.count').innerText(), /2 of 3 done/);
    assert.equal(await plan.locator('.lane').innerText(), 'fast');
    assert.equal(await page.locator('.card.tool[data-tool="plan_task"]').count(), 0, 'the plan card stands for its tool calls');
    await screenshot(page, 'plan-desktop-light');
    clean(problems);
    await context.close();
  });

  test('a plan_task call that fails shows its card, with why', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Plan badly #scenario:ui-plan-bad');
    await lastTurnDone(page);
    const turn = page.locator('article.turn').last();
    assert.equal(await turn.locator('.card.plan .goal').innerText(), 'Tidy the notes');
    const cards = turn.locator('.card.tool[data-tool="plan_task"]');
    assert.equal(await cards.count(), 1, 'only the failed call has a card');
    assert.equal(await cards.getAttribute('class'), 'card tool failed');
    assert.match(await cards.locator('.tool-message').innerText(), /each update needs "milestone"/);
    // in the order it ended: after the plan, before the last text
    assert.deepEqual(await turn.locator('.turn-body > *').evaluateAll((els) => els.map((e) => e.className)), ['card plan', 'card tool failed', 'segment md']);
    clean(problems);
    await context.close();
  });

  test('two subagents at once: each in the card of its call, with its own tool card and text', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Split it #scenario:ui-two');
    await lastTurnDone(page);
    const turn = page.locator('article.turn').last();
    const cards = turn.locator('.turn-body > .card.tool[data-tool="delegate_subagent"]');
    assert.equal(await cards.count(), 2);
    const a = cards.nth(0).locator('section.subagent');
    const b = cards.nth(1).locator('section.subagent');
    assert.equal(await a.getAttribute('data-role'), 'researcher');
    assert.equal(await b.getAttribute('data-role'), 'reviewer');
    assert.equal(await a.getAttribute('data-state'), 'done');
    assert.equal(await b.getAttribute('data-state'), 'done');
    assert.match(await a.locator('.sub-state').innerText(), /^done · 2 steps · 1 tool call/);
    assert.equal(await a.locator('.sub-task').innerText(), 'part A #scenario:ui-part-a');
    assert.deepEqual(await a.locator('.sub-body > *').evaluateAll((els) => els.map((e) => e.dataset.tool || e.className)), ['segment sub-text md', 'search_chunks', 'segment sub-text md']);
    assert.deepEqual(await b.locator('.sub-body > *').evaluateAll((els) => els.map((e) => e.dataset.tool || e.className)), ['list_files', 'segment sub-text md']);
    assert.equal(await a.locator('.card.tool').getAttribute('data-agent'), 'researcher');
    assert.equal(await b.locator('.sub-text').innerText(), 'answer B');
    assert.deepEqual(await turn.locator('.turn-body > .segment').allInnerTexts(), ['Two at once.', 'Both answered.']);
    clean(problems);
    await context.close();
  });

  test('stop while a subagent works: the subagent and its call say they were stopped', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Wait for it #scenario:ui-wait');
    const sub = page.locator('section.subagent');
    await sub.locator('.card.tool[data-tool="search_chunks"] .status.ok').waitFor();
    await page.locator('#send[aria-label="Stop"]').click();
    await lastTurnDone(page, 'cancelled');
    const card = page.locator('.card.tool[data-tool="delegate_subagent"]');
    await card.locator(':scope > details .status.failed').waitFor();
    assert.match(await card.locator(':scope > .tool-message').innerText(), /^stopped: the turn was cancelled/);
    assert.equal(await sub.getAttribute('data-state'), 'cancelled');
    assert.match(await sub.locator('.sub-state').innerText(), /^stopped/);
    assert.equal(await sub.locator('.sub-text').innerText(), 'Thinking.');
    clean(problems);
    await context.close();
  });
});

describe('model output cannot inject script', () => {
  test('<script>, javascript: links and event handlers render as text and never run', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, EMAIL);
    await send(page, 'Try it <img src=x onerror="window.__xss=11"> #scenario:ui-xss');
    await lastTurnDone(page);
    await page.locator('.segment', { hasText: 'Done:' }).waitFor();
    const thread = page.locator('.thread');
    const text = await thread.innerText();
    assert.match(text, /<script>window.__xss = 1; alert\("script"\)<\/script>/);
    assert.match(text, /<img src=x onerror="window.__xss = 2; alert\('img'\)">/);
    assert.match(text, /<svg onload="window.__xss=5">/);
    assert.match(text, /<b onclick="window.__xss=10">bold\?<\/b>/);
    assert.match(text, /Try it <img src=x onerror="window.__xss=11">/);
    // the plan card shows the tool's arguments as text too
    assert.equal(await page.locator('.card.plan .goal').innerText(), '<img src=x onerror="window.__xss=8">');
    const dom = await thread.evaluate((el) => ({
      scripts: el.querySelectorAll('script, iframe, object, embed, img:not(.preview-image), svg:not(.icon), math').length,
      handlers: [...el.querySelectorAll('*')].flatMap((n) => [...n.attributes].filter((a) => /^on/i.test(a.name)).map((a) => `${n.tagName} ${a.name}`)),
      links: [...el.querySelectorAll('.md a')].map((a) => a.getAttribute('href')),
      styles: el.querySelectorAll('[style]:not(.file)').length,
    }));
    assert.equal(dom.scripts, 0, 'no script, frame or foreign image elements');
    assert.deepEqual(dom.handlers, [], 'no event-handler attributes');
    for (const href of dom.links) assert.match(href, /^https:\/\//, `link ${href}`);
    // the javascript: link is text, and the image became a link (never fetched)
    assert.equal(await page.locator('.md p', { hasText: 'click me' }).locator('a').count(), 0);
    assert.equal(await page.locator('.md a', { hasText: 'image: pixel' }).getAttribute('href'), 'https://tracker.example/p.gif?c=secret');
    // hover and click what looks clickable: nothing runs
    await page.locator('.md p', { hasText: 'click me' }).click();
    await page.locator('td', { hasText: 'hover' }).hover();
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    await screenshot(page, 'xss-desktop-light');
    clean(problems);
    await context.close();
  });
});

describe('sidebar', () => {
  test('new chat, rename, search by title, delete with confirmation', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'bob@example.com');
    await send(page, 'Alpha topic #scenario:ui-hello');
    await lastTurnDone(page);
    await page.locator('#new-chat').click();
    await page.locator('.welcome').waitFor();
    assert.equal(new URL(page.url()).pathname, '/');
    await send(page, 'Beta topic #scenario:ui-hello');
    await lastTurnDone(page);
    const items = page.locator('#chats li');
    await page.locator('#chats li', { hasText: 'Alpha topic' }).waitFor();
    assert.equal(await items.count(), 2);
    // rename with Enter
    const beta = page.locator('#chats li', { hasText: 'Beta topic' });
    await beta.hover();
    await beta.locator('button[title="Rename"]').click();
    const input = page.locator('#chats input.rename');
    await input.fill('Budget review');
    await input.press('Enter');
    await page.locator('#chats li', { hasText: 'Budget review' }).waitFor();
    // search by title
    await page.locator('#search').fill('alph');
    await page.locator('#chats li', { hasText: 'Alpha topic' }).waitFor();
    assert.equal(await items.count(), 1);
    await page.locator('#search').fill('');
    assert.equal(await items.count(), 2);
    // opening a chat from the list shows its history
    await page.locator('#chats a', { hasText: 'Alpha topic' }).click();
    await page.locator('.msg.user', { hasText: 'Alpha topic' }).waitFor();
    await page.locator('.segment', { hasText: 'How can I help?' }).waitFor();
    await screenshot(page, 'chat-desktop-light');
    // delete: cancel keeps it, confirm removes it
    const alpha = page.locator('#chats li', { hasText: 'Alpha topic' });
    await alpha.hover();
    await alpha.locator('button[title="Delete"]').click();
    const dialog = page.getByRole('dialog', { name: 'Delete this chat?' });
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /^“Alpha topic #scenario:ui-hello” and its messages will be deleted\. Files you downloaded are kept\.$/m);
    // a modal: the focus is on Cancel, Escape cancels
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Cancel');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await items.count(), 2);
    await alpha.hover();
    await alpha.locator('button[title="Delete"]').click();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await items.count(), 2);
    await alpha.hover();
    await alpha.locator('button[title="Delete"]').click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.locator('#chats li', { hasText: 'Alpha topic' }).waitFor({ state: 'detached' });
    assert.equal(await items.count(), 1);
    await page.locator('.welcome').waitFor(); // the open chat was the deleted one
    // and the server agrees
    const list = await page.evaluate(() => fetch('/api/sessions').then((r) => r.json()));
    assert.deepEqual(list.sessions.map((s) => s.title), ['Budget review']);
    clean(problems);
    await context.close();
  });

  test('a link to a chat that is not there (or not yours): a toast says so, and a new chat is ready', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'bob@example.com');
    await page.goto(`${stack.base}/c/0190a1b2-0000-7000-8000-000000000000`);
    const toast = page.locator('#toast');
    await toast.waitFor();
    assert.equal(await toast.innerText(), 'That chat does not exist (or is not yours).');
    assert.equal(await toast.getAttribute('role'), 'alert');
    await page.locator('.welcome').waitFor();
    assert.equal(new URL(page.url()).pathname, '/');
    // it goes by itself
    await toast.waitFor({ state: 'hidden', timeout: 8000 });
    clean(problems);
    await context.close();
  });

  test('search finds a chat older than the 200 the sidebar lists', async () => {
    stack.addUser('many@example.com');
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'many@example.com');
    // the oldest chat, then 200 newer ones
    const made = await page.evaluate(async () => {
      const csrf = document.cookie.match(/(?:^|;\s*)(?:__Host-)?tusko_csrf=([^;]+)/)[1];
      const post = (title) =>
        fetch('/api/sessions', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: JSON.stringify({ title }) }).then((r) => r.status);
      const codes = [await post('Old Zanzibar notes')];
      for (let i = 0; i < 200; i += 20) codes.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => post(`chat ${i + j}`)))));
      return codes;
    });
    assert.ok(made.length === 201 && made.every((c) => c === 201), JSON.stringify(made));
    await page.reload();
    const items = page.locator('#chats li');
    await page.locator('#chats li', { hasText: 'chat 199' }).waitFor();
    assert.equal(await items.count(), 200);
    assert.equal(await page.locator('#chats li', { hasText: 'Zanzibar' }).count(), 0, 'past the first 200');
    await page.locator('#search').fill('zanzi');
    await page.locator('#chats li', { hasText: 'Old Zanzibar notes' }).waitFor();
    assert.equal(await items.count(), 1);
    await page.locator('#chats a', { hasText: 'Old Zanzibar notes' }).click();
    await page.waitForURL(/\/c\/[0-9a-f-]{36}$/);
    await page.locator('#search').fill('');
    // the opened chat joins the list, marked as the current one
    assert.equal(await items.count(), 201);
    assert.equal(await page.locator('#chats li.current', { hasText: 'Old Zanzibar notes' }).count(), 1);
    clean(problems);
    await context.close();
  });

  test('keyboard: "/" opens the skills menu, Escape closes it; the panel tabs take arrow keys', async () => {
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'bob@example.com');
    const box = page.locator('#prompt');
    await box.focus();
    await page.keyboard.type('/');
    await page.locator('#skills').waitFor();
    // the five built-in skills (tests/e2e/skills.test.mjs covers choosing one)
    await page.locator('#skills', { hasText: '/word-report' }).waitFor();
    for (const n of ['code-review', 'financial-model', 'presentation', 'security-audit', 'word-report']) assert.match(await page.locator('#skills').innerText(), new RegExp(`/${n}\\n`));
    await page.keyboard.press('Escape');
    await page.locator('#skills').waitFor({ state: 'hidden' });
    await page.keyboard.press('Backspace');
    await page.locator('#panel-toggle').click();
    await page.locator('#tab-files[aria-selected="true"]').focus();
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.locator('#tab-trace').getAttribute('aria-selected'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'tab-trace');
    clean(problems);
    await context.close();
  });
});

describe('links and the back button', () => {
  test('back and forward move between chats and the new-chat screen; a link opens its chat', async () => {
    stack.addUser('nav@example.com');
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'nav@example.com');
    const shows = async (path, { user, title }) => {
      await page.waitForURL((u) => u.pathname === path);
      if (user) await page.locator('.thread .msg.user', { hasText: user }).waitFor();
      else await page.locator('.welcome').waitFor();
      assert.equal(await page.title(), title);
      assert.equal(await page.locator('#chats li.current').count(), user ? 1 : 0);
      if (user) assert.equal(await page.locator('#chats li.current').innerText(), user);
    };
    await send(page, 'Alpha nav #scenario:ui-hello');
    await lastTurnDone(page);
    const a = new URL(page.url()).pathname;
    assert.match(a, /^\/c\/[0-9a-f-]{36}$/);
    await page.locator('#new-chat').click();
    await shows('/', { title: 'Tusko' });
    await send(page, 'Beta nav #scenario:ui-hello');
    await lastTurnDone(page);
    const b = new URL(page.url()).pathname;
    await page.goBack();
    await shows('/', { title: 'Tusko' });
    await page.goBack();
    await shows(a, { user: 'Alpha nav #scenario:ui-hello', title: 'Alpha nav #scenario:ui-hello · Tusko' });
    await page.locator('.segment', { hasText: 'How can I help?' }).waitFor();
    await page.goForward();
    await shows('/', { title: 'Tusko' });
    await page.goForward();
    await shows(b, { user: 'Beta nav #scenario:ui-hello', title: 'Beta nav #scenario:ui-hello · Tusko' });
    // a chat opened from the sidebar is a step back too
    await page.locator('#chats a', { hasText: 'Alpha nav' }).click();
    await shows(a, { user: 'Alpha nav #scenario:ui-hello', title: 'Alpha nav #scenario:ui-hello · Tusko' });
    await page.goBack();
    await shows(b, { user: 'Beta nav #scenario:ui-hello', title: 'Beta nav #scenario:ui-hello · Tusko' });
    // a link in a new tab opens the chat it names
    const other = await context.newPage();
    await other.goto(stack.base + a);
    await other.locator('.thread .msg.user', { hasText: 'Alpha nav' }).waitFor();
    assert.equal(await other.locator('#chats li.current').innerText(), 'Alpha nav #scenario:ui-hello');
    clean(problems);
    await context.close();
  });
});

describe('the memory and settings pages', () => {
  test('the sidebar links open them; back and forward go through them and the chat', async () => {
    stack.addUser('views@example.com');
    const { context, page, problems } = await newPage(browser);
    await signIn(page, stack.base, 'views@example.com');
    await send(page, 'Before the pages #scenario:ui-hello');
    await lastTurnDone(page);
    const chatPath = new URL(page.url()).pathname;
    const link = (name) => page.locator('#side-nav a', { hasText: name });
    const current = () => page.locator('#side-nav a[aria-current="page"]').allInnerTexts();
    // memory, by keyboard
    await link('Memory').focus();
    await page.keyboard.press('Enter');
    await page.waitForURL((u) => u.pathname === '/memory');
    const memory = page.locator('#view-memory');
    await memory.locator('.docs .none', { hasText: 'No documents yet' }).waitFor();
    assert.equal(await page.title(), 'Memory · Tusko');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'memory-title');
    assert.deepEqual(await current(), ['Memory']);
    assert.equal(await page.locator('#view-chat').isVisible(), false);
    assert.equal(await page.locator('#panel-toggle').isVisible(), false, "the chat's panel goes with the chat");
    assert.equal(await page.locator('#chats li.current').count(), 0);
    await memory.locator('button.seg[data-section="memories"]').click();
    await memory.locator('.memories .none', { hasText: 'No memories yet' }).waitFor();
    // a file dropped here is not uploaded anywhere
    await dropFiles(page, '#main', [{ name: 'stray.txt', text: 'x', type: 'text/plain' }]);
    assert.equal(await page.locator('.upload-chip').count(), 0);
    assert.equal(new URL(page.url()).pathname, '/memory');
    // settings
    await link('Settings').click();
    await page.waitForURL((u) => u.pathname === '/settings');
    const settings = page.locator('#view-settings');
    await settings.getByRole('heading', { name: 'Settings' }).waitFor();
    assert.equal(await page.title(), 'Settings · Tusko');
    assert.deepEqual(await current(), ['Settings']);
    const dd = (term) => settings.locator(`dt:text-is("${term}") + dd`).innerText();
    assert.equal(await dd('Email'), 'views@example.com');
    assert.match(await dd('Code execution'), /^off: .*missing: OPENSANDBOX_URL, OPENSANDBOX_API_KEY/);
    assert.match(await dd('Browser'), /^off: this server has no browser service configured \(missing: STEEL_URL, STEEL_API_KEY\)$/);
    assert.deepEqual(await settings.locator('.settings-models li').allInnerTexts(), ['openai:gpt-4o-mini (default)', 'anthropic:claude-sonnet-4']);
    // the tools as the server declares them (GET /api/agent): execution is off here
    const row = (name) => settings.locator(`.settings-tools tr[data-tool="${name}"] td`).allInnerTexts();
    assert.deepEqual(await row('write_file'), ['write_file · changes files', 'sandbox', 'off']);
    assert.deepEqual(await row('execute_command'), ['execute_command · changes files', 'sandbox', 'off']);
    assert.deepEqual(await row('read_file'), ['read_file', 'sandbox', 'off']);
    assert.deepEqual(await row('plan_task'), ['plan_task', 'fast', 'offered']);
    assert.deepEqual(await row('browser_navigate'), ['browser_navigate', 'browser', 'off']);
    const declared = await page.evaluate(() => fetch('/api/agent').then((r) => r.json()));
    assert.equal(await settings.locator('.settings-tools tbody tr').count(), declared.tools.length);
    // the theme: set here, the sidebar's choice and the page follow
    await settings.getByLabel('Theme').selectOption('dark');
    assert.equal(await page.locator('#theme').inputValue(), 'dark');
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await screenshot(page, 'settings-desktop-dark');
    await page.locator('#theme').selectOption('light');
    assert.equal(await settings.getByLabel('Theme').inputValue(), 'light');
    // back: memory, then the chat as it was; forward again
    await page.goBack();
    await page.waitForURL((u) => u.pathname === '/memory');
    await memory.locator('.mem-switch').waitFor();
    await page.goBack();
    await page.waitForURL((u) => u.pathname === chatPath);
    await page.locator('.thread .msg.user', { hasText: 'Before the pages' }).waitFor();
    await page.locator('.segment', { hasText: 'How can I help?' }).waitFor();
    assert.deepEqual(await current(), []);
    assert.equal(await page.locator('#panel-toggle').isVisible(), true);
    await page.goForward();
    await page.goForward();
    await page.waitForURL((u) => u.pathname === '/settings');
    await settings.locator('dt', { hasText: 'Email' }).waitFor();
    // and a new message from the chat still streams in after all that
    await page.goBack();
    await page.goBack();
    await page.waitForURL((u) => u.pathname === chatPath);
    await page.locator('.segment', { hasText: 'How can I help?' }).waitFor();
    await send(page, 'After the pages #scenario:ui-hello');
    await page.locator('article.turn[data-state="done"]').nth(1).waitFor();
    assert.equal(await page.locator('.thread .msg.user').count(), 2);
    clean(problems);
    await context.close();
  });

  test('a link to a page, signed out: sign in, and the page is shown', async () => {
    const { context, page, problems } = await newPage(browser);
    await page.goto(stack.base + '/settings');
    await page.locator('#email').fill('views@example.com');
    await page.locator('#password').fill('correct horse battery');
    await page.locator('#signin-submit').click();
    await page.locator('#view-settings dt', { hasText: 'Email' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/settings');
    assert.equal(await page.locator('#view-chat').isVisible(), false);
    clean(problems);
    await context.close();
  });

  test('on a phone, in dark: the pages from the drawer, nothing wider than the screen', async () => {
    const { context, page, problems } = await newPage(browser, { viewport: 'phone', theme: 'dark' });
    await signIn(page, stack.base, 'views@example.com');
    for (const [name, path] of [
      ['Memory', '/memory'],
      ['Settings', '/settings'],
    ]) {
      await page.locator('#menu-toggle').click();
      await page.locator('body.drawer-open').waitFor();
      await page.locator('#side-nav a', { hasText: name }).click();
      await page.waitForURL((u) => u.pathname === path);
      await page.locator('body:not(.drawer-open)').waitFor();
      await page.locator(`#view-${name.toLowerCase()} h1`).waitFor();
      if (name === 'Memory') await page.locator('#view-memory .docs .none').waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${name}: the page scrolls sideways by ${overflow}px`);
      await screenshot(page, `${name.toLowerCase()}-phone-dark`);
    }
    clean(problems);
    await context.close();
  });
});

describe('a long chat', () => {
  const N = 65; // three pages of 30: 36–65 on opening, then 6–65, then all
  let sid;
  let total = N; // each test adds a turn at the end
  const question = (i) => `Question ${i} #scenario:ui-short`;

  before(async () => {
    // the turns go through the API (a token of the user's), one after another
    const email = 'long@example.com';
    stack.addUser(email);
    const t = runProgram('tusko', ['token', 'create', '--email', email], { env: { DATABASE_URL: stack.pg.url } });
    assert.equal(t.code, 0, t.stderr);
    const auth = { authorization: `Bearer ${t.stdout.trim()}` };
    const made = await api(stack.base, '/api/sessions', { json: { title: 'A long chat' }, headers: auth });
    assert.equal(made.status, 201, made.text);
    sid = made.json.id;
    for (let i = 1; i <= N; i++) {
      const r = await api(stack.base, `/api/sessions/${sid}/messages`, { json: { content: question(i) }, headers: auth });
      assert.equal(r.status, 202, r.text);
      const end = await sse(stack.base, `/api/sessions/${sid}/events?turns=1`, {
        headers: auth,
        until: (e) => e.event === 'turn_end' && e.json.turn_id === r.json.turn_id,
      });
      assert.equal(end.events.at(-1).json.state, 'done', `turn ${i}`);
    }
  });

  // The questions shown, in order, and where the one named is on the screen.
  const bubbles = (page) => page.locator('.thread .msg.user .bubble').allInnerTexts();
  const topOf = (page, i) => page.locator('.thread .msg.user .bubble', { hasText: new RegExp(`^Question ${i} #`) }).evaluate((el) => el.getBoundingClientRect().top);
  const range = (a, b) => Array.from({ length: b - a + 1 }, (_, k) => question(a + k));

  for (const [viewport, theme, how] of [
    ['desktop', 'light', 'keyboard'],
    ['phone', 'dark', 'tap'],
  ])
    test(`opens at its last 30 turns; "Show earlier messages" adds the earlier ones above without moving the turn on screen (${viewport}, ${theme}, ${how})`, async () => {
      const { context, page, problems } = await newPage(browser, { viewport, theme });
      await signIn(page, stack.base, 'long@example.com');
      await page.goto(`${stack.base}/c/${sid}`);
      await page.locator('.thread .msg.user').nth(29).waitFor();
      await page.locator('.thread article.turn[data-state="done"] .segment', { hasText: `Short answer to ${question(total)}` }).waitFor();
      await page.waitForFunction(() => [...document.querySelectorAll('.thread article.turn .segment')].every((el) => el.textContent.trim()));
      assert.deepEqual(await bubbles(page), range(total - 29, total), 'the last 30 turns');
      assert.equal(await page.locator('.thread article.turn').count(), 30);
      const btn = page.getByRole('button', { name: 'Show earlier messages' });
      await btn.waitFor();
      for (let pageNo = 1; pageNo <= 2; pageNo++) {
        // the reader scrolls to the top and reads the first turn shown
        const first = pageNo === 1 ? total - 29 : total - 59;
        await page.locator('#messages').evaluate((el) => (el.scrollTop = 0));
        await page.waitForFunction(() => document.querySelector('#messages').scrollTop === 0);
        const top0 = await topOf(page, first);
        if (pageNo === 1) await screenshot(page, `earlier-${viewport}-${theme}`);
        if (how === 'keyboard') {
          await btn.focus();
          await page.keyboard.press('Enter');
        } else {
          await btn.click();
        }
        const want = pageNo === 1 ? range(total - 59, total) : range(1, total);
        await page.waitForFunction((n) => document.querySelectorAll('.thread .msg.user').length === n, want.length);
        assert.deepEqual(await bubbles(page), want, `page ${pageNo}: earlier turns above, in order`);
        // the earlier answers are rendered, and what the reader was reading has not moved
        assert.equal(await page.locator('.thread article.turn .segment').count(), want.length);
        await page.waitForFunction(() => [...document.querySelectorAll('.thread article.turn .segment')].every((el) => el.textContent.trim()));
        assert.ok(Math.abs((await topOf(page, first)) - top0) <= 1, `page ${pageNo}: the turn on screen moved from ${top0} to ${await topOf(page, first)}`);
        assert.ok((await page.locator('#messages').evaluate((el) => el.scrollTop)) > 0, 'the earlier turns are above, out of sight');
        if (pageNo === 1) {
          assert.ok(await btn.isVisible(), 'more earlier turns: the button stays');
          if (how === 'keyboard') assert.equal(await page.evaluate(() => document.activeElement.className), 'btn small earlier-btn', 'the focus stays on the button');
        }
      }
      assert.equal(await page.locator('.earlier-btn').isVisible(), false, 'no earlier turns: the button is gone');
      assert.notEqual(await page.evaluate(() => document.activeElement.tagName), 'BODY', 'the focus is not dropped');
      assert.equal(await page.locator('#announcer').innerText(), 'Earlier messages shown: this is the start of the chat.');
      if (viewport === 'phone') {
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `page scrolls sideways by ${overflow}px`);
      }
      // the live part still works: a new message streams in at the end
      total++;
      await send(page, question(total));
      await page.locator('.thread article.turn[data-state="done"] .segment', { hasText: `Short answer to ${question(total)}` }).waitFor();
      assert.deepEqual(await bubbles(page), range(1, total));
      clean(problems);
      await context.close();
    });
});

describe('screens', () => {
  for (const viewport of ['desktop', 'phone'])
    for (const theme of ['light', 'dark'])
      test(`the chat on a ${viewport} in ${theme}`, async () => {
        const { context, page, problems } = await newPage(browser, { viewport, theme });
        await signIn(page, stack.base, EMAIL);
        stack.ms.addScenario('default', scenarios['ui-markdown']);
        await send(page, 'Show me a table and some code');
        await lastTurnDone(page);
        await page.locator('.codeblock').last().waitFor();
        // nothing is wider than the screen
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `page scrolls sideways by ${overflow}px`);
        await screenshot(page, `chat-${viewport}-${theme}`);
        if (viewport === 'phone') {
          await page.locator('#menu-toggle').click();
          await page.locator('body.drawer-open').waitFor();
          await page.locator('#chats li').first().waitFor();
          await screenshot(page, `sidebar-phone-${theme}`);
        }
        clean(problems);
        await context.close();
      });
});
