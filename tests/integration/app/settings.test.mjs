// Start-up settings: the fail-closed sandbox lane as /api/me reports it, the
// model allowlist, the 8,000-character system prompt cap, OIDC prerequisites.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { api, runProgram, startPostgres, stopAll, tmpdir } from '../../lib/harness.mjs';
import { makeUser, startTusko } from './lib.mjs';

after(stopAll);

let pg;
before(async () => {
  pg = await startPostgres('settings');
});

// Runs `tusko migrate` with extra settings: start-up checks run before anything else.
function startup(env) {
  return runProgram('tusko', ['migrate'], { env: { DATABASE_URL: pg.url, ...env } });
}

describe('/api/me and the sandbox lane (fail-closed)', () => {
  test('without OPENSANDBOX_URL and OPENSANDBOX_API_KEY execution is off and says which are missing', async () => {
    const t = await startTusko({ pg, env: {} });
    const u = makeUser(pg, 'me1@example.com');
    const r = await api(t.tusko.url, '/api/me', { headers: u.auth });
    assert.equal(r.status, 200);
    assert.equal(r.json.execution.enabled, false);
    assert.deepEqual(r.json.execution.missing, ['OPENSANDBOX_URL', 'OPENSANDBOX_API_KEY']);
    assert.match(r.json.execution.reason, /OPENSANDBOX_URL/);
    assert.match(t.tusko.log(), /sandbox lane off/);
    await t.tusko.stop();
  });

  test('one of the two is not enough', async () => {
    for (const [env, missing] of [
      [{ OPENSANDBOX_URL: 'http://127.0.0.1:9' }, ['OPENSANDBOX_API_KEY']],
      [{ OPENSANDBOX_API_KEY: 'k-0123456789abcdef' }, ['OPENSANDBOX_URL']],
      [{ OPENSANDBOX_URL: '', OPENSANDBOX_API_KEY: '' }, ['OPENSANDBOX_URL', 'OPENSANDBOX_API_KEY']],
    ]) {
      const t = await startTusko({ pg, env });
      const u = makeUser(pg, `me-${missing.join('-').toLowerCase()}-${Object.keys(env).length}@example.com`);
      const r = await api(t.tusko.url, '/api/me', { headers: u.auth });
      assert.equal(r.json.execution.enabled, false, JSON.stringify(env));
      assert.deepEqual(r.json.execution.missing, missing);
      await t.tusko.stop();
    }
  });

  test('with both from the environment execution is on', async () => {
    const t = await startTusko({ pg, env: { OPENSANDBOX_URL: 'http://127.0.0.1:9', OPENSANDBOX_API_KEY: 'k-0123456789abcdef' } });
    const u = makeUser(pg, 'me2@example.com');
    const r = await api(t.tusko.url, '/api/me', { headers: u.auth });
    assert.equal(r.json.execution.enabled, true);
    assert.deepEqual(r.json.execution.missing, []);
    assert.doesNotMatch(t.tusko.log(), /k-0123456789abcdef/, 'the key is never logged');
    await t.tusko.stop();
  });

  test('the sandbox settings have no command-line flags (environment only)', () => {
    const r = startup({});
    assert.equal(r.code, 0, r.stderr);
    for (const flag of ['--opensandbox-url', '--opensandbox-api-key']) {
      const x = runProgram('tusko', ['migrate', flag, 'http://127.0.0.1:9'], { env: { DATABASE_URL: pg.url } });
      assert.notEqual(x.code, 0, flag);
    }
    const help = runProgram('tusko', ['--help']);
    assert.match(help.stdout, /OPENSANDBOX_URL/);
    assert.match(help.stdout, /CHAT_RATE_LIMIT_MAX/);
  });
});

describe('the model allowlist', () => {
  test('GET /api/models lists TUSKO_MODELS in order, the first as default', async () => {
    const t = await startTusko({ pg, env: { TUSKO_MODELS: ' openai:gpt-4o-mini , anthropic:claude-sonnet-4,openai:llama3:8b' } });
    const u = makeUser(pg, 'models@example.com');
    const r = await api(t.tusko.url, '/api/models', { headers: u.auth });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.models, [
      { id: 'openai:gpt-4o-mini', provider: 'openai', model: 'gpt-4o-mini', default: true },
      { id: 'anthropic:claude-sonnet-4', provider: 'anthropic', model: 'claude-sonnet-4', default: false },
      { id: 'openai:llama3:8b', provider: 'openai', model: 'llama3:8b', default: false },
    ]);
    assert.equal(r.json.default, 'openai:gpt-4o-mini');
    const me = await api(t.tusko.url, '/api/me', { headers: u.auth });
    assert.equal(me.json.default_model, 'openai:gpt-4o-mini');
    await t.tusko.stop();
  });

  test('an empty allowlist is served as empty', async () => {
    const t = await startTusko({ pg, env: { TUSKO_MODELS: '' } });
    const u = makeUser(pg, 'nomodels@example.com');
    const r = await api(t.tusko.url, '/api/models', { headers: u.auth });
    assert.deepEqual(r.json, { models: [], default: null });
    await t.tusko.stop();
  });

  test('a malformed TUSKO_MODELS is refused at start-up, naming the variable', () => {
    for (const bad of ['gpt-4o', 'mistral:large', 'openai:', ':gpt', 'openai:a,,openai:b', 'openai:a,openai:a', 'openai:has space']) {
      const r = startup({ TUSKO_MODELS: bad });
      assert.equal(r.code, 2, bad);
      assert.match(r.stderr, /TUSKO_MODELS/, bad);
    }
  });
});

describe('the system prompt cap (8,000 characters)', () => {
  const dir = tmpdir('tusko-prompt-');

  test('8,000 characters start; 8,001 are refused with a clear message', () => {
    assert.equal(startup({ TUSKO_SYSTEM_PROMPT: 'p'.repeat(8000) }).code, 0);
    const r = startup({ TUSKO_SYSTEM_PROMPT: 'p'.repeat(8001) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /TUSKO_SYSTEM_PROMPT/);
    assert.match(r.stderr, /8001 characters, over the limit of 8000/);
  });

  test('characters, not bytes: 8,000 multi-byte characters are accepted', () => {
    assert.equal(startup({ TUSKO_SYSTEM_PROMPT: 'é'.repeat(8000) }).code, 0);
    assert.equal(startup({ TUSKO_SYSTEM_PROMPT: '日'.repeat(8001) }).code, 2);
  });

  test('from a file: the same cap; a huge file is refused without reading it all', () => {
    const ok = path.join(dir, 'ok.txt');
    const big = path.join(dir, 'big.txt');
    const huge = path.join(dir, 'huge.txt');
    fs.writeFileSync(ok, 'q'.repeat(8000));
    fs.writeFileSync(big, 'q'.repeat(8001));
    fs.writeFileSync(huge, 'q'.repeat(5 << 20));
    assert.equal(startup({ TUSKO_SYSTEM_PROMPT_FILE: ok }).code, 0);
    for (const f of [big, huge]) {
      const r = startup({ TUSKO_SYSTEM_PROMPT_FILE: f });
      assert.equal(r.code, 2, f);
      assert.match(r.stderr, /TUSKO_SYSTEM_PROMPT_FILE/);
      assert.match(r.stderr, /over .*8000/);
    }
    const missing = startup({ TUSKO_SYSTEM_PROMPT_FILE: path.join(dir, 'nope.txt') });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot open/);
  });

  test('both the variable and the file set is refused', () => {
    const f = path.join(dir, 'ok2.txt');
    fs.writeFileSync(f, 'hello');
    const r = startup({ TUSKO_SYSTEM_PROMPT: 'x', TUSKO_SYSTEM_PROMPT_FILE: f });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /both set/);
  });

  test('the serve command refuses too, before listening', () => {
    const r = runProgram('tusko', ['serve'], { env: { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0', TUSKO_SYSTEM_PROMPT: 'z'.repeat(9000) } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /9000 characters, over the limit of 8000/);
    assert.doesNotMatch(r.stderr, /listening/);
  });
});

describe('OIDC prerequisites', () => {
  test('OIDC_ISSUER needs OIDC_CLIENT_ID and TUSKO_PUBLIC_URL; plain http only on loopback', () => {
    let r = startup({ OIDC_ISSUER: 'https://id.example.com' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /OIDC_CLIENT_ID/);
    r = startup({ OIDC_ISSUER: 'https://id.example.com', OIDC_CLIENT_ID: 'tusko' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /TUSKO_PUBLIC_URL/);
    r = startup({ OIDC_ISSUER: 'http://id.example.com', OIDC_CLIENT_ID: 'tusko', TUSKO_PUBLIC_URL: 'https://chat.example.com' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /https/);
    for (const iss of ['http://127.0.0.1:9999', 'http://localhost:9999', 'http://[::1]:9999', 'https://id.example.com']) {
      r = startup({ OIDC_ISSUER: iss, OIDC_CLIENT_ID: 'tusko', TUSKO_PUBLIC_URL: 'https://chat.example.com' });
      assert.equal(r.code, 0, `${iss}: ${r.stderr}`);
    }
    for (const iss of ['http://127.0.0.1.example.com', 'http://0x7f.0.0.1', 'http://10.0.0.1']) {
      r = startup({ OIDC_ISSUER: iss, OIDC_CLIENT_ID: 'tusko', TUSKO_PUBLIC_URL: 'https://chat.example.com' });
      assert.equal(r.code, 2, iss);
    }
  });
});
