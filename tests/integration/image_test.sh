#!/usr/bin/env bash
# tests/integration/image_test.sh — the sandbox image (images/sandbox/build.sh).
#
# Finds (or builds) the image, then checks inside it — read-only, as the native
# runtime mounts it, with a tmpfs /tmp and /workspace — that the tools the agent
# relies on work, and that the build cache behaves. Needs root (chroot, mounts).
# Last line: "N passed, N failed".
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
build=$repo/images/sandbox/build.sh
work=$(mktemp -d /tmp/tusko-image-test.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT

# shellcheck source=../lib/tap.sh
. "$repo/tests/lib/tap.sh"

if [[ $(id -u) != 0 ]]; then
  not_ok "the image test needs root (chroot and mounts)"
  finish
fi

# --- the image ------------------------------------------------------------------
echo "# finding or building the sandbox image (a first build takes minutes)"
if ! rootfs=$("$build" --print-path 2> >(tee "$work/build.err" >&2)); then
  not_ok "build.sh --print-path builds or finds the image" "$(cat "$work/build.err")"
  finish
fi
ok "build.sh --print-path builds or finds the image"
var=${TUSKO_VAR:-$repo/var}
hash=$("$build" --hash)
check "the image path is named by the recipe hash" \
  test "$rootfs" = "$(cd "$var" && pwd -P)/images/tusko-sandbox-$hash/rootfs"
check "the image has image.json and a root filesystem" \
  test -f "$rootfs/../image.json" -a -x "$rootfs/bin/bash"
check "var/images/tusko-sandbox points at the current image" \
  test "$(readlink -f "$var/images/tusko-sandbox/rootfs")" = "$rootfs"
echo "# image: $rootfs ($(du -sh "$rootfs" | cut -f1))"

# in_image [--user] [--execd DIR] CMD...: run CMD in the image, mounted read-only as
# the native runtime does, with fresh tmpfs /tmp (holding a copy of $work/scripts)
# and /workspace, DIR bind-mounted at /opt/tusko/bin, a clean environment, and
# (with --user) as the sandbox user.
mkdir -p "$work/scripts"
in_image() {
  local spec=0:0 home=/root execd=
  while :; do
    case $1 in
    --user) spec=1000:1000 home=/workspace ;;
    --execd) execd=$2 && shift ;;
    *) break ;;
    esac
    shift
  done
  mkdir -p "$work/mnt"
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --propagation private -- /bin/sh -euc '
    src=$1 mnt=$2 spec=$3 home=$4 scripts=$5 execd=$6
    shift 6
    mount --rbind "$src" "$mnt"
    mount -o remount,bind,ro "$mnt"
    mount -t proc proc "$mnt/proc"
    mount -t tmpfs -o mode=1777 tmpfs "$mnt/tmp"
    mount -t tmpfs -o mode=0755,uid=1000,gid=1000 tmpfs "$mnt/workspace"
    cp -r "$scripts/." "$mnt/tmp/"
    [ -z "$execd" ] || mount --bind -o ro "$execd" "$mnt/opt/tusko/bin"
    exec chroot --userspec="$spec" "$mnt" /usr/bin/env -i \
      PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" LANG=C.UTF-8 "$@"
  ' in_image "$rootfs" "$work/mnt" "$spec" "$home" "$work/scripts" "$execd" "$@"
}

# --- layout ---------------------------------------------------------------------
check "/workspace exists (mount point)" test -d "$rootfs/workspace"
check "/opt/tusko/bin exists (mount point for tusko-execd)" test -d "$rootfs/opt/tusko/bin"
entry=$(in_image getent passwd sandbox 2>&1)
check "the sandbox user is uid 1000, gid 1000, home /workspace ($entry)" \
  test "$(cut -d: -f3,4,6 <<<"$entry")" = 1000:1000:/workspace
check "commands run as the sandbox user (id -u = 1000)" test "$(in_image --user id -u 2>&1)" = 1000
if out=$(in_image touch /etc/tusko-ro-test 2>&1) || [[ -e $rootfs/etc/tusko-ro-test ]]; then
  not_ok "the test mounts the image read-only (touch /etc/x fails)" "$out"
else
  ok "the test mounts the image read-only (touch /etc/x fails)"
fi

libs=(libmicrohttpd.so.12 libjansson.so.4 libzmq.so.5 libssl.so.3 libcrypto.so.3 libsodium.so.23
  libseccomp.so.2 libcap.so.2 libcurl.so.4)
ldcache=$(in_image /sbin/ldconfig -p 2>&1)
for lib in "${libs[@]}"; do
  if grep -q "^[[:space:]]*$lib " <<<"$ldcache"; then
    ok "shared library $lib (ldconfig -p)"
  else
    not_ok "shared library $lib (ldconfig -p)" "$(head -n 5 <<<"$ldcache")"
  fi
done

# A program built on the host against those libraries (as tusko-execd is) runs inside.
cat >"$work/probe.c" <<'EOF'
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <seccomp.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/capability.h>
#include <zmq.h>
int main(void) {
    int a, b, c;
    zmq_version(&a, &b, &c);
    json_t *j = json_pack("{s:i}", "n", 1);
    cap_t cap = cap_get_proc();
    const struct scmp_version *sv = seccomp_version();
    printf("mhd %s, jansson %d, zmq %d.%d.%d, %s, sodium %d, seccomp %u.%u, cap %s, %s\n",
           MHD_get_version(), (int)json_integer_value(json_object_get(j, "n")), a, b, c,
           OpenSSL_version(OPENSSL_VERSION), sodium_init() >= 0, sv->major, sv->minor,
           cap ? "ok" : "none", curl_version());
    return 0;
}
EOF
mkdir -p "$work/probe"
# shellcheck disable=SC2046 # pkg-config's flags are words
if command -v cc >/dev/null && cc -o "$work/probe/probe" "$work/probe.c" -Wl,--no-as-needed \
  $(pkg-config --cflags --libs libmicrohttpd libcurl jansson libsodium openssl libseccomp libzmq 2>/dev/null) \
  -lcap 2>"$work/probe.err"; then
  check "a program built on the host against execd's libraries runs in the image" \
    in_image --user --execd "$work/probe" /opt/tusko/bin/probe
else
  not_ok "a program built on the host against execd's libraries runs in the image" \
    "could not build the probe: $(head -c 300 "$work/probe.err")"
fi

# The host's tusko-execd, when built, resolves every library inside the image.
execd=$repo/build/tusko-execd
if [[ -x $execd ]]; then
  if out=$(in_image --execd "$(dirname "$execd")" ldd /opt/tusko/bin/tusko-execd 2>&1) &&
    ! grep -q "not found" <<<"$out"; then
    ok "the host's build/tusko-execd finds all its libraries in the image"
  else
    not_ok "the host's build/tusko-execd finds all its libraries in the image" "$out"
  fi
  check "the host's build/tusko-execd runs in the image (--version, as the sandbox user)" \
    in_image --user --execd "$(dirname "$execd")" /opt/tusko/bin/tusko-execd --version
else
  not_ok "the host's build/tusko-execd finds all its libraries in the image" "no build/tusko-execd (make builds it)"
fi

# --- Python ----------------------------------------------------------------------
check "python3 imports ipykernel (and the kernel app)" \
  in_image --user python3 -c 'import ipykernel; from ipykernel.kernelapp import IPKernelApp; print(ipykernel.__version__)'
check "a python3 Jupyter kernel spec is installed" \
  in_image grep -q ipykernel_launcher /usr/share/jupyter/kernels/python3/kernel.json

cat >"$work/scripts/docs.py" <<'EOF'
import io, zipfile
import pandas as pd, numpy as np, openpyxl, xlsxwriter, docx, pypdf
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

df = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
df.to_excel("/tmp/a.xlsx", index=False, engine="openpyxl")
assert openpyxl.load_workbook("/tmp/a.xlsx").active["B6"].value == 16
df.to_excel("/tmp/b.xlsx", index=False, engine="xlsxwriter")
assert pd.read_excel("/tmp/b.xlsx")["y"].sum() == 30

d = docx.Document(); d.add_heading("Tusko report", 1); d.save("/tmp/c.docx")
assert docx.Document("/tmp/c.docx").paragraphs[0].text == "Tusko report"

fig, ax = plt.subplots(); ax.plot(df.x, df.y); ax.set_title("Tusko chart")
fig.savefig("/tmp/chart.png"); fig.savefig("/tmp/chart.pdf")
assert open("/tmp/chart.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
text = pypdf.PdfReader("/tmp/chart.pdf").pages[0].extract_text()
assert "Tusko chart" in text, text
print("ok", matplotlib.get_backend())
EOF
check "pandas, numpy, openpyxl, xlsxwriter, docx, matplotlib (Agg PNG, PDF) and pypdf work" \
  in_image --user python3 /tmp/docs.py
check "plain pyplot (no matplotlib.use) renders headless" \
  in_image --user python3 -c 'import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.savefig("/tmp/p.png"); print(plt.get_backend())'

# --- PDF tools -------------------------------------------------------------------
check "pdftotext -v runs" in_image pdftotext -v
check "pdftotext extracts text from a PDF made by matplotlib" \
  in_image --user sh -c 'python3 -c "import matplotlib.pyplot as plt; plt.title(\"Hello sandbox\"); plt.savefig(\"/tmp/h.pdf\")" && pdftotext /tmp/h.pdf - | grep -q "Hello sandbox"'

# --- Node and pptxgenjs -----------------------------------------------------------
check "node -e \"require('pptxgenjs')\" works without NODE_PATH" \
  in_image --user node -e "require('pptxgenjs')"
cat >"$work/scripts/deck.js" <<'EOF'
const PptxGenJS = require("pptxgenjs");
const pptx = new PptxGenJS();
pptx.addSlide().addText("Hello from the sandbox", { x: 1, y: 1, fontSize: 24 });
pptx.writeFile({ fileName: "/tmp/deck.pptx" }).then((f) => console.log("wrote", f));
EOF
cat >"$work/scripts/deck_check.py" <<'EOF'
import zipfile
assert open("/tmp/deck.pptx", "rb").read(2) == b"PK", "not a zip"
z = zipfile.ZipFile("/tmp/deck.pptx")
n = z.namelist()
assert "ppt/slides/slide1.xml" in n and "ppt/slides/slide2.xml" not in n, n
assert b"Hello from the sandbox" in z.read("ppt/slides/slide1.xml")
EOF
check "pptxgenjs writes a 1-slide .pptx to /tmp (a zip starting with PK, with ppt/slides/slide1.xml)" \
  in_image --user sh -c 'cd /tmp && node deck.js && python3 deck_check.py'

# --- slimness ----------------------------------------------------------------------
check "no documentation beyond copyright files" \
  sh -c "[ -z \"\$(find '$rootfs/usr/share/doc' -type f ! -name copyright | head -n 3)\" ]"
check "no man pages, translations, apt lists or caches" \
  sh -c "[ -z \"\$(find '$rootfs/usr/share/man' '$rootfs/usr/share/locale' '$rootfs/var/lib/apt/lists' \
    '$rootfs/var/cache/apt' -type f ! -name lock | head -n 5)\" ]"
check "no compiler in the image" sh -c "! [ -e '$rootfs/usr/bin/gcc' ] && ! [ -e '$rootfs/usr/bin/cc' ]"

# --- the cache --------------------------------------------------------------------
inode=$(stat -c %i "$rootfs")
start=$(date +%s%N)
out=$("$build" 2>"$work/again.err")
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "# second build.sh run took ${ms} ms"
if [[ $rc == 0 && $out == "$rootfs" && $(stat -c %i "$rootfs") == "$inode" ]] &&
  ! grep -q "step 1" "$work/again.err"; then
  ok "a second build.sh run is a no-op that prints the same path"
else
  not_ok "a second build.sh run is a no-op that prints the same path" "rc=$rc out=$out $(cat "$work/again.err")"
fi
check "build.sh --check exits 0 when the image exists" "$build" --check
if command -v setpriv >/dev/null; then
  check "a user without root finds the built image (no lock, no build)" \
    test "$(setpriv --reuid 65534 --regid 65534 --clear-groups "$build" --print-path 2>&1)" = "$rootfs"
fi

# A recipe that differs (one comment in packages.txt) has another hash and no image.
mkdir -p "$work/repo/images/sandbox"
cp -a "$repo/images/sandbox/." "$work/repo/images/sandbox/"
echo "# changed" >>"$work/repo/images/sandbox/packages.txt"
other=$("$work/repo/images/sandbox/build.sh" --hash)
check "changing packages.txt changes the recipe hash" test "$other" != "$hash"
TUSKO_VAR=$var "$work/repo/images/sandbox/build.sh" --check >/dev/null 2>&1
check "build.sh --check exits 1 for a recipe that has no image" test $? = 1
echo "# README" >>"$work/repo/images/sandbox/README.md"
sed -i '$d' "$work/repo/images/sandbox/packages.txt"
check "README.md is not part of the recipe" test "$("$work/repo/images/sandbox/build.sh" --hash)" = "$hash"
mkdir -p "$work/emptyvar"
TUSKO_VAR=$work/emptyvar "$build" --check >/dev/null 2>&1
check "build.sh --check exits 1 when \$TUSKO_VAR has no image" test $? = 1
check "--check built nothing" test -z "$(ls -A "$work/emptyvar")"

# While another build holds the lock, a build waits (and does not start building).
mkdir -p "$work/lockvar/images"
exec 8>"$work/lockvar/images/.lock"
flock 8
TUSKO_VAR=$work/lockvar timeout 3 "$build" >"$work/lock.out" 2>"$work/lock.err"
rc=$?
exec 8>&-
if [[ $rc == 124 ]] && grep -q "waiting" "$work/lock.err" && [[ $(ls -A "$work/lockvar/images") == .lock ]]; then
  ok "a build waits while another holds the lock, touching nothing"
else
  not_ok "a build waits while another holds the lock, touching nothing" "rc=$rc $(cat "$work/lock.err")"
fi

finish
