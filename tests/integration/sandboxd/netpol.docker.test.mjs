// The networkPolicy suite (netpol.test.mjs) against the docker runtime. Needs a
// Docker engine at DOCKER_HOST (tests/setup.d/20-docker.sh).
import { describe } from 'node:test';

process.env.SBX_TEST_RUNTIME = 'docker';
describe('[docker runtime]', async () => {
  await import('./netpol.test.mjs');
});
