# Sourced by tests/run.sh: a Docker engine for the docker-runtime tests
# (tests/integration/sandboxd/*.docker.test.mjs and docker.test.mjs), with the
# sandbox image in it. Installs nothing (scripts/deps.sh installs docker.io).
#
# scripts/dockerd.sh gives the engine at DOCKER_HOST when it is set, else ours
# (CI has none running; the machine's default engine is not used unasked): data
# under var/docker, --iptables=false --ip6tables=false --bridge=none (sandboxes
# have network "none"). One started here is stopped at exit, after the
# containers and volumes the tests left are removed. The sandbox image is imported as
# tusko-sandbox:<recipe hash> (images/sandbox/export-docker.sh) when the engine
# lacks it. Exports DOCKER_HOST for the tests and the tusko-sandboxd they start.
if _dk=$(scripts/dockerd.sh start 2>"$OUT/dockerd-start.log"); then
  export DOCKER_HOST=${_dk% *}
  if [ "${_dk#* }" = 1 ]; then
    echo "docker: started dockerd at $DOCKER_HOST ($(docker version --format '{{.Server.Version}}'))"
    at_exit "scripts/dockerd.sh stop"
  else
    echo "docker: using the engine at $DOCKER_HOST ($(docker version --format '{{.Server.Version}}'))"
  fi
  # the image, tagged by the recipe hash of SANDBOX_IMAGE_DIR (10-sandbox-image.sh)
  _dk_hash=$(sed -n 's/.*"hash": *"\([0-9a-f]*\)".*/\1/p' "${SANDBOX_IMAGE_DIR:-/nonexistent}/image.json" \
    "${SANDBOX_IMAGE_DIR:-/nonexistent}/../image.json" 2>/dev/null | head -1)
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
else
  echo "docker: no engine (the docker-runtime tests will fail): $(cat "$OUT/dockerd-start.log")"
fi
unset _dk
