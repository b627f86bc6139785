// bench/acquire/k8s-standin.mjs — the stand-in "cluster" of the tests
// (tests/lib/k8s-cluster.mjs: the stand-in API server over TLS plus the process
// kubelet running a real tusko-execd per pod) for the kubernetes rows of
// bench/acquire: writes the environment tusko-sandboxd needs to argv[2] as
// NAME=value lines, then serves until SIGTERM. It is NOT Kubernetes: no
// scheduler, no image pull, no container runtime; a pod is "Ready" when the
// kubelet's 50 ms poll sees execd answer.
import fs from 'node:fs';
import { startCluster } from '../../tests/lib/k8s-cluster.mjs';

const k = await startCluster();
const env = k.env();
fs.writeFileSync(process.argv[2], Object.entries(env).map(([n, v]) => `${n}=${v}`).join('\n') + '\n');
const stop = async () => {
  await k.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setInterval(() => {}, 1 << 30);
