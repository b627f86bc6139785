// The shared spec suite (spec.test.mjs) against the docker runtime: the same
// tests, with sbx.mjs's runtime set to docker (SANDBOX_RUNTIME=docker, and the
// host-side checks asking the engine). Needs a Docker engine at DOCKER_HOST
// (tests/setup.d/20-docker.sh starts one and imports the image).
import { describe } from 'node:test';

process.env.SBX_TEST_RUNTIME = 'docker';
describe('[docker runtime]', async () => {
  await import('./spec.test.mjs');
});
