// tests/lib/k8s-kubelet.mjs — a kubelet for the stand-in API server
// (k8s-standin.mjs) that runs a real process per pod: tusko-execd, bound to a
// loopback address of its own (127.0.0.x) as the pod IP, on the pod's execd
// port, with the pod's container env and a workspace directory of its own.
// The pod becomes Running and Ready once execd's /healthz answers; it is
// killed once the pod is Terminating (deletionTimestamp set) or gone from the
// API; past the pod's activeDeadlineSeconds it is killed and marked
// Failed/DeadlineExceeded, and a process that exits on its own leaves the pod
// Failed (restartPolicy Never) with Ready False, as the real kubelet does.
//
// What it is not: it runs execd on the host, not the pod's image under a
// container runtime, so the pod's securityContext, read-only root and limits
// are not applied here.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export function processKubelet({ execd, dir, port = 44772, firstHost = 10,
  subnet = `127.${2 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 256)}` }) {
  let next = firstHost;
  const procs = new Map(); // ns/name → {child, ip}
  const kubelet = (pod, api) => {
    const ns = pod.metadata.namespace, name = pod.metadata.name, k = `${ns}/${name}`;
    if (next > 250) throw new Error('k8s-kubelet: out of loopback addresses');
    const ip = `${subnet}.${next++}`;
    const ws = fs.mkdtempSync(path.join(dir, `pod-${name}-`));
    const c = (pod.spec.containers || [])[0] || {};
    const env = { PATH: process.env.PATH, HOME: ws };
    for (const e of c.env || []) if (typeof e.value === 'string') env[e.name] = e.value;
    env.EXECD_LISTEN = `${ip}:${port}`;
    env.EXECD_WORKSPACE = ws;
    const child = spawn(execd, [], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d) => { if (log.length < 65536) log += d; });
    const started = Date.now();
    const entry = { child, ip, log: () => log, exited: null, tick: null };
    procs.set(k, entry);
    child.on('exit', (code, sig) => { entry.exited = { code, sig }; });
    const t = new Date().toISOString();
    let ready = false;
    const tick = setInterval(async () => {
      const p = api.pod(ns, name);
      if (!p || p.metadata.uid !== pod.metadata.uid) { // deleted: the container goes
        clearInterval(tick);
        child.kill('SIGKILL');
        procs.delete(k);
        return;
      }
      if (p.metadata.deletionTimestamp) { // Terminating: stopped, the API object goes after the grace
        child.kill('SIGKILL');
        return;
      }
      if (entry.exited && p.status.phase !== 'Failed') {
        clearInterval(tick);
        const { code, sig } = entry.exited;
        api.setStatus(ns, name, { phase: 'Failed',
          conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: new Date().toISOString() }],
          containerStatuses: [{ name: c.name, ready: false, restartCount: 0, image: c.image, imageID: '', started: false,
            state: { terminated: { exitCode: code ?? 137, reason: sig ? 'Error' : 'Completed', signal: sig || undefined } } }] });
        return;
      }
      const dl = p.spec.activeDeadlineSeconds;
      if (typeof dl === 'number' && Date.now() - started > dl * 1000 && p.status.phase !== 'Failed') {
        child.kill('SIGKILL');
        clearInterval(tick);
        api.setStatus(ns, name, { phase: 'Failed', reason: 'DeadlineExceeded',
          message: `Pod was active on the node longer than the specified deadline`,
          conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: new Date().toISOString() }] });
        return;
      }
      if (ready || entry.exited) return;
      try {
        const r = await fetch(`http://${ip}:${port}/healthz`, { signal: AbortSignal.timeout(500) });
        if (r.ok && !ready) {
          ready = true;
          api.setStatus(ns, name, { phase: 'Running', podIP: ip, podIPs: [{ ip }], hostIP: '127.0.0.1', startTime: t,
            conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date().toISOString() }],
            containerStatuses: [{ name: c.name, ready: true, restartCount: 0, image: c.image, imageID: '',
              started: true, state: { running: { startedAt: t } } }] });
        }
      } catch { /* not listening yet */ }
    }, 50);
    entry.tick = tick;
    api.setStatus(ns, name, { phase: 'Pending', startTime: t });
  };
  kubelet.procs = procs;
  kubelet.stop = () => {
    for (const e of procs.values()) { clearInterval(e.tick); e.child.kill('SIGKILL'); }
    procs.clear();
  };
  return kubelet;
}
