// The escape battery: from inside a sandbox, try to see and touch the host, and
// to exhaust its resources. Every attempt must be refused or contained. Each
// probe runs as untrusted code would: a command through the server proxy.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { after, before, describe, test } from 'node:test';

import { api as httpApi, stopAll } from '../../lib/harness.mjs';
import { GONE, INIT_COMM, cgroupFile, footprint, initPid, pidns, startSandboxd, until } from './sbx.mjs';

after(stopAll);

// Runs Python in the sandbox and returns the JSON it prints.
async function py(api, id, code) {
  const r = await api.exec(id, `python3 - <<'PY'\nimport json, os, ctypes, errno, socket\nlibc = ctypes.CDLL(None, use_errno=True)\ndef err(rc):\n    return 0 if rc == 0 else ctypes.get_errno()\n${code}\nPY`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.exitCode, 0, `python failed: ${r.stdout} ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const X86 = os.arch() === 'x64';
const NR = X86
  ? { init_module: 175, finit_module: 313, delete_module: 176, unshare: 272, setns: 308, kexec_load: 246, bpf: 321, perf_event_open: 298, keyctl: 250, pivot_root: 155, chroot: 161, reboot: 169 }
  : { init_module: 105, finit_module: 273, delete_module: 106, unshare: 97, setns: 268, kexec_load: 104, bpf: 280, perf_event_open: 241, keyctl: 219, pivot_root: 41, chroot: 51, reboot: 142 };

describe('escape battery', () => {
  let sbx, api, id;
  const secret = `/tmp/sbx-escape-secret-${crypto.randomBytes(6).toString('hex')}`;
  before(async () => {
    fs.writeFileSync(secret, 'host secret');
    sbx = await startSandboxd({ env: { SANDBOX_WORKSPACE_SIZE: '64m', SANDBOX_TMP_SIZE: '32m' } });
    api = sbx.api;
    const c = await api.create({ resourceLimits: { memory: '256Mi', pids: '64', cpu: '1' } });
    assert.equal(c.status, 202, c.text);
    id = c.json.id;
  });
  after(async () => {
    fs.rmSync(secret, { force: true });
    await api.del(id);
    await sbx.stop();
  });

  test('host processes are not visible', async () => {
    const r = await api.exec(id, `cat /proc/[0-9]*/comm | sort -u; echo pids=$(ls -d /proc/[0-9]* | wc -l); kill -0 ${process.pid} 2>/dev/null && echo reachable || echo unreachable`);
    assert.doesNotMatch(r.stdout, /^node$/m, 'the test runner (node) is visible');
    assert.doesNotMatch(r.stdout, /^(tusko-sandboxd|postgres|systemd|init)$/m);
    assert.match(r.stdout, new RegExp(`^${INIT_COMM}$`, 'm'), 'pid 1 is the sandbox init (docker: execd)');
    const pids = Number(r.stdout.match(/pids=(\d+)/)[1]);
    assert.ok(pids < 20, `${pids} processes visible`);
    if (process.pid > 1000) assert.match(r.stdout, /unreachable/);
  });

  test('host files outside the image cannot be read', async () => {
    const r = await api.exec(id, `cat ${secret} 2>&1; echo rc=$?; ls /work 2>&1; echo rc=$?; ls ${sbx.stateDir} 2>&1; echo rc=$?; cat /etc/shadow 2>&1; echo rc=$?; ls /sys | wc -l`);
    assert.doesNotMatch(r.stdout, /host secret/);
    assert.deepEqual([...r.stdout.matchAll(/rc=(\d+)/g)].map((m) => m[1]), ['1', '2', '2', '1']);
    assert.match(r.stdout, /\n0$/, '/sys is empty');
  });

  test('the image cannot be written; /workspace and /tmp can', async () => {
    const r = await api.exec(id, 'for f in /usr/bin/evil /etc/evil /bin/sh /opt/tusko/bin/tusko-execd /dev/evil /proc/sys/kernel/sysrq; do (echo x > $f) 2>/dev/null; echo "$f rc=$?"; done; echo ok > /workspace/w && echo ok > /tmp/t && cat /workspace/w /tmp/t');
    for (const f of ['/usr/bin/evil', '/etc/evil', '/bin/sh', '/opt/tusko/bin/tusko-execd', '/dev/evil', '/proc/sys/kernel/sysrq'])
      assert.match(r.stdout, new RegExp(`${f} rc=1`), f);
    assert.match(r.stdout, /ok\nok$/);
  });

  test('no capabilities, no_new_privs, seccomp filter on', async () => {
    const r = await api.exec(id, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status");
    for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.match(r.stdout, new RegExp(`${cap}:\\s+0000000000000000`));
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /Seccomp:\s+2/);
  });

  test('mount, namespaces, chroot, pivot_root, module loading, kexec, bpf, perf, keyctl, reboot are refused', async () => {
    const res = await py(api, id, `
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
nr = ${JSON.stringify(NR)}
out = {}
out['mount'] = err(libc.mount(b"none", b"/mnt", b"tmpfs", 0, None))
out['umount'] = err(libc.umount2(b"/workspace", 2))
for k in ['init_module', 'delete_module']:
    out[k] = err(libc.syscall(nr[k], 0, 0, b""))
out['finit_module'] = err(libc.syscall(nr['finit_module'], 0, b"", 0))
out['unshare_user'] = err(libc.syscall(nr['unshare'], CLONE_NEWUSER))
out['unshare_mnt'] = err(libc.syscall(nr['unshare'], CLONE_NEWNS))
out['setns'] = err(libc.syscall(nr['setns'], 0, 0))
out['chroot'] = err(libc.syscall(nr['chroot'], b"/tmp"))
out['pivot_root'] = err(libc.syscall(nr['pivot_root'], b"/tmp", b"/tmp"))
out['kexec_load'] = err(libc.syscall(nr['kexec_load'], 0, 0, 0, 0))
out['bpf'] = err(libc.syscall(nr['bpf'], 0, 0, 0))
out['perf_event_open'] = err(libc.syscall(nr['perf_event_open'], 0, 0, -1, -1, 0))
out['keyctl'] = err(libc.syscall(nr['keyctl'], 0, 0, 0, 0, 0))
out['reboot'] = err(libc.syscall(nr['reboot'], 0xfee1dead, 672274793, 0x1234567, 0))
print(json.dumps(out))`);
    for (const [k, v] of Object.entries(res)) assert.equal(v, 1 /* EPERM */, `${k} answered errno ${v}`);
    const u = await api.exec(id, 'unshare -r true 2>&1; echo rc=$?; mount -t tmpfs none /mnt 2>&1; echo rc=$?');
    assert.deepEqual([...u.stdout.matchAll(/rc=(\d+)/g)].map((m) => m[1] !== '0'), [true, true]);
  });

  test('ptrace of another process (and of itself) is refused', async () => {
    const bg = await api.exec(id, 'sleep 300', { background: true });
    assert.equal(bg.status, 200);
    const res = await py(api, id, `
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
sleeper = [p for p in pids if open(f'/proc/{p}/comm').read().strip() == 'sleep'][0]
PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
out = {'attach': err(libc.ptrace(PTRACE_ATTACH, sleeper, 0, 0)), 'seize': err(libc.ptrace(PTRACE_SEIZE, sleeper, 0, 0)),
       'attach_init': err(libc.ptrace(PTRACE_ATTACH, 1, 0, 0)), 'traceme': err(libc.ptrace(PTRACE_TRACEME, 0, 0, 0))}
try:
    open('/proc/1/mem', 'rb').read(1)
    out['init_mem'] = 0
except OSError as e:
    out['init_mem'] = e.errno
print(json.dumps(out))`);
    assert.deepEqual(res, { attach: 1, seize: 1, attach_init: 1, traceme: 1, init_mem: res.init_mem });
    assert.notEqual(res.init_mem, 0, "the init's memory is readable");
  });

  test('raw and packet sockets are refused; the only interface is lo', async () => {
    const res = await py(api, id, `
out = {}
for name, fam, typ, proto in [('raw_icmp', socket.AF_INET, socket.SOCK_RAW, 1), ('raw_tcp6', socket.AF_INET6, socket.SOCK_RAW, 6), ('packet', 17, socket.SOCK_RAW, 0)]:
    try:
        socket.socket(fam, typ, proto).close()
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
out['ifaces'] = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])
print(json.dumps(out))`);
    assert.deepEqual(res, { raw_icmp: 1, raw_tcp6: 1, packet: 1, ifaces: ['lo'] });
  });

  test("the host's loopback services cannot be reached", async () => {
    let connections = 0;
    const srv = net.createServer((c) => {
      connections++;
      c.end('hello from the host\n');
    });
    await new Promise((r) => srv.listen(0, '127.0.0.1', r));
    const port = srv.address().port;
    const ports = [port, 5432, Number(new URL(sbx.url).port)];
    const pg = process.env.TK_TEST_DATABASE_URL && new URL(process.env.TK_TEST_DATABASE_URL);
    if (pg && pg.port) ports.push(Number(pg.port));
    const res = await py(api, id, `
out = {}
for p in ${JSON.stringify(ports)}:
    for host in ['127.0.0.1', '::1']:
        s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
        s.settimeout(2)
        try:
            s.connect((host, p))
            out[f'{host}:{p}'] = 'connected'
        except OSError as e:
            out[f'{host}:{p}'] = errno.errorcode.get(e.errno, str(e.errno))
        s.close()
try:
    socket.create_connection(('10.0.2.2', 80), timeout=1)
    out['route'] = 'connected'
except OSError as e:
    out['route'] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))`);
    srv.close();
    for (const [k, v] of Object.entries(res)) {
      if (k === 'route') assert.equal(v, 'ENETUNREACH', 'no route out of the sandbox');
      else assert.equal(v, 'ECONNREFUSED', `${k}: ${v}`);
    }
    assert.equal(connections, 0);
  });

  test('/proc/self/root, /proc/1/root and open descriptors lead nowhere outside', async () => {
    const res = await py(api, id, `
out = {'self_root': os.readlink('/proc/self/root'), 'outside': [], 'dirfds': []}
try:
    out['init_root'] = os.readlink('/proc/1/root')
except PermissionError:
    out['init_root'] = 'EACCES'  # the init is not dumpable: better still
for p in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        if os.path.exists(f'/proc/{p}/root/work') or os.path.exists(f'/proc/{p}/root/${sbx.stateDir.slice(1)}'):
            out['outside'].append(p)
        for fd in os.listdir(f'/proc/{p}/fd'):
            t = os.readlink(f'/proc/{p}/fd/{fd}')
            if t.startswith('/') and not os.path.exists(t):
                out['outside'].append(f'{p}/{fd}:{t}')
            if os.path.isdir(f'/proc/{p}/fd/{fd}'):
                out['dirfds'].append(t)
    except PermissionError:
        pass
    except FileNotFoundError:
        pass
# every descriptor of this process: nothing but stdio and what Python opened
out['mine'] = sorted(os.listdir('/proc/self/fd'))
print(json.dumps(out))`);
    assert.equal(res.self_root, '/');
    assert.ok(res.init_root === '/' || res.init_root === 'EACCES', res.init_root);
    assert.deepEqual(res.outside, [], 'a path or descriptor that leads outside the sandbox');
    for (const d of res.dirfds) assert.ok(d === '/workspace' || d.startsWith('/workspace/') || d === '/' || d.startsWith('/proc/'), `directory fd ${d}`);
    assert.ok(res.mine.length <= 6, `descriptors: ${res.mine}`);
  });

  test('a fork bomb is stopped by the pids limit and the host stays responsive', async () => {
    const c = await api.create({ resourceLimits: { pids: '64', memory: '256Mi' } });
    const bid = c.json.id;
    const ns = pidns(initPid(sbx.stateDir, bid));
    const bomb = api.exec(bid, 'bomb() { bomb | bomb & }; bomb; sleep 2', { timeout: 4000 });
    await until(() => Number(cgroupFile(bid, 'pids', 'pids.events').split(/\s+/)[1]) > 0, { what: 'the pids limit to be hit' });
    assert.ok(Number(cgroupFile(bid, 'pids', 'pids.current')) <= 64);
    const h = await httpApi(sbx.url, '/healthz');
    assert.equal(h.status, 200, 'the service answers during the bomb');
    const other = await api.exec(id, 'echo still here');
    assert.equal(other.stdout, 'still here', 'another sandbox is unaffected');
    await bomb;
    assert.equal((await api.del(bid)).status, 204);
    assert.deepEqual(footprint(sbx.stateDir, bid, ns), GONE);
  });

  test('a memory bomb is OOM-killed inside the sandbox only', async () => {
    const c = await api.create({ resourceLimits: { memory: '128Mi' } });
    const mid = c.json.id;
    const r = await api.exec(mid, 'python3 -c "x = bytearray(1024 * 1024 * 1024); print(len(x))"');
    assert.notEqual(r.exitCode, 0, 'the bomb was not stopped');
    assert.doesNotMatch(r.stdout, /1073741824/);
    const oom = cgroupFile(mid, 'memory', 'memory.oom_control');
    assert.match(oom, /oom_kill [1-9]/, oom);
    const after1 = await api.exec(mid, 'echo survived');
    assert.equal(after1.stdout, 'survived', 'execd and the sandbox live on');
    assert.equal((await httpApi(sbx.url, '/healthz')).status, 200);
    await api.del(mid);
  });

  test('filling the disk stops at the workspace limit', async () => {
    const r = await api.exec(id, 'dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo rc=$?; df -k /workspace | tail -1; rm -f /workspace/fill');
    assert.match(r.stdout, /No space left on device/);
    assert.match(r.stdout, /rc=1/);
    const total = Number(r.stdout.match(/\n\S+\s+(\d+)\s+\d+\s+\d+/)[1]);
    assert.equal(total, 64 * 1024, 'a 64 MiB workspace');
    const t = await api.exec(id, 'dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1 | grep -i space; df -k /tmp | tail -1; rm -f /tmp/fill');
    assert.match(t.stdout, /No space left on device/);
    assert.equal(Number(t.stdout.match(/\n\S+\s+(\d+)/)[1]), 32 * 1024, 'a 32 MiB /tmp');
  });
});
