// Helpers for the agent's integration tests: a tusko wired to the scripted
// model server (in this process, so tests read what it recorded), optionally a
// real tusko-sandboxd, users with tokens, and turns followed to their end.
import assert from 'node:assert/strict';

import { api, runProgram, sleep, sse, startPostgres, startProgram } from '../../lib/harness.mjs';
import { startModelServer } from '../../model-server/server.mjs';

export const MODELS = 'openai:gpt-4o-mini,anthropic:claude-sonnet-4';

export async function startModels(opts = {}) {
  return startModelServer({ scenarios: opts.scenarios || {}, ...opts });
}

export function tuskoEnv(pg, ms, env = {}) {
  return {
    DATABASE_URL: pg.url,
    TUSKO_LISTEN: '127.0.0.1:0',
    TUSKO_MODELS: MODELS,
    OPENAI_BASE_URL: `${ms.url}/v1`,
    OPENAI_API_KEY: 'sk-test-openai',
    ANTHROPIC_BASE_URL: ms.url,
    ANTHROPIC_API_KEY: 'sk-test-anthropic',
    CHAT_RATE_LIMIT_MAX: '1000',
    ...env,
  };
}

// Starts tusko on pg (a fresh database when not given) against the model server.
export async function startTusko(ms, { pg, env = {}, tag = 'agent' } = {}) {
  pg = pg || (await startPostgres(tag));
  const full = tuskoEnv(pg, ms, env);
  const tusko = await startProgram('tusko', { env: full });
  return { tusko, pg, env: full };
}

let userCounter = 0;
// A user with a personal API token: { id, email, auth }.
export function makeUser(pg, email) {
  email = email || `u${++userCounter}-${process.pid}@example.test`;
  const r = runProgram('tusko', ['user', 'add', '--email', email, '--password-stdin'], {
    env: { DATABASE_URL: pg.url },
    input: 'correct horse battery\n',
  });
  assert.equal(r.code, 0, `user add: ${r.stderr}`);
  const t = runProgram('tusko', ['token', 'create', '--email', email], { env: { DATABASE_URL: pg.url } });
  assert.equal(t.code, 0, `token create: ${t.stderr}`);
  return { id: r.stdout.trim(), email, token: t.stdout.trim(), auth: { authorization: `Bearer ${t.stdout.trim()}` } };
}

export async function newSession(base, user, body = {}) {
  const r = await api(base, '/api/sessions', { json: body, headers: user.auth });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

// POST a message; returns the response ({status, json, headers}).
export async function post(base, user, sid, content, extra = {}) {
  return api(base, `/api/sessions/${sid}/messages`, { json: { content, ...extra }, headers: user.auth });
}

// The events of a session (replayed, not followed), optionally after a seq.
export async function events(base, user, sid, after) {
  const q = after !== undefined ? `?follow=0&after=${after}` : '?follow=0';
  const r = await sse(base, `/api/sessions/${sid}/events${q}`, { headers: user.auth, timeoutMs: 10000 });
  assert.equal(r.status, 200, r.text);
  return r.events;
}

// Follows the session's events until the turn's turn_end (SSE, live).
export async function untilTurnEnd(base, user, sid, turnId, { timeoutMs = 30000 } = {}) {
  const r = await sse(base, `/api/sessions/${sid}/events`, {
    headers: user.auth,
    timeoutMs,
    until: (ev) => ev.event === 'turn_end' && ev.json && ev.json.turn_id === turnId,
  });
  // (the harness may report an abort after `until` matched as a time-out)
  const mine = r.events.filter((e) => e.json && e.json.turn_id === turnId);
  assert.ok(mine.length && mine.at(-1).event === 'turn_end', `turn ${turnId} did not end within ${timeoutMs} ms; events: ${r.events.map((e) => e.event).join(',')}`);
  return mine;
}

// Sends a message and waits for its turn to end: { turnId, events, end }.
export async function turn(base, user, sid, content, extra = {}, opts = {}) {
  const r = await post(base, user, sid, content, extra);
  assert.equal(r.status, 202, r.text);
  const evs = await untilTurnEnd(base, user, sid, r.json.turn_id, opts);
  return { turnId: r.json.turn_id, events: evs, end: evs[evs.length - 1].json };
}

export function textOf(evs) {
  return evs.filter((e) => e.event === 'text').map((e) => e.json.delta).join('');
}

export async function messages(base, user, sid) {
  const r = await api(base, `/api/sessions/${sid}/messages?limit=1000`, { headers: user.auth });
  assert.equal(r.status, 200, r.text);
  return r.json.messages;
}

export async function until(fn, { timeoutMs = 20000, stepMs = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(stepMs);
  }
}

export { api, sse, sleep };
