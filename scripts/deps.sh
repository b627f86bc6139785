#!/usr/bin/env bash
# deps.sh — installs the Debian packages Tusko needs to build, run and test, with
# apt-get, idempotently: only what is missing is installed, and nothing at all
# happens when everything is present. Not root? It prints the command to run.
#
#   scripts/deps.sh            everything (build, run, test)
#   scripts/deps.sh --check    exit 1 and list what is missing, install nothing
set -euo pipefail

# Build: compilers, formatter, the C libraries (see the Makefile's PKGS).
build=(gcc make pkg-config clang libclang-rt-14-dev clang-format cppcheck
  libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libpq-dev libssl-dev libsodium-dev
  libcmark-gfm-dev libcmark-gfm-extensions-dev libseccomp-dev libcap-dev libzmq3-dev
  libidn2-dev zlib1g-dev)
# Run: the database, the sandbox image builder, namespaces and networking tools.
run=(postgresql-15 debootstrap debian-archive-keyring iproute2 util-linux ca-certificates curl
  poppler-utils acl) # poppler-utils: pdftotext, run contained for Utopia's PDF uploads;
# acl: setfacl, so the postgres user can pass through a private folder above var/
# Test: Node.js for the harness (skipped when a node is already installed), the
# comparison runtimes for benchmarks.
# tusko-sandboxd: nothing beyond build and run (libseccomp, libcap, debootstrap for
# its image); bubblewrap is bench/acquire's comparison row. docker.io (Debian's
# engine, with containerd, runc and tini): the docker runtime's tests and bench
# rows; tests/setup.d/20-docker.sh starts dockerd when none runs.
test=(bubblewrap docker.io)
# The web UI's end-to-end tests drive Debian's Chromium with playwright-core
# (tests/e2e/); fonts-inter gives the screenshots the UI's own typeface.
test+=(chromium fonts-inter)
# tusko-execd's tests run execd on the host: its code contexts need the Jupyter
# kernel and the libraries the sandbox image has (images/sandbox/).
test+=(python3-ipykernel python3-pandas python3-matplotlib)
# bench/search's real-text corpus: manual pages rendered with groff, of the
# packages bench/search/realtext.py names (those not Essential, not named here
# and no dependency of what is named here are these three).
test+=(groff-base passwd mount e2fsprogs)
# lib/zip's unit test checks its archives with Info-ZIP's unzip as well.
test+=(unzip)
# deploy/: docker-compose checks the Compose file, systemd-analyze (systemd)
# the units, kubectl renders the manifests (kustomize) and, with
# python3-kubernetes, checks the test API server stands in for a real one.
# kubectl: Debian's kubernetes-client when no kubectl is installed.
test+=(docker-compose systemd python3-kubernetes)
command -v kubectl >/dev/null 2>&1 || test+=(kubernetes-client)

want=("${build[@]}" "${run[@]}" "${test[@]}")
command -v node >/dev/null 2>&1 || want+=(nodejs npm)

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${1:-}" = "--check" ]; then
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "missing: ${missing[*]}"
  exit 1
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
  echo "deps.sh: these Debian packages are missing: ${missing[*]}"
  echo "deps.sh: as root, run:"
  echo "    apt-get update && $cmd"
  exit 1
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists once when they are absent or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages' -mtime -1 2>/dev/null | head -1)" ]; then
  apt-get update -q || echo "deps.sh: apt-get update failed; trying with the lists at hand" >&2
fi
if ! $cmd; then
  echo "deps.sh: installing failed; retrying after apt-get update" >&2
  apt-get update -q
  $cmd
fi
