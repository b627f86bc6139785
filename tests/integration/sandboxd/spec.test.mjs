// Every answer of tusko-sandboxd against the schemas of the OpenSandbox lifecycle
// spec (specs/opensandbox/sandbox-lifecycle.yml): create, get, list, metadata
// patch, renew, endpoint, and the error bodies of 400, 401, 404 and 409.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

import { ROOT, stopAll } from '../../lib/harness.mjs';
import { client, startSandboxd } from './sbx.mjs';

after(stopAll);

const specPath = process.env.SANDBOXD_SPEC || path.join(ROOT, 'specs/opensandbox/sandbox-lifecycle.yml');
const spec = YAML.parse(fs.readFileSync(specPath, 'utf8'));
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, 'lifecycle.json');

function check(name, value) {
  const v = ajv.getSchema(`lifecycle.json#/components/schemas/${name}`);
  assert.ok(v, `no schema ${name}`);
  if (!v(value)) assert.fail(`${name}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value).slice(0, 1500)}`);
}

function checkError(r, status) {
  assert.equal(r.status, status, r.text);
  check('ErrorResponse', r.json);
  assert.match(r.headers.get('x-request-id') || '', /^[0-9a-f-]{36}$/);
}

describe('lifecycle API against the spec', () => {
  let s, api, id;
  before(async () => {
    s = await startSandboxd();
    api = s.api;
  });
  after(async () => {
    if (id) await api.del(id);
    await s.stop();
  });

  test('create, get, list, patch, renew, endpoint', async () => {
    const c = await api.create({ metadata: { owner: 'spec' }, timeout: 300, resourceLimits: { cpu: '500m', memory: '512Mi' } });
    assert.equal(c.status, 202);
    check('CreateSandboxResponse', c.json);
    id = c.json.id;
    const g = await api.get(id);
    check('Sandbox', g.json);
    const known = ['Pending', 'Running', 'Pausing', 'Paused', 'Resuming', 'Stopping', 'Terminated', 'Failed'];
    assert.ok(known.includes(g.json.status.state));
    const l = await api.list('?state=Running&pageSize=5');
    check('ListSandboxesResponse', l.json);
    for (const it of l.json.items) check('Sandbox', it);
    check('PaginationInfo', l.json.pagination);
    const p = await api.call('PATCH', `/v1/sandboxes/${id}/metadata`, { extra: 'x' });
    check('Sandbox', p.json);
    const r = await api.call('POST', `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: new Date(Date.now() + 7200e3).toISOString() });
    check('RenewSandboxExpirationResponse', r.json);
    const e = await api.call('GET', `/v1/sandboxes/${id}/endpoints/44772?use_server_proxy=true`);
    check('Endpoint', e.json);
    const pz = await api.call('POST', `/v1/sandboxes/${id}/pause`);
    assert.equal(pz.status, 202);
    check('Sandbox', (await api.get(id)).json);
    checkError(await api.call('POST', `/v1/sandboxes/${id}/pause`), 409);
    assert.equal((await api.call('POST', `/v1/sandboxes/${id}/resume`)).status, 202);
  });

  test('error bodies: 400, 401, 404, 409', async () => {
    checkError(await api.create({ image: { uri: 'nope' } }), 400);
    checkError(await client(api.base, null).list(), 401);
    checkError(await api.get('00000000-0000-4000-8000-000000000000'), 404);
    checkError(await api.call('POST', '/v1/sandboxes/x/resume'), 404);
    checkError(await api.list('?page=0'), 400);
    checkError(await api.call('GET', '/v1/snapshots'), 501);
  });
});
