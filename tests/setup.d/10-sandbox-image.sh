# Sourced by tests/run.sh: makes sure the sandbox image exists (building it with
# images/sandbox/build.sh when its recipe changed or it was never built — root
# and Debian's archive needed, about a minute and a half the first time) and
# exports SANDBOX_IMAGE_DIR for the tusko-sandboxd tests. A SANDBOX_IMAGE_DIR
# already set (a prebuilt root filesystem) is used as it is.
if [ -n "${SANDBOX_IMAGE_DIR:-}" ] && [ -d "$SANDBOX_IMAGE_DIR" ]; then
  echo "sandbox image: $SANDBOX_IMAGE_DIR (from the environment)"
elif [ -x images/sandbox/build.sh ]; then
  if _sbx_img=$(images/sandbox/build.sh --print-path 2>"$OUT/sandbox-image-build.log"); then
    export SANDBOX_IMAGE_DIR=$_sbx_img
    echo "sandbox image: $SANDBOX_IMAGE_DIR"
  else
    echo "sandbox image: the build failed (see $OUT/sandbox-image-build.log); the sandboxd tests will fail"
    tail -5 "$OUT/sandbox-image-build.log"
  fi
  unset _sbx_img
else
  echo "sandbox image: images/sandbox/build.sh is missing; the sandboxd tests will fail"
fi
