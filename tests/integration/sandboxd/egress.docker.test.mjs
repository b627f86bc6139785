// The sandbox egress suite (egress.test.mjs) against the docker runtime: the
// proxy listener made in each container's network namespace (NetworkMode
// none) through its process. Needs a Docker engine at DOCKER_HOST
// (tests/setup.d/20-docker.sh starts one and imports the image).
import { describe } from 'node:test';

process.env.SBX_TEST_RUNTIME = 'docker';
describe('[docker runtime]', async () => {
  await import('./egress.test.mjs');
});
