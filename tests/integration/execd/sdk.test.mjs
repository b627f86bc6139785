// The official OpenSandbox SDK (@alibaba-group/opensandbox from npm) talking to
// tusko-execd directly: health, metrics, commands (foreground, background with
// logs, sessions, interrupt) and files.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ConnectionConfig, DefaultAdapterFactory } from '@alibaba-group/opensandbox';

import { stopAll } from '../../lib/harness.mjs';
import { TOKEN, startExecd, until } from './lib.mjs';

after(stopAll);

let ex, sdk;
before(async () => {
  ex = await startExecd();
  const connectionConfig = new ConnectionConfig({ domain: ex.url, requestTimeoutSeconds: 30 });
  sdk = new DefaultAdapterFactory().createExecdStack({
    connectionConfig,
    execdBaseUrl: ex.url,
    endpointHeaders: { 'X-EXECD-ACCESS-TOKEN': TOKEN },
  });
});

describe('the official SDK against tusko-execd', () => {
  test('health and metrics', async () => {
    assert.equal(await sdk.health.ping(), true);
    const m = await sdk.metrics.getMetrics();
    assert.ok(m.cpuCount >= 1 && m.memoryTotalMiB > 0 && m.timestamp > 0);
  });

  test('a foreground command: logs, exit code, handlers in order', async () => {
    const seen = [];
    const r = await sdk.commands.run('echo out; echo err >&2; exit 3', { workingDirectory: ex.ws }, {
      onInit: () => seen.push('init'),
      onStdout: (m) => seen.push(`out:${m.text}`),
      onStderr: (m) => seen.push(`err:${m.text}`),
      onError: (e) => seen.push(`error:${e.name}:${e.value}`),
    });
    assert.ok(r.id);
    assert.deepEqual(r.logs.stdout.map((m) => m.text), ['out']);
    assert.deepEqual(r.logs.stderr.map((m) => m.text), ['err']);
    assert.equal(r.exitCode, 3);
    assert.equal(seen[0], 'init');
    assert.equal(seen.at(-1), 'error:CommandExecError:3');
    const ok = await sdk.commands.run('printf "%s\\n" "$GREETING"', { envs: { GREETING: 'hi' }, timeoutSeconds: 10 });
    assert.equal(ok.exitCode, 0);
    assert.deepEqual(ok.logs.stdout.map((m) => m.text), ['hi']);
    assert.ok(ok.complete && ok.complete.executionTimeMs >= 0);
    const st = await sdk.commands.getCommandStatus(ok.id);
    assert.equal(st.running, false);
    assert.equal(st.exitCode, 0);
    assert.ok(st.startedAt instanceof Date);
  });

  test('a background command with incremental logs, then interrupt', async () => {
    const r = await sdk.commands.run('for i in 1 2 3; do echo line$i; done; sleep 300', { background: true });
    assert.ok(r.id);
    const logs = await until(async () => {
      const l = await sdk.commands.getBackgroundCommandLogs(r.id);
      return l.content.includes('line3') ? l : null;
    }, { what: 'background output' });
    assert.equal(logs.content, 'line1\nline2\nline3\n');
    const more = await sdk.commands.getBackgroundCommandLogs(r.id, logs.cursor);
    assert.equal(more.content, '');
    assert.equal(more.cursor, logs.cursor);
    await sdk.commands.interrupt(r.id);
    const st = await until(async () => {
      const s = await sdk.commands.getCommandStatus(r.id);
      return s.running ? null : s;
    }, { what: 'the interrupted command to end' });
    assert.notEqual(st.exitCode, 0);
  });

  test('a bash session keeps its state', async () => {
    const sid = await sdk.commands.createSession({ workingDirectory: ex.ws });
    await sdk.commands.runInSession(sid, 'export N=5; cd /tmp');
    const r = await sdk.commands.runInSession(sid, 'echo $((N*2)) $PWD');
    assert.deepEqual(r.logs.stdout.map((m) => m.text), ['10 /tmp']);
    assert.equal(r.exitCode, 0);
    await sdk.commands.deleteSession(sid);
  });

  test('files: write, read (with a range), info, search, move, replace, permissions, directories', async () => {
    const f = sdk.files;
    await f.createDirectories([{ path: path.join(ex.ws, 'sdk/dir'), mode: 755 }]);
    await f.writeFiles([
      { path: path.join(ex.ws, 'sdk/a.txt'), data: 'hello localhost\n', mode: 644 },
      { path: path.join(ex.ws, 'sdk/dir/b.bin'), data: new Uint8Array([0, 1, 2, 255]) },
    ]);
    assert.equal(await f.readFile(path.join(ex.ws, 'sdk/a.txt')), 'hello localhost\n');
    assert.equal(await f.readFile(path.join(ex.ws, 'sdk/a.txt'), { range: 'bytes=6-14' }), 'localhost');
    assert.deepEqual([...(await f.readBytes(path.join(ex.ws, 'sdk/dir/b.bin')))], [0, 1, 2, 255]);
    const info = await f.getFileInfo([path.join(ex.ws, 'sdk/a.txt')]);
    assert.equal(info[path.join(ex.ws, 'sdk/a.txt')].size, 16);
    const found = await f.search({ path: path.join(ex.ws, 'sdk'), pattern: '*.txt' });
    assert.deepEqual(found.map((x) => x.path), [path.join(ex.ws, 'sdk/a.txt')]);
    const counts = await f.replaceContentsDetailed([{ path: path.join(ex.ws, 'sdk/a.txt'), oldContent: 'localhost', newContent: 'tusko' }]);
    assert.equal(counts[0].replacedCount, 1);
    await f.moveFiles([{ src: path.join(ex.ws, 'sdk/a.txt'), dest: path.join(ex.ws, 'sdk/dir/c.txt') }]);
    assert.equal(fs.readFileSync(path.join(ex.ws, 'sdk/dir/c.txt'), 'utf8'), 'hello tusko\n');
    await f.setPermissions([{ path: path.join(ex.ws, 'sdk/dir/c.txt'), mode: 600 }]);
    assert.equal(fs.statSync(path.join(ex.ws, 'sdk/dir/c.txt')).mode & 0o777, 0o600);
    const list = await f.listDirectory({ path: path.join(ex.ws, 'sdk'), depth: 2 });
    assert.deepEqual(list.map((x) => path.relative(ex.ws, x.path)), ['sdk/dir', 'sdk/dir/b.bin', 'sdk/dir/c.txt']);
    await f.deleteFiles([path.join(ex.ws, 'sdk/dir/b.bin')]);
    await f.deleteDirectories([path.join(ex.ws, 'sdk')]);
    assert.ok(!fs.existsSync(path.join(ex.ws, 'sdk')));
  });

  test('the SDK sees our refusals as API errors with our message', async () => {
    await assert.rejects(() => sdk.files.readFile('/etc/passwd'), (e) => e.statusCode === 400 || /outside the workspace/.test(String(e.message)));
    await assert.rejects(() => sdk.files.writeFiles([{ path: '../escape.txt', data: 'x' }]), (e) => e.statusCode === 400);
    assert.ok(!fs.existsSync(path.join(path.dirname(ex.ws), 'escape.txt')));
  });
});
