#!/usr/bin/env bash
# images/sandbox/export-docker.sh — import the sandbox root filesystem into Docker
# as tusko-sandbox:<recipe hash> (and tag it tusko-sandbox:latest). Builds the
# image first if the current recipe has none (see build.sh). Prints the tag.
# Needs a reachable Docker engine (the docker CLI; DOCKER_HOST is honoured).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
die() {
  echo "[sandbox-image] error: $*" >&2
  exit 1
}

command -v docker >/dev/null || die "the docker CLI is not installed (package docker.io)"
docker info >/dev/null 2>&1 ||
  die "no Docker engine reachable (docker info failed${DOCKER_HOST:+ for DOCKER_HOST=$DOCKER_HOST}): start dockerd or set DOCKER_HOST"

hash=$("$here/build.sh" --hash)
tag=tusko-sandbox:$hash
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "[sandbox-image] $tag is already in Docker" >&2
else
  rootfs=$("$here/build.sh" --print-path)
  echo "[sandbox-image] importing $rootfs as $tag" >&2
  # /dev, /proc, /sys come from the container runtime; keep them as empty folders.
  tar -C "$rootfs" --numeric-owner --one-file-system \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf - . |
    docker import \
      --change 'ENV LANG=C.UTF-8' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'WORKDIR /workspace' \
      --change 'CMD ["/bin/bash"]' \
      --message "tusko-sandbox $hash (images/sandbox/build.sh)" \
      - "$tag" >/dev/null
fi
docker tag "$tag" tusko-sandbox:latest
echo "$tag"
