# Sourced by tests/run.sh: a Docker engine for the docker-runtime tests
# (tests/integration/sandboxd/*.docker.test.mjs and docker.test.mjs), with the
# sandbox image in it. Installs nothing (scripts/deps.sh installs docker.io).
#
# - An engine that already answers at DOCKER_HOST (default
#   unix:///var/run/docker.sock) is used as it is.
# - Otherwise dockerd is started here (CI has no engine running): its data under
#   $TUSKO_VAR/docker (default var/docker: imported images are kept between
#   runs), its socket, pid file and run state under /run/tusko-docker-<hash of
#   this checkout's path> (short paths: containerd's sockets live there), and
#   --iptables=false --ip6tables=false --bridge=none: sandboxes have network
#   "none", so no bridge, NAT or iptables is needed (iptables may be missing or
#   fail in a container or VM). At exit the containers and volumes tests left are
#   removed and dockerd is stopped.
# - The sandbox image is imported as tusko-sandbox:<recipe hash>
#   (images/sandbox/export-docker.sh) when the engine lacks it.
# Exports DOCKER_HOST for the tests and the tusko-sandboxd they start.
_dk_host=${DOCKER_HOST:-unix:///var/run/docker.sock}
_dk_ok() { docker -H "$1" version --format '{{.Server.Version}}' >/dev/null 2>&1; }
if ! command -v docker >/dev/null || ! command -v dockerd >/dev/null; then
  echo "docker: not installed (scripts/deps.sh installs docker.io); the docker-runtime tests will fail"
elif _dk_ok "$_dk_host"; then
  export DOCKER_HOST=$_dk_host
  echo "docker: using the engine at $DOCKER_HOST ($(docker version --format '{{.Server.Version}}'))"
else
  _dk_run=/run/tusko-docker-$(printf %s "$ROOT" | sha256sum | cut -c1-8)
  _dk_data=${TUSKO_VAR:-$ROOT/var}/docker
  mkdir -p "$_dk_run" "$_dk_data"
  # a dockerd of ours from an interrupted run: stop it first
  if [ -s "$_dk_run/docker.pid" ] && kill -0 "$(cat "$_dk_run/docker.pid")" 2>/dev/null; then
    kill "$(cat "$_dk_run/docker.pid")"
    for _ in $(seq 100); do kill -0 "$(cat "$_dk_run/docker.pid")" 2>/dev/null || break; sleep 0.1; done
  fi
  export DOCKER_HOST=unix://$_dk_run/docker.sock
  (dockerd --data-root "$_dk_data" --exec-root "$_dk_run/exec" --pidfile "$_dk_run/docker.pid" \
    -H "$DOCKER_HOST" --iptables=false --ip6tables=false --bridge=none --log-level=warn \
    >"$OUT/dockerd.log" 2>&1 &)
  for _ in $(seq 300); do _dk_ok "$DOCKER_HOST" && break; sleep 0.1; done
  if _dk_ok "$DOCKER_HOST"; then
    echo "docker: started dockerd ($(docker version --format '{{.Server.Version}}'), data $_dk_data, $DOCKER_HOST)"
    _dk_c="docker -H '$DOCKER_HOST'" _dk_p="'$_dk_run/docker.pid'"
    at_exit "$_dk_c ps -aq --filter label=io.tusko.sandboxd | xargs -r $_dk_c rm -f; $_dk_c volume ls -q --filter label=io.tusko.sandboxd | xargs -r $_dk_c volume rm -f; kill \$(cat $_dk_p); for _ in \$(seq 200); do kill -0 \$(cat $_dk_p) 2>/dev/null || break; sleep 0.1; done"
    unset _dk_c _dk_p
  else
    echo "docker: dockerd did not answer within 30 s (see $OUT/dockerd.log); the docker-runtime tests will fail"
    grep -iE 'level=(fatal|error)' "$OUT/dockerd.log" | tail -3
  fi
  unset _dk_run _dk_data
fi
# the image, tagged by the recipe hash of SANDBOX_IMAGE_DIR (set by 10-sandbox-image.sh)
if [ -n "${DOCKER_HOST:-}" ] && _dk_ok "$DOCKER_HOST" && [ -n "${SANDBOX_IMAGE_DIR:-}" ]; then
  _dk_hash=$(sed -n 's/.*"hash": *"\([0-9a-f]*\)".*/\1/p' "$SANDBOX_IMAGE_DIR/image.json" "$SANDBOX_IMAGE_DIR/../image.json" 2>/dev/null | head -1)
  if [ -n "$_dk_hash" ] && docker image inspect "tusko-sandbox:$_dk_hash" >/dev/null 2>&1; then
    echo "docker: image tusko-sandbox:$_dk_hash is in the engine"
  elif [ -n "$_dk_hash" ] && [ "$_dk_hash" = "$(images/sandbox/build.sh --hash 2>/dev/null)" ]; then
    echo "docker: importing the sandbox image (images/sandbox/export-docker.sh)"
    images/sandbox/export-docker.sh >"$OUT/docker-import.log" 2>&1 || {
      echo "docker: the import failed (see $OUT/docker-import.log)"
      tail -3 "$OUT/docker-import.log"
    }
  else
    echo "docker: SANDBOX_IMAGE_DIR has no recipe hash build.sh knows; tusko-sandboxd imports it at its first start"
  fi
  unset _dk_hash
fi
unset _dk_host
unset -f _dk_ok
