#!/usr/bin/env bash
# deploy/compose/build-images.sh — builds the images the compose stack (and the
# kubernetes manifests) run, locally, from the sandbox root filesystem:
#   tusko-sandbox:<recipe hash> and :latest   images/sandbox/export-docker.sh
#   tusko-stack:local                        that image plus the four programs of
#                                            build/ (make), the shared libraries
#                                            they need that it lacks, and the
#                                            user tusko (uid 10001)
# Needs a Docker engine (DOCKER_HOST is honoured) and a build (make).
#   build-images.sh [--tag TAG]   (default tusko-stack:local)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
root=$(cd "$here/../.." && pwd -P)
tag=tusko-stack:local
[ "${1:-}" = --tag ] && tag=$2
die() {
  echo "[build-images] error: $*" >&2
  exit 1
}
build=${TUSKO_BUILD:-$root/build}
progs=(tusko tusko-sandboxd tusko-execd tusko-browserd)
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || die "$build/$p is missing: run make first"
done
command -v docker >/dev/null || die "the docker CLI is not installed (package docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine reachable (start dockerd or set DOCKER_HOST)"

sandbox=$("$root/images/sandbox/export-docker.sh")
rootfs=$("$root/images/sandbox/build.sh" --print-path)

stage=$(mktemp -d)
cid=
cleanup() {
  rm -rf "$stage"
  [ -z "$cid" ] || docker rm -f "$cid" >/dev/null 2>&1 || true
}
trap cleanup EXIT
mkdir -p "$stage/usr/local/bin" "$stage/usr/local/lib/tusko" "$stage/etc/ld.so.conf.d"
for p in "${progs[@]}"; do install -m 0755 "$build/$p" "$stage/usr/local/bin/$p"; done
install -m 0755 "$here/sandboxd-entry.sh" "$stage/usr/local/bin/tusko-compose-sandboxd"
# the libraries the programs link that the sandbox root filesystem lacks (same
# Debian release as the build machine: images/sandbox/build.sh)
for p in "${progs[@]}"; do ldd "$build/$p"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    if ! find "$rootfs/lib" "$rootfs/usr/lib" -name "$name" -print -quit 2>/dev/null | grep -q .; then
      cp -L "$path" "$stage/usr/local/lib/tusko/$name"
    fi
  done
echo /usr/local/lib/tusko >"$stage/etc/ld.so.conf.d/tusko.conf"

cid=$(docker create "$sandbox" /bin/sh -c 'ldconfig && (getent passwd tusko >/dev/null || useradd --uid 10001 --user-group --home-dir /var/lib/tusko --no-create-home tusko) && mkdir -p /var/lib/tusko && chown tusko:tusko /var/lib/tusko')
docker cp "$stage/." "$cid:/"
docker start -a "$cid"
docker commit --change 'USER root' --change 'WORKDIR /' --change 'CMD ["/usr/local/bin/tusko"]' \
  --message "tusko-stack (deploy/compose/build-images.sh) on $sandbox" "$cid" "$tag" >/dev/null
echo "[build-images] $tag built on $sandbox" >&2
echo "$tag"
