#!/bin/bash
# tusko-compose-sandboxd — sandboxd's entry point in the compose stack. The
# docker runtime bind-mounts execd from a host path into every sandbox, so the
# execd of this image is copied into the state folder, which is the same path
# on the host (SANDBOXD_HOST_DIR in docker-compose.yml), then sandboxd starts.
set -euo pipefail
: "${SANDBOXD_STATE_DIR:?}" "${SANDBOX_EXECD_PATH:?}"
mkdir -p "$(dirname "$SANDBOX_EXECD_PATH")"
install -m 0755 /usr/local/bin/tusko-execd "$SANDBOX_EXECD_PATH.new"
mv -f "$SANDBOX_EXECD_PATH.new" "$SANDBOX_EXECD_PATH"
exec /usr/local/bin/tusko-sandboxd "$@"
