// Health and metrics (docs/OBSERVABILITY.md). tusko's /metrics, parsed with a
// real Prometheus text-format parser (npm parse-prometheus-text-format),
// counts exactly the work done: N turns against the scripted model server give
// tusko_turns_started_total N, tusko_turns_finished_total{outcome="done"} N,
// tusko_llm_calls_total N and the tokens the scenario reported, N times. The
// token guards it (401 without, 404 when neither METRICS_TOKEN nor
// METRICS_LISTEN is set; METRICS_LISTEN serves it apart and the main listener
// not at all). tusko's /healthz answers and its /readyz is 503 while a
// migration is missing.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

import { api, freePort, startProgram, stopAll } from '../../lib/harness.mjs';
import { makeUser, newSession, startModels, startTusko, turn } from '../agent/lib.mjs';

const TOKEN = 'metrics-secret-0123456789';
const SCENARIOS = { counted: { steps: [{ text: 'counted answer', usage: { input_tokens: 11, output_tokens: 7 } }] } };

async function scrape(url, headers = { authorization: `Bearer ${TOKEN}` }) {
  const res = await fetch(`${url}/metrics`, { headers });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const fams = parsePrometheusTextFormat(await res.text());
  return Object.fromEntries(fams.map((f) => [f.name, f]));
}

function value(fams, name, labels = {}) {
  const f = fams[name];
  assert.ok(f, `${name} is exposed`);
  const m = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => (x.labels || {})[k] === v));
  return m ? Number(m.value ?? m.count) : 0;
}

describe('metrics and health', () => {
  let ms, t;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    t = await startTusko(ms, { env: { METRICS_TOKEN: TOKEN }, tag: 'metrics' });
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('N turns: the counters say N, the tokens N times the scenario', async () => {
    const base = t.tusko.url;
    const before = await scrape(base);
    assert.equal(before.tusko_turns_started_total.type, 'COUNTER');
    assert.equal(before.tusko_turn_duration_seconds.type, 'HISTOGRAM');
    const u = makeUser(t.pg);
    const N = 3;
    for (let i = 0; i < N; i++) {
      const sid = await newSession(base, u);
      const r = await turn(base, u, sid, `#scenario:counted go ${i}`);
      assert.equal(r.end.state, 'done', JSON.stringify(r.end));
    }
    const m = await scrape(base);
    const d = (name, labels) => value(m, name, labels) - value(before, name, labels);
    assert.equal(d('tusko_turns_started_total'), N);
    assert.equal(d('tusko_turns_finished_total', { outcome: 'done' }), N);
    assert.equal(d('tusko_llm_calls_total', { model: 'openai:gpt-4o-mini', outcome: 'ok' }), N);
    assert.equal(d('tusko_llm_tokens_total', { model: 'openai:gpt-4o-mini', direction: 'input' }), 11 * N);
    assert.equal(d('tusko_llm_tokens_total', { model: 'openai:gpt-4o-mini', direction: 'output' }), 7 * N);
    // every turn of this tusko ended done: its histogram holds N in +Inf
    const inf = m.tusko_turn_duration_seconds.metrics.reduce((a, x) => a + Number(x.buckets['+Inf']), 0);
    assert.equal(inf, N);
  });

  test('the token guards /metrics', async () => {
    const base = t.tusko.url;
    assert.equal((await api(base, '/metrics')).status, 401);
    assert.equal((await api(base, '/metrics', { headers: { authorization: 'Bearer wrong' } })).status, 401);
  });

  test('/healthz and /readyz of tusko', async () => {
    const base = t.tusko.url;
    let r = await api(base, '/healthz');
    assert.equal(r.status, 200);
    r = await api(base, '/readyz');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'ready');
    // a migration missing: not ready, and it says which
    const pg = await import('node:child_process');
    const x = pg.spawnSync('psql', [t.pg.url, '-c', "DELETE FROM schema_migrations WHERE version LIKE '0161%'"], { encoding: 'utf8' });
    assert.equal(x.status, 0, x.stderr);
    r = await api(base, '/readyz');
    assert.equal(r.status, 503);
    assert.match(r.json.reason, /0161/);
    pg.spawnSync('psql', [t.pg.url, '-c', "INSERT INTO schema_migrations (version) VALUES ('0161_audit.sql')"]);
    assert.equal((await api(base, '/readyz')).status, 200);
  });

  test('without METRICS_TOKEN /metrics is off; METRICS_LISTEN serves it apart', async () => {
    const off = await startProgram('tusko', { env: { ...t.env, METRICS_TOKEN: '' } });
    let r = await api(off.url, '/metrics');
    assert.equal(r.status, 404);
    assert.equal(r.json.code, 'METRICS_OFF');
    const port = await freePort();
    const apart = await startProgram('tusko', { env: { ...t.env, METRICS_TOKEN: '', METRICS_LISTEN: `127.0.0.1:${port}` } });
    assert.equal((await api(apart.url, '/metrics')).status, 404);
    const fams = await scrape(`http://127.0.0.1:${port}`, {});
    assert.ok(fams.tusko_turns_started_total);
  });
});
