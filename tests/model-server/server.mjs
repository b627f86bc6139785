#!/usr/bin/env node
// Tusko scripted model server: a stand-in for the OpenAI Chat Completions and
// Anthropic Messages APIs that replays scenarios and records what it was sent.
//
//   node tests/model-server/server.mjs [--port P] [--scenarios DIR] [--no-record]
//
//   import { startModelServer } from './tests/model-server/server.mjs';
//   const ms = await startModelServer({ scenarios: { hi: { steps: [{ text: 'hi' }] } } });
//
// The scenario format and the control API are documented in README.md beside
// this file. Node.js standard library only.

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_SCENARIOS_DIR = path.resolve(HERE, '../fixtures/scenarios');
export const DEFAULT_SCENARIO = 'default';

const NAME_RE = /^[A-Za-z0-9_.-]{1,100}$/;
const MARKER = '#scenario:';
const MARKER_RE = /#scenario:([A-Za-z0-9_.-]+)/g;
const TEMPLATE_RE = /\{\{\s*([A-Za-z_]+)\s*\}\}/g;
export const TEMPLATE_VARS = Object.freeze([
  'last_user', 'message_count', 'system', 'system_length', 'tool_result', 'tool_results',
  'tool_result_count', 'tools', 'tool_count', 'model', 'protocol', 'scenario', 'step',
]);
const TEMPLATE_SET = new Set(TEMPLATE_VARS);

const MAX_BODY_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_RECORDS = 10_000;
const DEFAULT_MAX_RECORD_BYTES = 256 * 1024 * 1024;
const DEFAULT_ARG_PIECES = 6;

const OPENAI_MODELS = ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'o4-mini', 'tusko-scripted'];
const ANTHROPIC_MODELS = [
  ['claude-sonnet-4-5', 'Claude Sonnet 4.5'],
  ['claude-opus-4-1', 'Claude Opus 4.1'],
  ['claude-3-5-haiku-latest', 'Claude Haiku 3.5'],
];

// The built-in answer when no user message carries a #scenario: marker. A
// scenario named "default" (file or addScenario) replaces it.
const BUILTIN_DEFAULT = {
  description: 'Built-in: a short text that echoes how many messages were received.',
  steps: [{ text: 'Hello from the Tusko model server. I received {{message_count}} messages.' }],
};

// ---------------------------------------------------------------------------
// Scenario compilation (validation + normalisation, done once, not per request)
// ---------------------------------------------------------------------------

const SCENARIO_KEYS = new Set(['name', 'description', 'on_exhausted', 'steps']);
const STEP_KEYS = new Set([
  'comment', 'text', 'split', 'chunks', 'tool_calls', 'usage', 'stop_reason', 'delay_ms',
  'chunk_delay_ms', 'error', 'hang', 'hang_after', 'cut_after', 'cut_mode', 'malformed',
  'stream_error', 'fail_times',
]);
const TOOL_KEYS = new Set(['id', 'name', 'arguments', 'chunks']);
const ERROR_KEYS = new Set(['status', 'type', 'code', 'message', 'body', 'headers']);
const MALFORMED_KEYS = new Set(['after', 'kind', 'raw']);
const STREAM_ERROR_KEYS = new Set(['after', 'type', 'message']);
const USAGE_KEYS = new Set(['input_tokens', 'output_tokens', 'prompt_tokens', 'completion_tokens']);
const STOP_REASONS = new Set([
  'stop', 'end_turn', 'tool_calls', 'tool_use', 'length', 'max_tokens', 'stop_sequence',
  'content_filter', 'refusal',
]);

class ScenarioError extends Error {}

function fail(where, msg) {
  throw new ScenarioError(`${where}: ${msg}`);
}

function isObj(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkKeys(where, obj, allowed) {
  for (const k of Object.keys(obj)) if (!allowed.has(k)) fail(where, `unknown field "${k}"`);
}

function checkTemplate(where, s) {
  for (const m of s.matchAll(TEMPLATE_RE)) {
    if (!TEMPLATE_SET.has(m[1])) {
      fail(where, `unknown template variable {{${m[1]}}} (known: ${TEMPLATE_VARS.join(', ')})`);
    }
  }
  return s;
}

function checkTemplatesDeep(where, v) {
  if (typeof v === 'string') checkTemplate(where, v);
  else if (Array.isArray(v)) v.forEach((x, i) => checkTemplatesDeep(`${where}[${i}]`, x));
  else if (isObj(v)) for (const [k, x] of Object.entries(v)) checkTemplatesDeep(`${where}.${k}`, x);
}

function nonNegInt(where, v, field) {
  if (v === undefined || v === null) return null;
  if (!Number.isInteger(v) || v < 0) fail(where, `"${field}" must be a non-negative integer`);
  return v;
}

function hasTemplate(s) {
  return typeof s === 'string' && s.includes('{{');
}

function compileStep(where, s) {
  if (!isObj(s)) fail(where, 'a step must be an object');
  checkKeys(where, s, STEP_KEYS);
  const step = {
    text: null, split: 'words', chunks: null, tool_calls: [], usage: null, stop_reason: null,
    delay_ms: nonNegInt(where, s.delay_ms, 'delay_ms') ?? 0,
    chunk_delay_ms: nonNegInt(where, s.chunk_delay_ms, 'chunk_delay_ms') ?? 0,
    error: null, hang: false,
    hang_after: nonNegInt(where, s.hang_after, 'hang_after'),
    cut_after: nonNegInt(where, s.cut_after, 'cut_after'),
    cut_mode: 'close', malformed: [], stream_error: null,
    fail_times: nonNegInt(where, s.fail_times, 'fail_times'), clean: null,
  };
  if (s.text !== undefined && s.chunks !== undefined) fail(where, 'give "text" or "chunks", not both');
  if (s.text !== undefined) {
    if (typeof s.text !== 'string') fail(where, '"text" must be a string');
    step.text = checkTemplate(`${where}.text`, s.text);
  }
  if (s.split !== undefined) {
    if (s.text === undefined) fail(where, '"split" needs "text"');
    if (s.split !== 'words' && s.split !== 'chars' && !(Number.isInteger(s.split) && s.split >= 1)) {
      fail(where, '"split" must be "words", "chars" or a positive integer');
    }
    step.split = s.split;
  }
  if (s.chunks !== undefined) {
    if (!Array.isArray(s.chunks)) fail(where, '"chunks" must be an array');
    step.chunks = s.chunks.map((c, i) => {
      const w = `${where}.chunks[${i}]`;
      if (typeof c === 'string') return { text: checkTemplate(w, c), delay_ms: null };
      if (!isObj(c)) fail(w, 'a chunk is a string, {text, delay_ms} or {raw}');
      if (c.raw !== undefined) {
        checkKeys(w, c, new Set(['raw']));
        if (typeof c.raw !== 'string') fail(w, '"raw" must be a string');
        return { raw: c.raw };
      }
      checkKeys(w, c, new Set(['text', 'delay_ms']));
      if (typeof c.text !== 'string') fail(w, '"text" must be a string');
      return { text: checkTemplate(w, c.text), delay_ms: nonNegInt(w, c.delay_ms, 'delay_ms') };
    });
  }
  if (s.tool_calls !== undefined) {
    if (!Array.isArray(s.tool_calls)) fail(where, '"tool_calls" must be an array');
    step.tool_calls = s.tool_calls.map((t, i) => {
      const w = `${where}.tool_calls[${i}]`;
      if (!isObj(t)) fail(w, 'a tool call must be an object');
      checkKeys(w, t, TOOL_KEYS);
      if (typeof t.name !== 'string' || !t.name) fail(w, '"name" must be a non-empty string');
      if (t.id !== undefined && (typeof t.id !== 'string' || !t.id)) fail(w, '"id" must be a non-empty string');
      const args = t.arguments === undefined ? {} : t.arguments;
      if (typeof args !== 'string' && !isObj(args)) fail(w, '"arguments" must be an object or a string');
      checkTemplatesDeep(`${w}.arguments`, args);
      let pieces = DEFAULT_ARG_PIECES;
      if (t.chunks !== undefined) {
        const ok = (Number.isInteger(t.chunks) && t.chunks >= 1) ||
          (Array.isArray(t.chunks) && t.chunks.every((p) => typeof p === 'string'));
        if (!ok) fail(w, '"chunks" must be a positive integer or an array of strings');
        pieces = t.chunks;
      }
      return { id: t.id ?? null, name: t.name, arguments: args, pieces };
    });
  }
  if (s.usage !== undefined) {
    if (!isObj(s.usage)) fail(where, '"usage" must be an object');
    checkKeys(`${where}.usage`, s.usage, USAGE_KEYS);
    const input = s.usage.input_tokens ?? s.usage.prompt_tokens;
    const output = s.usage.output_tokens ?? s.usage.completion_tokens;
    step.usage = {
      input: nonNegInt(`${where}.usage`, input, 'input_tokens'),
      output: nonNegInt(`${where}.usage`, output, 'output_tokens'),
    };
  }
  if (s.stop_reason !== undefined) {
    if (!STOP_REASONS.has(s.stop_reason)) fail(where, `"stop_reason" must be one of ${[...STOP_REASONS].join(', ')}`);
    step.stop_reason = s.stop_reason;
  }
  if (s.error !== undefined) {
    const w = `${where}.error`;
    if (!isObj(s.error)) fail(w, 'must be an object');
    checkKeys(w, s.error, ERROR_KEYS);
    const e = s.error;
    if (!Number.isInteger(e.status) || e.status < 400 || e.status > 599) fail(w, '"status" must be an integer 400..599');
    if (e.headers !== undefined && (!isObj(e.headers) || Object.values(e.headers).some((v) => typeof v !== 'string'))) {
      fail(w, '"headers" must map names to strings');
    }
    if (e.message !== undefined) checkTemplate(w, String(e.message));
    for (const f of ['type', 'code']) if (e[f] !== undefined && typeof e[f] !== 'string') fail(w, `"${f}" must be a string`);
    step.error = { status: e.status, type: e.type ?? null, code: e.code ?? null, message: e.message ?? null, body: e.body, headers: e.headers ?? {} };
  }
  if (s.hang !== undefined) {
    if (typeof s.hang !== 'boolean') fail(where, '"hang" must be a boolean');
    step.hang = s.hang;
  }
  if (s.cut_mode !== undefined) {
    if (s.cut_mode !== 'close' && s.cut_mode !== 'reset') fail(where, '"cut_mode" must be "close" or "reset"');
    if (step.cut_after === null) fail(where, '"cut_mode" needs "cut_after"');
    step.cut_mode = s.cut_mode;
  }
  if (s.malformed !== undefined) {
    const list = Array.isArray(s.malformed) ? s.malformed : [s.malformed];
    step.malformed = list.map((m, i) => {
      const w = `${where}.malformed[${i}]`;
      if (!isObj(m)) fail(w, 'must be an object');
      checkKeys(w, m, MALFORMED_KEYS);
      const kind = m.kind ?? (m.raw !== undefined ? 'raw' : 'invalid_json');
      if (!['invalid_json', 'garbage', 'raw'].includes(kind)) fail(w, '"kind" must be invalid_json, garbage or raw');
      if (kind === 'raw' && typeof m.raw !== 'string') fail(w, 'kind "raw" needs a "raw" string');
      return { after: nonNegInt(w, m.after, 'after') ?? 0, kind, raw: m.raw ?? null };
    });
  }
  if (s.stream_error !== undefined) {
    const w = `${where}.stream_error`;
    if (!isObj(s.stream_error)) fail(w, 'must be an object');
    checkKeys(w, s.stream_error, STREAM_ERROR_KEYS);
    const e = s.stream_error;
    for (const f of ['type', 'message']) if (e[f] !== undefined && typeof e[f] !== 'string') fail(w, `"${f}" must be a string`);
    step.stream_error = { after: nonNegInt(w, e.after, 'after') ?? 0, type: e.type ?? null, message: e.message ?? null };
  }
  const outcomes = [step.error && 'error', step.hang && 'hang', step.cut_after !== null && 'cut_after',
    step.hang_after !== null && 'hang_after', step.stream_error && 'stream_error'].filter(Boolean);
  if (outcomes.length > 1) fail(where, `${outcomes.join(' and ')} cannot be combined`);
  if (step.fail_times !== null) {
    if (!outcomes.length && !step.malformed.length) fail(where, '"fail_times" needs a failure (error, hang, hang_after, cut_after, stream_error or malformed)');
    // What later attempts of the same request get: the step without its failure.
    step.clean = { ...step, error: null, hang: false, hang_after: null, cut_after: null, malformed: [], stream_error: null, fail_times: null };
  }
  step.templated = hasTemplate(step.text) || (step.chunks || []).some((c) => hasTemplate(c.text)) ||
    step.tool_calls.some((t) => JSON.stringify(t.arguments).includes('{{')) || hasTemplate(step.error?.message);
  return step;
}

/** Validate and normalise a scenario object; throws ScenarioError with a precise location. */
export function compileScenario(name, obj) {
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw new ScenarioError(`scenario name ${JSON.stringify(name)} must match ${NAME_RE}`);
  }
  const where = `scenario "${name}"`;
  if (Array.isArray(obj)) obj = { steps: obj };
  if (!isObj(obj)) fail(where, 'must be an object with "steps"');
  checkKeys(where, obj, SCENARIO_KEYS);
  if (obj.name !== undefined && obj.name !== name) fail(where, `"name" field says ${JSON.stringify(obj.name)}`);
  if (!Array.isArray(obj.steps) || obj.steps.length === 0) fail(where, '"steps" must be a non-empty array');
  const onEx = obj.on_exhausted ?? 'repeat';
  if (onEx !== 'repeat' && onEx !== 'error') fail(where, '"on_exhausted" must be "repeat" or "error"');
  return {
    name,
    description: typeof obj.description === 'string' ? obj.description : '',
    on_exhausted: onEx,
    steps: obj.steps.map((s, i) => compileStep(`${where} steps[${i}]`, s)),
    source: obj,
  };
}

function loadScenarioDir(dir) {
  const out = new Map();
  let names;
  try {
    names = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  } catch (e) {
    throw new Error(`cannot read scenarios directory ${dir}: ${e.message}`);
  }
  for (const f of names) {
    const file = path.join(dir, f);
    let obj;
    try {
      obj = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      throw new Error(`${file}: ${e.message}`);
    }
    const name = isObj(obj) && typeof obj.name === 'string' ? obj.name : f.slice(0, -5);
    try {
      out.set(name, compileScenario(name, obj));
    } catch (e) {
      throw new Error(`${file}: ${e.message}`);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

const ID_PREFIX = crypto.randomBytes(4).toString('hex');
let idCounter = 0;
function newId(prefix) {
  idCounter = (idCounter + 1) % 0x7fffffff;
  return `${prefix}${ID_PREFIX}${idCounter.toString(36).padStart(8, '0')}`;
}

function codePoints(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

// Split s into n pieces of near-equal length without separating a surrogate pair.
function splitEven(s, n) {
  if (s.length === 0) return [];
  n = Math.min(n, s.length);
  const out = [];
  let start = 0;
  for (let k = 1; k <= n; k++) {
    let end = k === n ? s.length : Math.round((s.length * k) / n);
    if (end > start && end < s.length) {
      const c = s.charCodeAt(end - 1);
      if (c >= 0xd800 && c <= 0xdbff) end++;
    }
    if (end > start) out.push(s.slice(start, end));
    start = Math.max(start, end);
  }
  return out;
}

function splitText(s, how) {
  if (s.length === 0) return [];
  if (how === 'words') return s.match(/\s*\S+|\s+$/g) ?? [s];
  if (how === 'chars') return Array.from(s);
  return splitEven(s, how);
}

function contentText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const p of content) {
    if (p && (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string') {
      out = out ? `${out}\n${p.text}` : p.text;
    }
  }
  return out;
}

function lastMarker(text) {
  if (!text.includes(MARKER)) return null;
  let name = null;
  for (const m of text.matchAll(MARKER_RE)) name = m[1];
  return name;
}

function fillTemplate(s, ctx) {
  if (!s.includes('{{')) return s;
  return s.replace(TEMPLATE_RE, (_, k) => String(ctx[k]));
}

function fillDeep(v, ctx) {
  if (typeof v === 'string') return fillTemplate(v, ctx);
  if (Array.isArray(v)) return v.map((x) => fillDeep(x, ctx));
  if (isObj(v)) {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = fillDeep(x, ctx);
    return o;
  }
  return v;
}

function redactHeaders(h) {
  const out = {};
  for (const [k, v] of Object.entries(h)) {
    if (k === 'authorization' || k === 'proxy-authorization') {
      out[k] = typeof v === 'string' && /^bearer\s/i.test(v) ? 'Bearer [redacted]' : '[redacted]';
    } else if (k === 'x-api-key' || k === 'api-key' || k === 'cookie') {
      out[k] = '[redacted]';
    } else {
      out[k] = v;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Protocols: request validation, conversation analysis, errors, rendering
// ---------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, type, message, code = null, extraHeaders = null) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.extraHeaders = extraHeaders;
  }
}

const NEUTRAL_STOP = {
  stop: 'stop', end_turn: 'stop', stop_sequence: 'stop_sequence', tool_calls: 'tool', tool_use: 'tool',
  length: 'length', max_tokens: 'length', content_filter: 'filter', refusal: 'filter',
};

function openaiErrorBody(status, type, message, code) {
  const t = type ?? (status === 401 ? 'invalid_request_error' : status === 429 ? 'requests'
    : status >= 500 ? 'server_error' : 'invalid_request_error');
  const c = code !== undefined && code !== null ? code : status === 429 ? 'rate_limit_exceeded' : null;
  return { error: { message, type: t, param: null, code: c } };
}

const ANTHROPIC_TYPES = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};
function anthropicErrorBody(status, type, message) {
  const t = type ?? ANTHROPIC_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return { type: 'error', error: { type: t, message }, request_id: newId('req_') };
}

const DEFAULT_ERROR_MESSAGES = {
  400: 'Bad request.', 401: 'Unauthorized.', 403: 'Forbidden.', 404: 'Not found.',
  429: 'Rate limit reached for requests. Please try again later.',
  500: 'The server had an error while processing your request. Sorry about that!',
  502: 'Bad gateway.', 503: 'The service is temporarily unavailable.', 529: 'Overloaded',
};

const openai = {
  name: 'openai',
  checkAuth(req, apiKey) {
    const h = req.headers.authorization;
    const m = typeof h === 'string' ? /^Bearer\s+(\S.*)$/i.exec(h) : null;
    if (!m) {
      throw new ApiError(401, 'invalid_request_error',
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).");
    }
    if (apiKey && m[1].trim() !== apiKey) {
      throw new ApiError(401, 'invalid_request_error', 'Incorrect API key provided.', 'invalid_api_key');
    }
  },
  errorBody: (status, type, message, code) => openaiErrorBody(status, type, message, code),
  // Validates the body the way the real API would refuse it, and analyses the
  // conversation in one backward pass.
  analyse(body, strict) {
    if (typeof body.model !== 'string' || !body.model) {
      throw new ApiError(400, 'invalid_request_error', 'you must provide a model parameter');
    }
    const msgs = body.messages;
    if (!Array.isArray(msgs) || msgs.length === 0) {
      throw new ApiError(400, 'invalid_request_error', "Invalid 'messages': expected a non-empty array.");
    }
    const tools = [];
    if (body.tools !== undefined) {
      if (!Array.isArray(body.tools)) throw new ApiError(400, 'invalid_request_error', "Invalid 'tools': expected an array.");
      body.tools.forEach((t, i) => {
        if (!isObj(t) || t.type !== 'function' || !isObj(t.function) || typeof t.function.name !== 'string' || !t.function.name) {
          throw new ApiError(400, 'invalid_request_error', `Invalid 'tools[${i}]': expected {type: "function", function: {name, ...}}.`);
        }
        tools.push(t.function.name);
      });
    }
    if (strict) openaiCheckToolPairing(msgs);
    const a = { marker: null, markerIndex: -1, assistantsAfter: 0, assistantsTotal: 0, lastUser: null,
      toolResult: null, toolResults: [], system: '' };
    let sawAssistant = false;
    const systems = [];
    for (let i = msgs.length - 1; i >= 0; i--) {
      const m = msgs[i];
      if (!isObj(m) || typeof m.role !== 'string') {
        throw new ApiError(400, 'invalid_request_error', `Invalid 'messages[${i}]': expected an object with a role.`);
      }
      switch (m.role) {
        case 'assistant':
          a.assistantsTotal++;
          if (a.marker === null) a.assistantsAfter++;
          sawAssistant = true;
          break;
        case 'user': {
          if (a.lastUser !== null && a.marker !== null) break;
          const text = contentText(m.content);
          if (a.lastUser === null) a.lastUser = text;
          if (a.marker === null) {
            const name = lastMarker(text);
            if (name !== null) { a.marker = name; a.markerIndex = i; }
          }
          break;
        }
        case 'tool': {
          const text = contentText(m.content);
          if (a.toolResult === null) a.toolResult = text;
          if (!sawAssistant) a.toolResults.push(text);
          break;
        }
        case 'system':
        case 'developer':
          systems.push(contentText(m.content));
          break;
        case 'function':
          break;
        default:
          throw new ApiError(400, 'invalid_request_error',
            `Invalid value: '${m.role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`);
      }
    }
    a.system = systems.reverse().join('\n');
    a.toolResults.reverse();
    return {
      model: body.model, stream: body.stream === true,
      includeUsage: body.stream === true && body.stream_options?.include_usage === true,
      messageCount: msgs.length, tools, ...a,
    };
  },
};

function openaiCheckToolPairing(msgs) {
  let pending = null; // ids of the last assistant tool_calls still waiting for results
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i];
    if (!isObj(m)) continue;
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string') {
        throw new ApiError(400, 'invalid_request_error', `Missing required parameter: 'messages[${i}].tool_call_id'.`);
      }
      if (!pending || !pending.has(m.tool_call_id)) {
        throw new ApiError(400, 'invalid_request_error',
          `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[${i}], tool_call_id ${m.tool_call_id})`);
      }
      pending.delete(m.tool_call_id);
      continue;
    }
    if (pending && pending.size) {
      throw new ApiError(400, 'invalid_request_error',
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(', ')}`);
    }
    pending = null;
    if (m.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length) {
      pending = new Set();
      m.tool_calls.forEach((tc, j) => {
        if (!isObj(tc) || typeof tc.id !== 'string' || !isObj(tc.function) || typeof tc.function.name !== 'string' ||
            typeof tc.function.arguments !== 'string') {
          throw new ApiError(400, 'invalid_request_error',
            `Invalid 'messages[${i}].tool_calls[${j}]': expected {id, type: "function", function: {name, arguments: string}}.`);
        }
        pending.add(tc.id);
      });
    }
  }
  if (pending && pending.size) {
    throw new ApiError(400, 'invalid_request_error',
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(', ')}`);
  }
}

const anthropic = {
  name: 'anthropic',
  checkAuth(req, apiKey) {
    const k = req.headers['x-api-key'];
    if (typeof k !== 'string' || !k.trim()) throw new ApiError(401, 'authentication_error', 'x-api-key header is required');
    if (apiKey && k.trim() !== apiKey) throw new ApiError(401, 'authentication_error', 'invalid x-api-key');
    const v = req.headers['anthropic-version'];
    if (typeof v !== 'string' || !v.trim()) throw new ApiError(400, 'invalid_request_error', 'anthropic-version: header is required');
  },
  errorBody: (status, type, message) => anthropicErrorBody(status, type, message),
  analyse(body, strict) {
    const bad = (msg) => new ApiError(400, 'invalid_request_error', msg);
    if (typeof body.model !== 'string' || !body.model) throw bad('model: Field required');
    if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) throw bad('max_tokens: Field required (a positive integer)');
    const msgs = body.messages;
    if (!Array.isArray(msgs)) throw bad('messages: Field required');
    if (msgs.length === 0) throw bad('messages: at least one message is required');
    let system = '';
    if (typeof body.system === 'string') system = body.system;
    else if (Array.isArray(body.system)) {
      body.system.forEach((b, i) => {
        if (!isObj(b) || b.type !== 'text' || typeof b.text !== 'string') throw bad(`system.${i}: expected a text block`);
      });
      system = body.system.map((b) => b.text).join('\n');
    } else if (body.system !== undefined) throw bad('system: Input should be a valid string or a list of text blocks');
    const tools = [];
    if (body.tools !== undefined) {
      if (!Array.isArray(body.tools)) throw bad('tools: Input should be a valid list');
      body.tools.forEach((t, i) => {
        if (!isObj(t) || typeof t.name !== 'string' || !t.name) throw bad(`tools.${i}.name: Field required`);
        if (t.type === undefined && !isObj(t.input_schema)) throw bad(`tools.${i}.custom.input_schema: Field required`);
        tools.push(t.name);
      });
    }
    if (strict) anthropicCheckMessages(msgs);
    const a = { marker: null, markerIndex: -1, assistantsAfter: 0, assistantsTotal: 0, lastUser: null,
      toolResult: null, toolResults: [] };
    let sawAssistant = false;
    for (let i = msgs.length - 1; i >= 0; i--) {
      const m = msgs[i];
      if (!isObj(m)) throw bad(`messages.${i}: Input should be an object`);
      if (m.role === 'assistant') {
        a.assistantsTotal++;
        if (a.marker === null) a.assistantsAfter++;
        sawAssistant = true;
      } else if (m.role === 'user') {
        if (Array.isArray(m.content)) {
          for (let j = m.content.length - 1; j >= 0; j--) {
            const b = m.content[j];
            if (isObj(b) && b.type === 'tool_result') {
              const text = contentText(b.content);
              if (a.toolResult === null) a.toolResult = text;
              if (!sawAssistant) a.toolResults.push(text);
            }
          }
        }
        if (a.lastUser !== null && a.marker !== null) continue;
        const text = contentText(m.content);
        const hasText = typeof m.content === 'string' || (Array.isArray(m.content) && m.content.some((b) => b?.type === 'text'));
        if (hasText && a.lastUser === null) a.lastUser = text;
        if (hasText && a.marker === null) {
          const name = lastMarker(text);
          if (name !== null) { a.marker = name; a.markerIndex = i; }
        }
      } else if (m.role === 'system') {
        throw bad(`messages.${i}.role: Unexpected role "system". The Messages API accepts a top-level \`system\` parameter, not "system" as an input message role.`);
      } else {
        throw bad(`messages.${i}.role: Input should be 'user' or 'assistant'`);
      }
    }
    a.toolResults.reverse();
    return {
      model: body.model, stream: body.stream === true, includeUsage: false,
      messageCount: msgs.length, tools, system, ...a,
    };
  },
};

function anthropicCheckMessages(msgs) {
  const bad = (msg) => new ApiError(400, 'invalid_request_error', msg);
  let pending = null;
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i];
    if (!isObj(m)) continue;
    const c = m.content;
    const last = i === msgs.length - 1;
    if (c === undefined) throw bad(`messages.${i}.content: Field required`);
    if ((c === '' || (Array.isArray(c) && c.length === 0)) && !(last && m.role === 'assistant')) {
      throw bad(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`);
    }
    if (typeof c !== 'string' && !Array.isArray(c)) throw bad(`messages.${i}.content: Input should be a valid string or list`);
    const blocks = Array.isArray(c) ? c : [];
    blocks.forEach((b, j) => {
      if (!isObj(b) || typeof b.type !== 'string') throw bad(`messages.${i}.content.${j}: expected a content block with a type`);
      if (b.type === 'text' && (typeof b.text !== 'string' || (b.text === '' && !last))) {
        throw bad(`messages.${i}.content.${j}: text content blocks must be non-empty`);
      }
    });
    const results = blocks.filter((b) => b.type === 'tool_result');
    if (m.role === 'user' && results.length) {
      for (const r of results) {
        if (!pending || !pending.has(r.tool_use_id)) {
          throw bad(`messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${r.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
        }
        pending.delete(r.tool_use_id);
      }
    }
    if (pending && pending.size) {
      throw bad(`messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${[...pending].join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
    }
    pending = null;
    if (m.role === 'assistant') {
      const uses = blocks.filter((b) => b.type === 'tool_use');
      if (uses.length) {
        pending = new Set();
        uses.forEach((u, j) => {
          if (typeof u.id !== 'string' || typeof u.name !== 'string' || !isObj(u.input)) {
            throw bad(`messages.${i}.content: tool_use block ${j} needs id, name and an object input`);
          }
          pending.add(u.id);
        });
      }
    }
  }
  // A final assistant message with tool_use blocks (nothing after it) is let through.
}

// --- response planning (protocol-neutral) ---------------------------------

// A plan is a list of items: {t:'text', s, wait} | {t:'raw', s} | {t:'tool', call} |
// {t:'args', index, s, wait}; plus tool call descriptors, usage and stop reason.
function buildPlan(step, ctx, info, bodyBytes, protocol) {
  const items = [];
  const delay = step.chunk_delay_ms;
  let outChars = 0;
  let text = '';
  if (step.chunks) {
    for (const c of step.chunks) {
      if (c.raw !== undefined) { items.push({ t: 'raw', s: c.raw }); continue; }
      const s = fillTemplate(c.text, ctx);
      text += s;
      items.push({ t: 'text', s, wait: c.delay_ms ?? delay, explicit: c.delay_ms !== null });
    }
  } else if (step.text !== null) {
    text = fillTemplate(step.text, ctx);
    for (const s of splitText(text, step.split)) items.push({ t: 'text', s, wait: delay });
  }
  outChars += text.length;
  const calls = step.tool_calls.map((tc, index) => {
    const args = step.templated ? fillDeep(tc.arguments, ctx) : tc.arguments;
    const json = typeof args === 'string' ? args : JSON.stringify(args);
    const pieces = Array.isArray(tc.pieces) ? tc.pieces : splitEven(json, tc.pieces);
    const id = tc.id ?? newId(protocol === 'anthropic' ? 'toolu_01' : 'call_');
    const call = { index, id, name: tc.name, json, input: args, pieces };
    outChars += json.length + tc.name.length;
    items.push({ t: 'tool', call });
    for (const s of pieces) items.push({ t: 'args', index, s, wait: delay });
    return call;
  });
  // The first content delta goes out at once; chunk_delay_ms separates later ones.
  // An explicit per-chunk delay_ms on the first chunk is honoured.
  const first = items.find((it) => it.t === 'text' || it.t === 'args');
  if (first && !first.explicit) first.wait = 0;
  const stop = step.stop_reason ? NEUTRAL_STOP[step.stop_reason] : calls.length ? 'tool' : 'stop';
  const usage = {
    input: step.usage?.input ?? Math.max(1, Math.ceil(bodyBytes / 4)),
    output: step.usage?.output ?? Math.max(1, Math.ceil(outChars / 4)),
  };
  return { items, text, calls, stop, usage };
}

// Frames: {s: string, content: bool, wait: ms}. Control frames: {cut}, {hang}, {end}.

const OPENAI_FINISH = { stop: 'stop', stop_sequence: 'stop', tool: 'tool_calls', length: 'length', filter: 'content_filter' };
const ANTHROPIC_STOP = { stop: 'end_turn', stop_sequence: 'stop_sequence', tool: 'tool_use', length: 'max_tokens', filter: 'refusal' };

function openaiFrames(plan, info) {
  const id = newId('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  const head = `data: {"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},` +
    `"model":${JSON.stringify(info.model)},"system_fingerprint":"fp_tusko_ms","choices":[`;
  const tail = info.includeUsage ? ',"usage":null}\n\n' : '}\n\n';
  const chunk = (delta, finish = null) =>
    `${head}{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish ? `"${finish}"` : 'null'}}]${tail}`;
  const frames = [];
  const firstIsTool = plan.items.length > 0 && plan.items[0].t === 'tool';
  if (!firstIsTool) frames.push({ s: chunk({ role: 'assistant', content: '', refusal: null }), content: false, wait: 0 });
  for (const it of plan.items) {
    switch (it.t) {
      case 'text':
        if (it.s) frames.push({ s: chunk({ content: it.s }), content: true, wait: it.wait });
        break;
      case 'raw':
        frames.push({ s: it.s, content: false, wait: 0 });
        break;
      case 'tool': {
        const tc = { index: it.call.index, id: it.call.id, type: 'function', function: { name: it.call.name, arguments: '' } };
        const delta = frames.length === 0 ? { role: 'assistant', content: null, tool_calls: [tc], refusal: null } : { tool_calls: [tc] };
        frames.push({ s: chunk(delta), content: false, wait: 0 });
        break;
      }
      case 'args':
        frames.push({ s: chunk({ tool_calls: [{ index: it.index, function: { arguments: it.s } }] }), content: true, wait: it.wait });
        break;
    }
  }
  const closing = [{ s: chunk({}, OPENAI_FINISH[plan.stop]), content: false, wait: 0 }];
  if (info.includeUsage) {
    const u = plan.usage;
    closing.push({
      s: `${head}],"usage":${JSON.stringify({ prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output,
        prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } })}}\n\n`,
      content: false, wait: 0,
    });
  }
  closing.push({ s: 'data: [DONE]\n\n', content: false, wait: 0 });
  return { frames, closing };
}

function sse(event, data) {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function anthropicFrames(plan, info) {
  const id = newId('msg_01');
  const frames = [
    { s: sse('message_start', { type: 'message_start', message: { id, type: 'message', role: 'assistant', model: info.model, content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: plan.usage.input, cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0, output_tokens: 1 } } }), content: false, wait: 0 },
    { s: sse('ping', { type: 'ping' }), content: false, wait: 0 },
  ];
  let block = -1;
  let open = false;
  const close = () => {
    if (open) frames.push({ s: sse('content_block_stop', { type: 'content_block_stop', index: block }), content: false, wait: 0 });
    open = false;
  };
  for (const it of plan.items) {
    switch (it.t) {
      case 'text':
        if (!it.s) break;
        if (!open) {
          block++;
          open = true;
          frames.push({ s: sse('content_block_start', { type: 'content_block_start', index: block, content_block: { type: 'text', text: '' } }), content: false, wait: 0 });
        }
        frames.push({ s: sse('content_block_delta', { type: 'content_block_delta', index: block, delta: { type: 'text_delta', text: it.s } }), content: true, wait: it.wait });
        break;
      case 'raw':
        frames.push({ s: it.s, content: false, wait: 0 });
        break;
      case 'tool':
        close();
        block++;
        open = true;
        frames.push({ s: sse('content_block_start', { type: 'content_block_start', index: block,
          content_block: { type: 'tool_use', id: it.call.id, name: it.call.name, input: {} } }), content: false, wait: 0 });
        break;
      case 'args':
        frames.push({ s: sse('content_block_delta', { type: 'content_block_delta', index: block, delta: { type: 'input_json_delta', partial_json: it.s } }), content: true, wait: it.wait });
        break;
    }
  }
  const closing = [];
  if (open) closing.push({ s: sse('content_block_stop', { type: 'content_block_stop', index: block }), content: false, wait: 0 });
  closing.push({ s: sse('message_delta', { type: 'message_delta', delta: { stop_reason: ANTHROPIC_STOP[plan.stop], stop_sequence: null },
    usage: { output_tokens: plan.usage.output } }), content: false, wait: 0 });
  closing.push({ s: sse('message_stop', { type: 'message_stop' }), content: false, wait: 0 });
  return { frames, closing };
}

function malformedFrame(protocol, m) {
  if (m.kind === 'raw') return m.raw;
  if (m.kind === 'garbage') return '%%% garbage: this line is not server-sent events %%%\n\n';
  return protocol === 'anthropic'
    ? 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"brok\n\n'
    : 'data: {"id":"chatcmpl-broken","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"brok\n\n';
}

function streamErrorFrame(protocol, e) {
  if (protocol === 'anthropic') {
    return sse('error', { type: 'error', error: { type: e.type ?? 'overloaded_error', message: e.message ?? 'Overloaded' } });
  }
  return `data: ${JSON.stringify({ error: { message: e.message ?? DEFAULT_ERROR_MESSAGES[500], type: e.type ?? 'server_error', param: null, code: null } })}\n\n`;
}

// Index in frames just after the k-th content frame (k = 0: before the first one).
// Malformed frames are inserted there.
function positionAfter(frames, k) {
  if (k === 0) {
    const i = frames.findIndex((f) => f.content);
    return i < 0 ? frames.length : i;
  }
  let seen = 0;
  for (let i = 0; i < frames.length; i++) if (frames[i].content && ++seen === k) return i + 1;
  return frames.length;
}

// Index of the (k+1)-th content frame (frames.length if there are at most k):
// cuts, hangs and stream errors happen there, so every frame that precedes the
// next delta (block starts, injected malformed frames) has been sent.
function positionBefore(frames, k) {
  let seen = 0;
  for (let i = 0; i < frames.length; i++) if (frames[i].content && seen++ === k) return i;
  return frames.length;
}

function streamFrames(protocol, plan, info, step) {
  const { frames, closing } = protocol === 'anthropic' ? anthropicFrames(plan, info) : openaiFrames(plan, info);
  // Insert malformed frames from the back so earlier positions stay valid.
  const mal = step.malformed.map((m) => ({ at: positionAfter(frames, m.after), s: malformedFrame(protocol, m) }));
  mal.sort((x, y) => y.at - x.at);
  for (const m of mal) frames.splice(m.at, 0, { s: m.s, content: false, wait: 0 });
  if (step.cut_after !== null) {
    frames.splice(positionBefore(frames, step.cut_after), Infinity, { cut: step.cut_mode });
  } else if (step.hang_after !== null) {
    frames.splice(positionBefore(frames, step.hang_after), Infinity, { hang: true });
  } else if (step.stream_error) {
    frames.splice(positionBefore(frames, step.stream_error.after), Infinity,
      { s: streamErrorFrame(protocol, step.stream_error), content: false, wait: 0 }, { end: true });
  } else {
    frames.push(...closing, { end: true });
  }
  return frames;
}

function nonStreamBody(protocol, plan, info) {
  const u = plan.usage;
  if (protocol === 'anthropic') {
    const content = [];
    if (plan.text) content.push({ type: 'text', text: plan.text });
    for (const c of plan.calls) {
      let input = c.input;
      if (typeof input === 'string') {
        try { input = JSON.parse(input); } catch { /* keep the string: the scenario asked for it */ }
      }
      content.push({ type: 'tool_use', id: c.id, name: c.name, input });
    }
    return { id: newId('msg_01'), type: 'message', role: 'assistant', model: info.model, content,
      stop_reason: ANTHROPIC_STOP[plan.stop], stop_sequence: null,
      usage: { input_tokens: u.input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: u.output } };
  }
  const message = { role: 'assistant', content: plan.text || (plan.calls.length ? null : ''), refusal: null };
  if (plan.calls.length) {
    message.tool_calls = plan.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.json } }));
  }
  return { id: newId('chatcmpl-'), object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: info.model,
    system_fingerprint: 'fp_tusko_ms',
    choices: [{ index: 0, message, logprobs: null, finish_reason: OPENAI_FINISH[plan.stop] }],
    usage: { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output,
      prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } } };
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

function sendJson(res, status, obj, headers = {}) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    let over = false;
    req.on('data', (c) => {
      n += c.length;
      if (n > limit) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks, n)));
    req.on('error', reject);
  });
}

// Cut the connection under a response: flush what was written, then close
// (FIN, the chunked body never terminated) or reset (RST).
function cutConnection(res, mode) {
  const sock = res.socket;
  if (!sock || sock.destroyed) return;
  if (!res.headersSent) res.flushHeaders();
  if (mode === 'reset') {
    sock.write('', () => sock.resetAndDestroy());
  } else {
    sock.end(() => sock.destroy());
  }
}

/**
 * Start the scripted model server.
 * @param {object} [opts]
 * @param {number} [opts.port=0]            0 picks a free port.
 * @param {string} [opts.host='127.0.0.1']
 * @param {string|false} [opts.scenariosDir] directory of *.json scenarios (default tests/fixtures/scenarios; false: none)
 * @param {object|Array} [opts.scenarios]   inline scenarios: {name: scenario} or [{name, steps}]
 * @param {boolean} [opts.record=true]      record requests (false for benchmarks)
 * @param {number} [opts.maxRecords=10000]  keep at most this many records (oldest dropped)
 * @param {string} [opts.apiKey]            if set, only this key is accepted (otherwise any non-empty key)
 * @param {boolean} [opts.strict=true]      refuse malformed conversations the way the real APIs do
 * @param {boolean} [opts.verbose=false]    one line per model request on stderr
 */
export async function startModelServer(opts = {}) {
  const {
    port = 0, host = '127.0.0.1', scenariosDir = DEFAULT_SCENARIOS_DIR, scenarios: inline, record = true,
    maxRecords = DEFAULT_MAX_RECORDS, maxRecordBytes = DEFAULT_MAX_RECORD_BYTES, apiKey = null, strict = true,
    verbose = false,
  } = opts;

  const scenarios = new Map([[DEFAULT_SCENARIO, compileScenario(DEFAULT_SCENARIO, BUILTIN_DEFAULT)]]);
  if (scenariosDir) for (const [k, v] of loadScenarioDir(scenariosDir)) scenarios.set(k, v);
  const addScenario = (name, obj) => {
    if (obj === undefined && isObj(name)) { obj = name; name = obj.name; }
    const sc = compileScenario(name, obj);
    scenarios.set(name, sc);
    return { name, steps: sc.steps.length };
  };
  if (Array.isArray(inline)) inline.forEach((s) => addScenario(s));
  else if (isObj(inline)) for (const [k, v] of Object.entries(inline)) addScenario(k, v);

  // Records: a bounded queue (head index + periodic compaction, no O(n) shifts).
  let records = [];
  let head = 0;
  let recordBytes = 0;
  let recordSeq = 0;
  let recording = record;
  const addRecord = (r, bytes) => {
    r.id = ++recordSeq;
    r._bytes = bytes;
    records.push(r);
    recordBytes += bytes;
    while (records.length - head > maxRecords || (recordBytes > maxRecordBytes && records.length - head > 1)) {
      recordBytes -= records[head]._bytes;
      records[head++] = null;
    }
    if (head > 4096 && head * 2 > records.length) { records = records.slice(head); head = 0; }
  };
  const liveRecords = () => records.slice(head);
  const publicRecord = (r) => {
    const { _bytes, ...rest } = r;
    return rest;
  };
  const listRecords = (filter = {}) => {
    let out = liveRecords();
    if (filter.scenario) out = out.filter((r) => r.scenario === filter.scenario);
    if (filter.protocol) out = out.filter((r) => r.protocol === filter.protocol);
    if (filter.since) out = out.filter((r) => r.id > filter.since);
    if (filter.limit) out = out.slice(-filter.limit);
    return out.map(publicRecord);
  };
  const clearRecords = () => {
    const n = records.length - head;
    records = [];
    head = 0;
    recordBytes = 0;
    return n;
  };

  // fail_times: attempts per (scenario, step, exact request body). Bounded.
  const attempts = new Map();
  const countAttempt = (name, stepIndex, raw) => {
    const key = `${name}\0${stepIndex}\0${crypto.createHash('sha1').update(raw).digest('base64')}`;
    const n = (attempts.get(key) ?? 0) + 1;
    if (attempts.size >= 100_000) attempts.clear();
    attempts.set(key, n);
    return n;
  };

  const stats = { requests: 0, active: 0, peak: 0, connections: 0, started: Date.now() };

  async function handleModel(protocol, req, res) {
    const t0 = Date.now();
    const rec = {
      id: 0, time: new Date(t0).toISOString(), ts: t0, method: req.method, path: req.url, protocol: protocol.name,
      headers: redactHeaders(req.headers), body: null, model: null, stream: false, message_count: 0,
      system: '', system_length: 0, tools: [], last_user: null, tool_result: null, scenario: null, step: null,
      status: null, outcome: null, duration_ms: null,
    };
    let bytes = 0;
    let raw = null;
    const error = (e) => {
      rec.status = e.status;
      rec.outcome = 'refused';
      rec.error = e.message;
      sendJson(res, e.status, protocol.errorBody(e.status, e.type, e.message, e.code), e.extraHeaders ?? {});
    };
    try {
      protocol.checkAuth(req, apiKey);
      raw = await readBody(req, MAX_BODY_BYTES);
      if (raw === null) throw new ApiError(413, protocol.name === 'anthropic' ? 'request_too_large' : 'invalid_request_error', 'Request too large.');
      bytes = raw.length;
      let body;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch (e) {
        throw new ApiError(400, 'invalid_request_error', `We could not parse the JSON body of your request. (${e.message})`);
      }
      if (!isObj(body)) throw new ApiError(400, 'invalid_request_error', 'The request body must be a JSON object.');
      rec.body = body;
      const info = protocol.analyse(body, strict);
      info.systemLength = codePoints(info.system);
      Object.assign(rec, {
        model: info.model, stream: info.stream, message_count: info.messageCount, system: info.system,
        system_length: info.systemLength, tools: info.tools, last_user: info.lastUser, tool_result: info.toolResult,
      });
      const name = info.marker ?? DEFAULT_SCENARIO;
      const stepIndex = info.marker ? info.assistantsAfter : info.assistantsTotal;
      rec.scenario = name;
      rec.step = stepIndex;
      const sc = scenarios.get(name);
      if (!sc) {
        const known = [...scenarios.keys()].sort().join(', ');
        throw new ApiError(400, 'invalid_request_error', `model server: unknown scenario "${name}" (known: ${known})`, 'unknown_scenario',
          { 'x-model-server-error': 'unknown-scenario' });
      }
      if (stepIndex >= sc.steps.length && sc.on_exhausted === 'error') {
        throw new ApiError(400, 'invalid_request_error',
          `model server: scenario "${name}" has ${sc.steps.length} step(s); step ${stepIndex} was requested (on_exhausted: error)`,
          'scenario_exhausted', { 'x-model-server-error': 'scenario-exhausted' });
      }
      let step = sc.steps[Math.min(stepIndex, sc.steps.length - 1)];
      if (step.fail_times !== null) {
        rec.attempt = countAttempt(name, stepIndex, raw);
        if (rec.attempt > step.fail_times) step = step.clean;
      }
      if (recording) addRecord(rec, bytes);
      await respond(protocol, req, res, sc, stepIndex, step, info, bytes, rec);
    } catch (e) {
      if (recording && rec.id === 0) addRecord(rec, bytes);
      if (e instanceof ApiError) error(e);
      else throw e;
    } finally {
      rec.duration_ms = Date.now() - t0;
    }
  }

  function respond(protocol, req, res, sc, stepIndex, step, info, bytes, rec) {
    const ctx = step.templated ? {
      last_user: info.lastUser ?? '', message_count: info.messageCount, system: info.system,
      system_length: info.systemLength, tool_result: info.toolResult ?? '', tool_results: info.toolResults.join('\n'),
      tool_result_count: info.toolResults.length, tools: info.tools.join(','), tool_count: info.tools.length,
      model: info.model, protocol: protocol.name, scenario: sc.name, step: stepIndex,
    } : null;
    const baseHeaders = {
      'x-scenario': sc.name, 'x-scenario-step': String(stepIndex),
      [protocol.name === 'anthropic' ? 'request-id' : 'x-request-id']: newId('req_'),
    };
    return new Promise((resolve) => {
      let timer = null;
      let closed = false;
      stats.active++;
      if (stats.active > stats.peak) stats.peak = stats.active;
      let done = false;
      const finish = (outcome) => {
        if (done) return;
        done = true;
        stats.active--;
        if (rec.outcome === null) rec.outcome = outcome;
        clearTimeout(timer);
        resolve();
      };
      res.on('close', () => {
        closed = true;
        finish(res.writableFinished ? 'completed' : 'client_closed');
      });
      const start = () => {
        timer = null;
        if (closed) return;
        if (step.hang) { rec.outcome = 'hang'; return; }
        if (step.error) {
          const e = step.error;
          const message = e.message !== null ? fillTemplate(String(e.message), ctx ?? {}) : (DEFAULT_ERROR_MESSAGES[e.status] ?? `HTTP ${e.status}`);
          rec.status = e.status;
          rec.outcome = 'error';
          if (typeof e.body === 'string') {
            res.writeHead(e.status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(e.body), ...baseHeaders, ...e.headers });
            res.end(e.body);
          } else {
            const body = e.body !== undefined ? e.body : protocol.errorBody(e.status, e.type, message, e.code);
            sendJson(res, e.status, body, { ...baseHeaders, ...e.headers });
          }
          return;
        }
        const plan = buildPlan(step, ctx, info, bytes, protocol.name);
        rec.status = 200;
        if (!info.stream) return sendNonStream(protocol, res, plan, info, step, baseHeaders, rec);
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...baseHeaders });
        pump(res, streamFrames(protocol.name, plan, info, step), rec, () => closed, (t) => { timer = t; });
      };
      if (step.delay_ms > 0) timer = setTimeout(start, step.delay_ms);
      else start();
    });
  }

  function sendNonStream(protocol, res, plan, info, step, headers, rec) {
    const body = Buffer.from(JSON.stringify(nonStreamBody(protocol.name, plan, info)));
    const half = body.subarray(0, Math.max(1, Math.floor(body.length / 2)));
    if (step.cut_after !== null || step.hang_after !== null) {
      // Promise the whole body, send half of it, then cut or stall.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, ...headers });
      res.write(half);
      if (step.cut_after !== null) { rec.outcome = 'cut'; cutConnection(res, step.cut_mode); } else rec.outcome = 'hang';
      return;
    }
    if (step.stream_error) {
      const e = step.stream_error;
      const status = protocol.name === 'anthropic' ? 529 : 500;
      rec.status = status;
      rec.outcome = 'error';
      return sendJson(res, status, protocol.errorBody(status, e.type, e.message ?? DEFAULT_ERROR_MESSAGES[status]), headers);
    }
    // Non-streaming "malformed": a 200 whose JSON body is cut in half.
    const out = step.malformed.length ? half : body;
    if (step.malformed.length) rec.outcome = 'malformed';
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': out.length, ...headers });
    res.end(out);
  }

  // Write frames in order, honouring per-frame waits and back-pressure
  // ('drain'). Waits are kept against absolute deadlines (timers, never busy
  // loops), so event-loop lag under load does not add up over a long stream;
  // after a drain the schedule restarts from now, so a slow reader gets no burst.
  function pump(res, frames, rec, isClosed, setTimer) {
    let i = 0;
    let waitedAt = -1;
    let due = performance.now();
    const step = () => {
      setTimer(null);
      while (i < frames.length) {
        if (isClosed()) return;
        const f = frames[i];
        if (f.wait > 0 && waitedAt !== i) {
          waitedAt = i;
          due += f.wait;
          const left = due - performance.now();
          if (left >= 1) {
            setTimer(setTimeout(step, left));
            return;
          }
        }
        i++;
        if (f.cut) { rec.outcome = 'cut'; cutConnection(res, f.cut); return; }
        if (f.hang) { rec.outcome = 'hang'; return; }
        if (f.end) { res.end(); return; }
        if (!res.write(f.s)) {
          res.once('drain', () => { due = Math.max(due, performance.now()); step(); });
          return;
        }
      }
    };
    step();
  }

  async function handleControl(req, res, pathname, query) {
    if (pathname === '/_health') {
      return sendJson(res, 200, { ok: true, scenarios: scenarios.size, records: records.length - head, recording });
    }
    if (pathname === '/_stats') {
      if (req.method === 'DELETE') { stats.peak = stats.active; stats.requests = 0; return sendJson(res, 200, { ok: true }); }
      return sendJson(res, 200, { ...stats, uptime_ms: Date.now() - stats.started });
    }
    if (pathname === '/_requests') {
      if (req.method === 'DELETE') return sendJson(res, 200, { cleared: clearRecords() });
      if (req.method !== 'GET') return sendJson(res, 405, { error: 'use GET or DELETE' });
      const num = (k) => (query.has(k) ? Number(query.get(k)) || 0 : 0);
      const list = listRecords({ scenario: query.get('scenario'), protocol: query.get('protocol'), since: num('since'), limit: num('limit') });
      return sendJson(res, 200, { requests: list, count: list.length, total: recordSeq, recording });
    }
    if (pathname === '/_recording' && req.method === 'POST') {
      const raw = await readBody(req, 1 << 16);
      try {
        const b = JSON.parse(raw.toString('utf8'));
        if (typeof b.enabled !== 'boolean') throw new Error('"enabled" must be a boolean');
        recording = b.enabled;
        return sendJson(res, 200, { recording });
      } catch (e) {
        return sendJson(res, 400, { error: e.message });
      }
    }
    if (pathname === '/_scenarios') {
      if (req.method === 'GET') {
        return sendJson(res, 200, { scenarios: [...scenarios.values()].map((s) => ({ name: s.name, description: s.description, steps: s.steps.length, on_exhausted: s.on_exhausted })) });
      }
      if (req.method === 'POST') {
        const raw = await readBody(req, MAX_BODY_BYTES);
        let b;
        try { b = JSON.parse(raw === null ? '' : raw.toString('utf8')); } catch (e) { return sendJson(res, 400, { error: `invalid JSON: ${e.message}` }); }
        if (!isObj(b)) return sendJson(res, 400, { error: 'body must be {name, steps, ...}' });
        try {
          return sendJson(res, 201, addScenario(b.name, b));
        } catch (e) {
          if (e instanceof ScenarioError) return sendJson(res, 400, { error: e.message });
          throw e;
        }
      }
      return sendJson(res, 405, { error: 'use GET or POST' });
    }
    const m = /^\/_scenarios\/([^/]+)$/.exec(pathname);
    if (m) {
      let name;
      try { name = decodeURIComponent(m[1]); } catch { return sendJson(res, 400, { error: 'malformed scenario name in URL' }); }
      const sc = scenarios.get(name);
      if (!sc) return sendJson(res, 404, { error: `unknown scenario "${name}"` });
      if (req.method === 'DELETE') { scenarios.delete(name); if (name === DEFAULT_SCENARIO) scenarios.set(name, compileScenario(name, BUILTIN_DEFAULT)); return sendJson(res, 200, { deleted: name }); }
      return sendJson(res, 200, { name, ...sc.source, on_exhausted: sc.on_exhausted });
    }
    return sendJson(res, 404, { error: `no control endpoint ${req.method} ${pathname}` });
  }

  function handleModels(req, res, pathname) {
    const isAnthropic = req.headers['anthropic-version'] !== undefined || req.headers['x-api-key'] !== undefined;
    const protocol = isAnthropic ? anthropic : openai;
    try {
      protocol.checkAuth(req, apiKey);
    } catch (e) {
      return sendJson(res, e.status, protocol.errorBody(e.status, e.type, e.message, e.code));
    }
    const one = /^\/(?:v1\/)?models\/(.+)$/.exec(pathname);
    if (isAnthropic) {
      const data = ANTHROPIC_MODELS.map(([id, display]) => ({ type: 'model', id, display_name: display, created_at: '2025-01-01T00:00:00Z' }));
      if (one) return sendJson(res, 200, data.find((d) => d.id === one[1]) ?? { type: 'model', id: one[1], display_name: one[1], created_at: '2025-01-01T00:00:00Z' });
      return sendJson(res, 200, { data, has_more: false, first_id: data[0].id, last_id: data[data.length - 1].id });
    }
    const data = OPENAI_MODELS.map((id) => ({ id, object: 'model', created: 1735689600, owned_by: 'tusko-model-server' }));
    if (one) return sendJson(res, 200, { id: one[1], object: 'model', created: 1735689600, owned_by: 'tusko-model-server' });
    return sendJson(res, 200, { object: 'list', data });
  }

  const server = http.createServer({ keepAlive: true, noDelay: true, requestTimeout: 120_000, headersTimeout: 40_000 }, (req, res) => {
    req.on('error', () => {});
    res.on('error', () => {});
    const q = req.url.indexOf('?');
    const pathname = q < 0 ? req.url : req.url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : req.url.slice(q + 1));
    let p;
    if (pathname.startsWith('/_')) p = handleControl(req, res, pathname, query);
    else if (pathname === '/v1/chat/completions' || pathname === '/chat/completions') {
      stats.requests++;
      if (req.method !== 'POST') return sendJson(res, 405, openaiErrorBody(405, 'invalid_request_error', `Method ${req.method} not allowed; use POST.`));
      p = handleModel(openai, req, res);
    } else if (pathname === '/v1/messages' || pathname === '/messages') {
      stats.requests++;
      if (req.method !== 'POST') return sendJson(res, 405, anthropicErrorBody(405, 'invalid_request_error', `Method ${req.method} not allowed; use POST.`));
      p = handleModel(anthropic, req, res);
    } else if (/^\/(?:v1\/)?models(?:\/.+)?$/.test(pathname) && req.method === 'GET') {
      return handleModels(req, res, pathname);
    } else {
      return sendJson(res, 404, openaiErrorBody(404, 'invalid_request_error', `Unknown request URL: ${req.method} ${pathname}`, 'unknown_url'));
    }
    if (verbose) {
      const t0 = Date.now();
      res.on('close', () => process.stderr.write(`${req.method} ${pathname} ${res.statusCode} ${Date.now() - t0}ms\n`));
    }
    p.catch((e) => {
      process.stderr.write(`model-server: internal error on ${req.method} ${pathname}: ${e.stack ?? e}\n`);
      if (!res.headersSent) sendJson(res, 500, { error: { message: `model server internal error: ${e.message}`, type: 'server_error', param: null, code: null } });
      else res.destroy();
    });
  });
  server.maxConnections = Infinity;
  server.maxRequestsPerSocket = 0;
  server.keepAliveTimeout = 30_000;
  server.on('connection', (sock) => {
    stats.connections++;
    sock.on('close', () => { stats.connections--; });
  });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, backlog: 8192 }, () => { server.off('error', reject); resolve(); });
  });
  const actualPort = server.address().port;
  let closing = null;
  return {
    url: `http://${host}:${actualPort}`,
    port: actualPort,
    server,
    requests: (filter) => listRecords(typeof filter === 'string' ? { scenario: filter } : filter ?? {}),
    clearRequests: () => { clearRecords(); },
    addScenario,
    removeScenario: (name) => scenarios.delete(name),
    scenarioNames: () => [...scenarios.keys()].sort(),
    setRecording: (on) => { recording = !!on; },
    stats: () => ({ ...stats }),
    close() {
      if (!closing) {
        closing = new Promise((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      }
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------

const USAGE = `usage: node tests/model-server/server.mjs [options]
  --port P           listen on 127.0.0.1:P (default 0: a free port)
  --scenarios DIR    scenario directory (default tests/fixtures/scenarios)
  --no-record        do not record requests (benchmarks)
  --max-records N    keep the last N records (default ${DEFAULT_MAX_RECORDS})
  --api-key KEY      accept only this key (default: any non-empty key)
  --no-strict        do not refuse malformed conversations
  --verbose          one line per request on stderr
prints "listening http://127.0.0.1:PORT" on stdout when ready`;

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--port': {
        const p = Number(val());
        if (!Number.isInteger(p) || p < 0 || p > 65535) throw new Error('--port must be 0..65535');
        o.port = p;
        break;
      }
      case '--scenarios': o.scenariosDir = path.resolve(val()); break;
      case '--no-record': o.record = false; break;
      case '--max-records': o.maxRecords = Number(val()); if (!(o.maxRecords >= 1)) throw new Error('--max-records must be >= 1'); break;
      case '--api-key': o.apiKey = val(); break;
      case '--no-strict': o.strict = false; break;
      case '--verbose': o.verbose = true; break;
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      default: throw new Error(`unknown option ${a}`);
    }
  }
  return o;
}

function isMain() {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`model-server: ${e.message}\n${USAGE}\n`);
    process.exit(2);
  }
  startModelServer(opts).then((ms) => {
    process.stdout.write(`listening ${ms.url}\n`);
    const stop = () => ms.close().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }, (e) => {
    process.stderr.write(`model-server: ${e.message}\n`);
    process.exit(1);
  });
}
