// Telegram notifications against a local Bot API stand-in
// (tests/lib/telegram-standin.mjs), a real Postgres and the scripted model:
// off without a token; linking with one-time codes (good, reused, wrong,
// expired, a group chat), /stop; the test message; a long text with special
// characters split under 4,096 and escaped, in order; 429 honoured exactly
// once after retry_after; a refused entity resent once as plain text; a
// schedule's outcome sent; 403 marking the link inactive; the token in no log.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { freePort, runProgram, startPostgres, startProgram, stopAll } from '../../lib/harness.mjs';
import { startTelegramStandin } from '../../lib/telegram-standin.mjs';
import { api, makeUser, newSession, startModels, turn, tuskoEnv, until } from '../agent/lib.mjs';

const TOKEN = '123456789:AAH-test-token-Zx9yW8vU7tS6rQ5pO4nM';
const ALICE_CHAT = 710001;

const unescape = (s) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

describe('telegram', () => {
  let ms, pg, tg, tusko, base, alice;
  const tapi = (path, opts = {}) => api(base, `/api/notify/telegram${path}`, { headers: alice.auth, ...opts });
  const replyTo = (chat, re, what) => until(() => tg.to(chat).find((m) => !m.refused && re.test(m.text)), { timeoutMs: 15000, what });

  before(async () => {
    ms = await startModels({
      scenarios: {
        // notify_user twice in one turn: the first is queued, the second refused
        notify: {
          on_exhausted: 'repeat',
          steps: [
            { tool_calls: [{ name: 'notify_user', arguments: { text: 'The report is ready: 3 <new> items & more' } }, { name: 'notify_user', arguments: { text: 'a second one' } }] },
            { text: 'Sent: {{tool_result}}' },
          ],
        },
      },
    });
    pg = await startPostgres('telegram');
    tg = await startTelegramStandin({ token: TOKEN });
    tusko = await startProgram('tusko', { env: tuskoEnv(pg, ms, { TELEGRAM_BOT_TOKEN: TOKEN, TELEGRAM_API_URL: tg.url, TELEGRAM_POLL_TIMEOUT: '1s' }) });
    base = tusko.url;
    alice = makeUser(pg, `alice-${process.pid}@example.test`);
  });
  after(async () => {
    await stopAll();
    await tg.close();
    await ms.close();
  });

  test('without TELEGRAM_BOT_TOKEN the feature is off and says so', async () => {
    const off = await startProgram('tusko', { env: tuskoEnv(pg, ms) });
    const st = await api(off.url, '/api/notify/telegram', { headers: alice.auth });
    assert.equal(st.status, 200);
    assert.equal(st.json.enabled, false);
    const l = await api(off.url, '/api/notify/telegram/link', { method: 'POST', headers: alice.auth });
    assert.equal(l.status, 503);
    assert.equal(l.json.code, 'TELEGRAM_OFF');
    await off.stop();
  });

  test('linking: a one-time code links a private chat once; reused, wrong and expired codes link nothing', async () => {
    const st0 = await tapi('');
    assert.equal(st0.json.enabled, true);
    assert.equal(st0.json.link, null);
    const r = await tapi('/link', { method: 'POST' });
    assert.equal(r.status, 201, r.text);
    assert.match(r.json.code, /^[A-Za-z0-9_-]{22,}$/); // 16 random bytes, base64url
    assert.equal(r.json.link, `https://t.me/tusko_test_bot?start=${r.json.code}`);
    assert.ok(Date.parse(r.json.expires_at) - Date.now() > 9 * 60e3);
    // a group chat is refused
    tg.message(-100500, `/start ${r.json.code}`, { type: 'group' });
    await replyTo(-100500, /private chat/, 'the group refusal');
    tg.message(ALICE_CHAT, `/start ${r.json.code}`, { username: 'alice_tg' });
    const ok = await replyTo(ALICE_CHAT, /^Linked to the Tusko account a\*\*\*@example\.test\./, 'the confirmation');
    assert.equal(ok.parse_mode, 'HTML');
    const st = (await tapi('')).json;
    assert.equal(st.bot, 'tusko_test_bot');
    assert.equal(st.link.active, true);
    assert.equal(st.link.username, 'alice_tg');
    // the same code again, from another chat: nothing
    tg.message(710002, r.json.code);
    await replyTo(710002, /wrong, already used or expired/, 'the reuse refusal');
    // a wrong code
    tg.message(710003, '/start AAAAAAAAAAAAAAAAAAAAAA');
    await replyTo(710003, /wrong, already used or expired/, 'the wrong-code refusal');
    // an expired one (its ten minutes gone by)
    const e = await tapi('/link', { method: 'POST' });
    pg.query(`UPDATE telegram_link_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`);
    tg.message(710004, e.json.code);
    await replyTo(710004, /wrong, already used or expired/, 'the expired refusal');
    assert.deepEqual(pg.rows('SELECT chat_id FROM telegram_links'), [[String(ALICE_CHAT)]]);
  });

  test('the test message; a long text with special characters split under 4,096 in order and escaped', async () => {
    const t = await tapi('/test', { method: 'POST' });
    assert.equal(t.status, 202);
    const m = await replyTo(ALICE_CHAT, /^A test message from Tusko/, 'the test message');
    assert.deepEqual(m.link_preview_options, { is_disabled: true });
    const para = (k) => `Paragraph ${k}: a < b && c > d, <b>not bold</b> ` + 'word '.repeat(300 + k * 40);
    const text = [0, 1, 2, 3, 4, 5].map(para).join('\n\n');
    const before = tg.to(ALICE_CHAT).length;
    pg.query(`INSERT INTO telegram_outbox (user_id, text) SELECT id, '${text.replace(/'/g, "''")}' FROM users WHERE email = '${alice.email}'`);
    const parts = await until(() => {
      const got = tg.to(ALICE_CHAT).slice(before).filter((x) => !x.refused);
      return got.length && unescape(got.map((x) => x.text).join('\n\n')).length >= text.trim().length - 10 ? got : null;
    }, { timeoutMs: 20000, what: 'the parts' });
    assert.ok(parts.length >= 3, `${parts.length} parts`);
    for (const p of parts) {
      assert.ok(p.text.length <= 4096, `a part of ${p.text.length}`);
      assert.equal(p.parse_mode, 'HTML');
      assert.ok(!/<b>/.test(p.text) && /&lt;b&gt;/.test(p.text), 'escaped');
    }
    // cut at paragraph ends, in order, nothing lost (trailing spaces aside)
    const norm = (x) => x.replace(/ +\n/g, '\n').trimEnd();
    assert.equal(norm(unescape(parts.map((p) => p.text).join('\n\n'))), norm(text));
    // each cut at a paragraph's end: every part but the last ends a paragraph
    for (const p of parts.slice(0, -1)) assert.ok(text.includes(`${unescape(p.text)} \n\n`), 'cut at a paragraph end');
    for (let i = 1; i < parts.length; i++) assert.ok(parts[i].at - parts[i - 1].at >= 900, 'paced a second apart');
  });

  test('429 waits retry_after and is retried exactly once; a refused entity is resent once as plain text', async () => {
    tg.failNext(ALICE_CHAT, { error_code: 429, description: 'Too Many Requests: retry after 2', retry_after: 2 });
    const n0 = tg.to(ALICE_CHAT).length;
    await tapi('/test', { method: 'POST' });
    const got = await until(() => {
      const xs = tg.to(ALICE_CHAT).slice(n0);
      return xs.length >= 2 && !xs.at(-1).refused ? xs : null;
    }, { timeoutMs: 20000, what: 'the retry' });
    await new Promise((ok) => setTimeout(ok, 1500));
    const all = tg.to(ALICE_CHAT).slice(n0);
    assert.deepEqual(all.map((x) => x.refused || 200), [429, 200]);
    assert.ok(got[1].at - got[0].at >= 2000, `retried after ${got[1].at - got[0].at} ms`);
    assert.equal(got[1].text, got[0].text);
    // the server refuses the HTML once: the same text goes again without parse_mode
    tg.failNext(ALICE_CHAT, { error_code: 400, description: "Bad Request: can't parse entities: Unsupported start tag" });
    const n1 = tg.to(ALICE_CHAT).length;
    await tapi('/test', { method: 'POST' });
    const p = await until(() => {
      const xs = tg.to(ALICE_CHAT).slice(n1);
      return xs.length >= 2 ? xs : null;
    }, { timeoutMs: 15000, what: 'the plain resend' });
    assert.equal(p[0].parse_mode, 'HTML');
    assert.equal(p[1].parse_mode, undefined);
    assert.match(p[1].text, /^A test message from Tusko/);
  });

  test("a schedule's outcome is sent as its notify says", async () => {
    const s = await api(base, '/api/schedules', { headers: alice.auth, json: { name: 'digest <weekly>', prompt: 'digest #scenario:text', cron: '0 6 * * *', notify: 'always' } });
    assert.equal(s.status, 201, s.text);
    assert.equal((await api(base, `/api/schedules/${s.json.id}/run`, { method: 'POST', headers: alice.auth })).status, 202);
    const m = await replyTo(ALICE_CHAT, /^Schedule "digest &lt;weekly&gt;" succeeded \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)\n\nHello! This is a scripted reply/, 'the outcome');
    assert.equal(m.parse_mode, 'HTML');
    // notify 'failure' (the default) sends nothing for a success
    const q = await api(base, '/api/schedules', { headers: alice.auth, json: { name: 'quiet', prompt: 'q #scenario:text', cron: '0 6 * * *' } });
    const n = tg.to(ALICE_CHAT).length;
    await api(base, `/api/schedules/${q.json.id}/run`, { method: 'POST', headers: alice.auth });
    await until(async () => (await api(base, `/api/schedules/${q.json.id}/runs`, { headers: alice.auth })).json.runs.some((r) => r.status === 'succeeded'), { what: 'the quiet run' });
    await new Promise((ok) => setTimeout(ok, 1500));
    assert.equal(tg.to(ALICE_CHAT).length, n);
  });

  test('notify_user: a turn sends one message to the linked chat, escaped; a second in the same turn is refused', async () => {
    const sid = await newSession(base, alice);
    const before = tg.to(ALICE_CHAT).length;
    const t = await turn(base, alice, sid, 'tell me on telegram #scenario:notify');
    assert.equal(t.end.state, 'done');
    const ends = t.events.filter((e) => e.event === 'tool_end' && e.json.name === 'notify_user').map((e) => [e.json.ok, e.json.result]);
    assert.deepEqual(ends, [
      [true, "queued for the user's Telegram chat (41 characters)"],
      [false, 'a message was sent already in this turn (one a turn)'],
    ]);
    const m = await replyTo(ALICE_CHAT, /^The report is ready/, 'the notify_user message');
    assert.equal(m.text, 'The report is ready: 3 &lt;new&gt; items &amp; more');
    await new Promise((ok) => setTimeout(ok, 1500));
    assert.equal(tg.to(ALICE_CHAT).length, before + 1, 'exactly one message');
    assert.equal(pg.rows(`SELECT count(*) FROM telegram_outbox WHERE turn_id IS NOT NULL`)[0][0], "1");
  });

  test('alert_after: three failed runs in a row send one alert and, with pause_after_alert, pause the schedule', async () => {
    const bad = await api(base, '/api/schedules', { headers: alice.auth, json: { prompt: 'x', cron: '0 6 * * *', alert_after: 101 } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /alert_after: a whole number from 0 \(no alerts\) to 100/);
    const s = await api(base, '/api/schedules', { headers: alice.auth, json: { name: 'flaky', prompt: 'f #scenario:http-500', cron: '0 6 * * *', notify: 'never', alert_after: 3, pause_after_alert: true } });
    assert.equal(s.status, 201, s.text);
    assert.deepEqual([s.json.alert_after, s.json.pause_after_alert, s.json.paused_reason], [3, true, null]);
    const id = s.json.id;
    const failedRuns = async () => (await api(base, `/api/schedules/${id}/runs`, { headers: alice.auth })).json.runs.filter((r) => r.status === 'failed').length;
    for (let i = 1; i <= 3; i++) {
      const rn = await api(base, `/api/schedules/${id}/run`, { method: 'POST', headers: alice.auth });
      assert.equal(rn.status, 202, rn.text);
      await until(async () => (await failedRuns()) >= i, { timeoutMs: 30000, what: `failed run ${i}` });
      if (i < 3) assert.equal((await api(base, `/api/schedules/${id}`, { headers: alice.auth })).json.paused, false, `not paused after ${i}`);
    }
    const alert = await replyTo(ALICE_CHAT, /^Alert: schedule "flaky" failed 3 times in a row/, 'the alert');
    assert.match(alert.text, /It is paused now; resume it in Schedules\.$/);
    const got = (await api(base, `/api/schedules/${id}`, { headers: alice.auth })).json;
    assert.equal(got.paused, true);
    assert.equal(got.paused_reason, 'paused after 3 failed runs in a row');
    // a fourth failure (run now works while paused) sends no second alert
    await api(base, `/api/schedules/${id}/run`, { method: 'POST', headers: alice.auth });
    await until(async () => (await failedRuns()) >= 4, { timeoutMs: 30000, what: 'failed run 4' });
    await new Promise((ok) => setTimeout(ok, 1500));
    assert.equal(tg.to(ALICE_CHAT).filter((m) => /^Alert: schedule "flaky"/.test(m.text)).length, 1, 'one alert a streak');
    // resuming clears the reason
    const res = await api(base, `/api/schedules/${id}`, { method: 'PATCH', headers: alice.auth, json: { paused: false } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([res.json.paused, res.json.paused_reason], [false, null]);
    const off = await api(base, `/api/schedules/${id}`, { method: 'PATCH', headers: alice.auth, json: { alert_after: 0, pause_after_alert: 'yes' } });
    assert.equal(off.status, 400);
    assert.match(off.json.message, /pause_after_alert: true or false/);
  });

  test('403 (the bot blocked) marks the link inactive; /stop unlinks; the token is in no log', async () => {
    tg.failNext(ALICE_CHAT, { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
    await tapi('/test', { method: 'POST' });
    const st = await until(async () => {
      const j = (await tapi('')).json;
      return j.link && j.link.active === false ? j : null;
    }, { what: 'the link inactive' });
    assert.match(st.link.inactive_reason, /403 Forbidden: bot was blocked by the user/);
    const t = await tapi('/test', { method: 'POST' });
    assert.equal(t.status, 409);
    assert.equal(t.json.code, 'NOT_LINKED');
    // linking again makes it active; /stop unlinks
    const r = await tapi('/link', { method: 'POST' });
    tg.message(ALICE_CHAT, `/start ${r.json.code}`);
    await until(async () => (await tapi('')).json.link?.active === true, { what: 'relinked' });
    tg.message(ALICE_CHAT, '/stop');
    await replyTo(ALICE_CHAT, /^Unlinked/, 'the unlink');
    assert.equal((await tapi('')).json.link, null);
    // the token: in no log line (the calls carried it, in their URLs only)
    await tusko.stop();
    const log = fs.readFileSync(tusko.logPath, 'utf8');
    assert.ok(log.includes('telegram'), 'the log has telegram lines');
    assert.ok(!log.includes(TOKEN) && !log.includes(TOKEN.split(':')[1]), 'the token is not in the log');
    assert.ok(tg.calls.some((c) => c.method === 'getUpdates' && c.body.timeout === 1));
  });
});

describe('telegram by webhook', () => {
  const SECRET = 'wh_Secret-0123456789abcdefXYZ';
  let ms, pg, tg, tusko, base, carol;
  before(async () => {
    ms = await startModels({});
    pg = await startPostgres('telegram_webhook');
    tg = await startTelegramStandin({ token: TOKEN });
    const port = await freePort();
    tusko = await startProgram('tusko', {
      env: tuskoEnv(pg, ms, { TELEGRAM_BOT_TOKEN: TOKEN, TELEGRAM_API_URL: tg.url, TELEGRAM_WEBHOOK_SECRET: SECRET, TUSKO_LISTEN: `127.0.0.1:${port}`, TUSKO_PUBLIC_URL: `http://127.0.0.1:${port}/` }),
    });
    base = tusko.url;
    carol = makeUser(pg, `carol-${process.pid}@example.test`);
  });
  after(async () => {
    await stopAll();
    await tg.close();
    await ms.close();
  });

  test('the webhook is set with the secret; a code delivered by it links the chat once; no polling', async () => {
    await until(() => tg.webhook, { what: 'setWebhook' });
    assert.deepEqual(tg.webhook, { url: `${base}/api/notify/telegram/webhook`, secret_token: SECRET, allowed_updates: ['message'] });
    const code = (await api(base, '/api/notify/telegram/link', { method: 'POST', headers: carol.auth })).json.code;
    assert.equal(await tg.deliver(720001, `/start ${code}`, { username: 'carol_tg', updateId: 5000 }), 200);
    await until(() => tg.to(720001).find((m) => /^Linked to the Tusko account/.test(m.text)), { what: 'the confirmation' });
    assert.equal((await api(base, '/api/notify/telegram', { headers: carol.auth })).json.link.username, 'carol_tg');
    // Telegram delivering the same update again changes nothing: no second reply
    assert.equal(await tg.deliver(720001, `/start ${code}`, { updateId: 5000 }), 200);
    await new Promise((ok) => setTimeout(ok, 1000));
    assert.equal(tg.to(720001).length, 1);
    assert.ok(!tg.calls.some((c) => c.method === 'getUpdates'), 'no getUpdates in webhook mode');
  });

  test('a call without the secret, with a wrong one or with a body that is not an Update does nothing', async () => {
    const code = (await api(base, '/api/notify/telegram/link', { method: 'POST', headers: carol.auth })).json.code;
    assert.equal(await tg.deliver(720002, `/start ${code}`, { secret: null }), 401);
    assert.equal(await tg.deliver(720002, `/start ${code}`, { secret: SECRET.slice(0, -1) + 'Q' }), 401);
    assert.equal(await tg.deliver(720002, `/start ${code}`, { secret: SECRET + 'x' }), 401);
    const bad = await fetch(`${base}/api/notify/telegram/webhook`, { method: 'POST', headers: { 'x-telegram-bot-api-secret-token': SECRET, 'content-type': 'application/json' }, body: '[1,2]' });
    assert.equal(bad.status, 400);
    await new Promise((ok) => setTimeout(ok, 1000));
    assert.equal(tg.to(720002).length, 0, 'nothing answered');
    assert.equal((await api(base, '/api/notify/telegram', { headers: carol.auth })).json.link.username, 'carol_tg', 'still the first chat');
    // the code is still good for a call with the secret
    assert.equal(await tg.deliver(720002, `/start ${code}`, { updateId: 5001 }), 200);
    await until(() => tg.to(720002).find((m) => /^Linked to the Tusko account/.test(m.text)), { what: 'the second link' });
  });

  test('TELEGRAM_WEBHOOK_SECRET without TUSKO_PUBLIC_URL, or of bad characters, stops the start with a message', async () => {
    const env = { ...tuskoEnv(pg, ms, { TELEGRAM_BOT_TOKEN: TOKEN, TELEGRAM_API_URL: tg.url }) };
    delete env.TUSKO_PUBLIC_URL;
    let r = runProgram('tusko', ['serve'], { env: { ...env, TELEGRAM_WEBHOOK_SECRET: SECRET }, timeoutMs: 20000 });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /TELEGRAM_WEBHOOK_SECRET is set but TUSKO_PUBLIC_URL is not/);
    r = runProgram('tusko', ['serve'], { env: { ...env, TELEGRAM_WEBHOOK_SECRET: 'has space', TUSKO_PUBLIC_URL: 'http://127.0.0.1:9' }, timeoutMs: 20000 });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /TELEGRAM_WEBHOOK_SECRET must be 1 to 256 characters/);
  });
});
