// Helpers shared by the tusko-execd integration tests: start a real execd in a
// temporary workspace, talk to it (JSON, SSE streams read event by event), and
// validate every body and event against the schemas in execd-api.yaml.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

import { ROOT, startProgram, tmpdir } from '../../lib/harness.mjs';

export const TOKEN = 'execd-test-token-0123456789abcdef';
function specFile() {
  // The spec is kept in the repository (specs/opensandbox/); EXECD_SPEC overrides.
  for (const p of [process.env.EXECD_SPEC, path.join(ROOT, 'specs/opensandbox/execd-api.yaml')]) {
    if (p && fs.existsSync(p)) return p;
  }
  throw new Error('execd-api.yaml not found (set EXECD_SPEC)');
}

// ---------- schema validation ----------

export const spec = YAML.parse(fs.readFileSync(specFile(), 'utf8'));
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
for (const f of ['int32', 'int64', 'float', 'double', 'binary']) ajv.addFormat(f, true);
ajv.addSchema(spec, 'execd.json');

const ptr = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const compiled = new Map();
function validatorAt(pointer) {
  if (!compiled.has(pointer)) {
    const v = ajv.getSchema(`execd.json#${pointer}`);
    if (!v) throw new Error(`no schema at ${pointer}`);
    compiled.set(pointer, v);
  }
  return compiled.get(pointer);
}

export function check(pointer, value, what = pointer) {
  const v = validatorAt(pointer);
  if (!v(value)) {
    assert.fail(`${what} does not match ${pointer}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value).slice(0, 2000)}`);
  }
}

export const checkEvent = (ev) => check('/components/schemas/ServerStreamEvent', ev, `event ${JSON.stringify(ev).slice(0, 200)}`);
export const checkError = (body) => check('/components/schemas/ErrorResponse', body, 'error body');

// Validates a JSON response against the spec's schema for that operation and
// status (responses given by $ref are followed). Statuses the spec does not
// list must still carry an ErrorResponse when they are errors.
export function checkResponse(method, p, res) {
  const op = spec.paths[p]?.[method.toLowerCase()];
  assert.ok(op, `the spec has no ${method} ${p}`);
  let r = op.responses[String(res.status)];
  let pointer = `/paths/${ptr(p)}/${method.toLowerCase()}/responses/${res.status}`;
  if (r && r.$ref) {
    pointer = r.$ref.slice(1);
    r = spec.components.responses[r.$ref.split('/').pop()];
  }
  if (!r) {
    if (res.status >= 400) return checkError(res.json);
    assert.fail(`${method} ${p}: status ${res.status} is not in the spec`);
  }
  const json = r.content?.['application/json'];
  if (json && res.text) check(`${pointer}/content/application~1json/schema`, res.json, `${method} ${p} ${res.status}`);
}

// ---------- the daemon ----------

// homeIsWorkspace: HOME=the workspace, as for the sandbox user. On the host the
// daemon is confined to its temporary workspace (EXECD_CONFINE=workspace, the
// mode of tusko's own sandboxes) unless env says otherwise: root.test.mjs gives
// it a whole (temporary) root instead.
export async function startExecd({ env = {}, workspace, homeIsWorkspace = false } = {}) {
  const ws = workspace || tmpdir('tusko-execd-ws-');
  const prog = await startProgram('tusko-execd', {
    env: { EXECD_LISTEN: '127.0.0.1:0', EXECD_WORKSPACE: ws, EXECD_CONFINE: 'workspace', EXECD_ACCESS_TOKEN: TOKEN, ...(homeIsWorkspace ? { HOME: ws } : {}), ...env },
  });
  const stop = prog.stop;
  prog.stop = async (...a) => {
    const r = await stop(...a);
    if (!workspace) fs.rmSync(ws, { recursive: true, force: true });
    return r;
  };
  prog.ws = ws;
  return prog;
}

export const H = { 'X-EXECD-ACCESS-TOKEN': TOKEN };

// JSON request with the token: { status, headers, text, json }.
export async function req(base, p, { method, json, body, headers = {}, token = true } = {}) {
  const h = { ...(token ? H : {}), ...headers };
  let b = body;
  if (json !== undefined) {
    h['content-type'] = 'application/json';
    b = JSON.stringify(json);
  }
  const res = await fetch(base + p, { method: method || (b !== undefined ? 'POST' : 'GET'), headers: h, body: b });
  const buf = Buffer.from(await res.arrayBuffer());
  const text = buf.toString('utf8');
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, text, json: parsed, buf };
}

// POSTs json and reads the event stream (bare JSON objects separated by blank
// lines, or data: lines). onEvent(ev, all) may act on each event (await it) and
// return true to stop reading. Every event is validated against the schema.
// Returns { status, events, raw } (raw: the bytes as received).
export async function stream(base, p, json, { onEvent = () => false, timeoutMs = 30000, method = 'POST', validate = true } = {}) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  const events = [];
  let raw = '';
  try {
    const res = await fetch(base + p, {
      method,
      headers: { ...H, accept: 'text/event-stream', ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: json !== undefined ? JSON.stringify(json) : undefined,
      signal: ac.signal,
    });
    if (!res.ok || !(res.headers.get('content-type') || '').startsWith('text/event-stream')) {
      const text = await res.text();
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      return { status: res.status, events, text, json: parsed };
    }
    const dec = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      const s = dec.decode(chunk, { stream: true });
      raw += s;
      buf += s;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const lines = frame.split('\n').filter((l) => l && !l.startsWith(':'));
        if (!lines.length) continue;
        const data = lines.map((l) => (l.startsWith('data:') ? l.slice(5).trimStart() : l)).join('\n');
        const ev = JSON.parse(data);
        if (validate) checkEvent(ev);
        events.push(ev);
        if (await onEvent(ev, events)) {
          ac.abort();
          return { status: res.status, events, raw, stopped: true };
        }
      }
    }
    return { status: res.status, events, raw };
  } catch (e) {
    if (e.name === 'AbortError') return { status: 0, events, raw, timedOut: true };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

export const texts = (events, type) => events.filter((e) => e.type === type).map((e) => e.text);
export const types = (events) => events.filter((e) => e.type !== 'ping').map((e) => e.type);

// Waits until fn() is truthy (polling; no timing is asserted).
export async function until(fn, { timeoutMs = 20000, stepMs = 20, what = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export function pidAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // a zombie still answers kill(0); look at its state
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(st);
  } catch {
    return false;
  }
}
