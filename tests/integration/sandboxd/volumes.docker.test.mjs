// The volumes suite (volumes.test.mjs) against the docker runtime: host folders
// as binds, named volumes as Docker volumes. Needs a Docker engine at
// DOCKER_HOST (tests/setup.d/20-docker.sh).
import { describe } from 'node:test';

process.env.SBX_TEST_RUNTIME = 'docker';
describe('[docker runtime]', async () => {
  await import('./volumes.test.mjs');
});
