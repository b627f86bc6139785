// tests/lib/telegram-standin.mjs — a stand-in for the Telegram Bot API, for
// tests (Telegram's servers are never reached from here). It speaks the parts
// tusko uses, the way the Bot API documentation describes them: POST
// /bot<token>/<method> with a JSON body, answers {ok: true, result} or
// {ok: false, error_code, description, parameters?: {retry_after}}:
//
// - getMe: the bot {id, is_bot, first_name, username}
// - getUpdates {offset, timeout, allowed_updates}: the updates with
//   update_id >= offset (older ones are forgotten, as Telegram confirms them),
//   waiting up to timeout seconds for one; 409 while api.conflict is set
// - sendMessage {chat_id, text, parse_mode?, link_preview_options?}: recorded
//   with the time it came; text over 4096 UTF-16 units is 400 "message is too
//   long"; with parse_mode HTML, an unknown tag or a bare '&' / '<' is 400
//   "can't parse entities"; scripted failures per chat come first
//   (api.failNext(chat, {error_code, description, retry_after?}))
// - a wrong token: 401 Unauthorized; an unknown method: 404 Not Found
//
//   const tg = await startTelegramStandin({ token });
//   tg.url                           // TELEGRAM_API_URL
//   tg.message(chatId, text, {type, username})   // a user writes to the bot
//   tg.sent                          // [{chat_id, text, parse_mode, link_preview_options, at}]
//   tg.calls                         // [{method, body, at}] every call
//   await tg.close();
import http from 'node:http';

const TAGS = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'a', 'code', 'pre', 'span', 'tg-spoiler', 'blockquote', 'tg-emoji']);

function utf16Length(s) {
  return s.length; // JavaScript strings are UTF-16
}

// Telegram's HTML parse check, as far as tusko's text needs it: every '<'
// starts a known tag, every '&' a known entity.
function htmlProblem(text) {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '<') {
      const m = /^<\/?([a-z-]+)[^<>]*>/.exec(text.slice(i));
      if (!m || !TAGS.has(m[1])) return `Bad Request: can't parse entities: Unsupported start tag at byte offset ${i}`;
    } else if (text[i] === '&') {
      if (!/^&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);/i.test(text.slice(i))) return `Bad Request: can't parse entities: Character entity expected at byte offset ${i}`;
    }
  }
  return null;
}

export async function startTelegramStandin({ token, username = 'tusko_test_bot' } = {}) {
  const api = {
    sent: [],
    calls: [],
    conflict: false,
    updates: [], // pending, oldest first
    nextUpdateId: 1000,
    failures: new Map(), // chat -> [failure]
    waiters: new Set(),
  };
  let msgId = 1;
  api.message = (chatId, text, { type = 'private', username: from = 'someone' } = {}) => {
    api.updates.push({ update_id: api.nextUpdateId++, message: { message_id: msgId++, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type }, from: { id: chatId, is_bot: false, username: from }, text } });
    for (const w of api.waiters) w();
  };
  api.failNext = (chat, failure) => {
    const q = api.failures.get(chat) || [];
    q.push(failure);
    api.failures.set(chat, q);
  };
  api.to = (chat) => api.sent.filter((m) => m.chat_id === chat);
  // with a webhook set (setWebhook), a message is POSTed to it as Telegram does:
  // one Update, the secret in X-Telegram-Bot-Api-Secret-Token; the answer's status
  api.deliver = async (chatId, text, { type = 'private', username: from = 'someone', secret, updateId } = {}) => {
    if (!api.webhook) throw new Error('no webhook is set');
    const update = { update_id: updateId ?? api.nextUpdateId++, message: { message_id: msgId++, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type }, from: { id: chatId, is_bot: false, username: from }, text } };
    const headers = { 'content-type': 'application/json' };
    const s = secret === undefined ? api.webhook.secret_token : secret;
    if (s !== null) headers['x-telegram-bot-api-secret-token'] = s;
    const r = await fetch(api.webhook.url, { method: 'POST', headers, body: JSON.stringify(update) });
    return r.status;
  };

  const answer = (res, status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const fail = (res, code, description, extra = {}) => answer(res, code, { ok: false, error_code: code, description, ...extra });

  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(req.url);
      if (!m) return fail(res, 404, 'Not Found');
      if (m[1] !== token) return fail(res, 401, 'Unauthorized');
      let body = {};
      try {
        body = raw ? JSON.parse(raw) : {};
      } catch {
        return fail(res, 400, 'Bad Request: invalid JSON');
      }
      const method = m[2];
      api.calls.push({ method, body, at: Date.now() });
      if (method === 'getMe') return answer(res, 200, { ok: true, result: { id: 4242, is_bot: true, first_name: 'Tusko test', username } });
      if (method === 'getUpdates') {
        if (api.conflict) return fail(res, 409, 'Conflict: can\'t use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first');
        const offset = Number(body.offset || 0);
        api.updates = api.updates.filter((u) => u.update_id >= offset);
        if (!api.updates.length && body.timeout > 0) {
          await new Promise((ok) => {
            const done = () => {
              api.waiters.delete(done);
              clearTimeout(t);
              ok();
            };
            const t = setTimeout(done, Math.min(body.timeout, 50) * 1000);
            api.waiters.add(done);
            req.on('close', done);
          });
        }
        return answer(res, 200, { ok: true, result: api.updates.slice(0, 100) });
      }
      if (method === 'setWebhook') {
        if (typeof body.url !== 'string' || !body.url) return fail(res, 400, 'Bad Request: bad webhook: URL is empty');
        api.webhook = { url: body.url, secret_token: body.secret_token, allowed_updates: body.allowed_updates };
        api.conflict = true; // getUpdates is refused while a webhook is set, as Telegram does
        return answer(res, 200, { ok: true, result: true, description: 'Webhook was set' });
      }
      if (method === 'deleteWebhook') {
        api.webhook = null;
        api.conflict = false;
        return answer(res, 200, { ok: true, result: true, description: 'Webhook was deleted' });
      }
      if (method === 'sendMessage') {
        const chat = body.chat_id;
        const rec = { chat_id: chat, text: body.text, parse_mode: body.parse_mode, link_preview_options: body.link_preview_options, at: Date.now() };
        const q = api.failures.get(chat);
        if (q && q.length) {
          const f = q.shift();
          api.sent.push({ ...rec, refused: f.error_code });
          return fail(res, f.error_code, f.description, f.retry_after ? { parameters: { retry_after: f.retry_after } } : {});
        }
        if (typeof body.text !== 'string' || !body.text.length) return fail(res, 400, 'Bad Request: message text is empty');
        if (utf16Length(body.text) > 4096) return fail(res, 400, 'Bad Request: message is too long');
        if (body.parse_mode === 'HTML') {
          const p = htmlProblem(body.text);
          if (p) {
            api.sent.push({ ...rec, refused: 400 });
            return fail(res, 400, p);
          }
        }
        api.sent.push(rec);
        return answer(res, 200, { ok: true, result: { message_id: msgId++, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: 'private' }, text: body.text } });
      }
      return fail(res, 404, 'Not Found: method not found');
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  api.url = `http://127.0.0.1:${server.address().port}`;
  api.close = () =>
    new Promise((ok) => {
      for (const w of api.waiters) w();
      server.closeAllConnections();
      server.close(() => ok());
    });
  return api;
}
