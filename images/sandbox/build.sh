#!/usr/bin/env bash
# images/sandbox/build.sh — build (or find) the Tusko sandbox root filesystem.
#
#   build.sh               build the image if the current recipe has none; print its path
#   build.sh --print-path  the same, printing only the path (progress only when building)
#   build.sh --check       exit 0 if the current recipe's image exists, 1 if not; never builds
#   build.sh --hash        print the recipe hash
#
# The recipe is this file, packages.txt, npm/package.json and npm/package-lock.json;
# their hash names the image: $TUSKO_VAR/images/tusko-sandbox-<hash>/rootfs
# ($TUSKO_VAR defaults to <repo>/var), and $TUSKO_VAR/images/tusko-sandbox is a
# symlink to the current one. The image is built in a temporary folder next to it
# and renamed into place only when complete. See README.md.
#
# Environment: TUSKO_VAR; TUSKO_DEBIAN_MIRROR (default http://deb.debian.org/debian);
# TUSKO_DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security,
# "none" to leave the security suite out).
set -euo pipefail
umask 022

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
suite=bookworm
mirror=${TUSKO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${TUSKO_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
python_pptx_version=1.0.2

mode=build
case "${1:-}" in
'') ;;
--print-path) mode='path' ;;
--check) mode='check' ;;
--hash) mode='hash' ;;
-h | --help)
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
*)
  echo "build.sh: unknown option '$1' (try --help)" >&2
  exit 2
  ;;
esac

say() { echo "[sandbox-image] $*" >&2; }
die() {
  say "error: $*"
  exit 1
}

# --- the recipe hash ---------------------------------------------------------
recipe_files=(build.sh packages.txt npm/package.json npm/package-lock.json)
hash=$(cd "$here" && sha256sum -- "${recipe_files[@]}" | sha256sum | cut -c1-12)
[[ $mode == hash ]] && {
  echo "$hash"
  exit 0
}

var=${TUSKO_VAR:-$repo/var}
[[ $var == /* ]] || var=$PWD/$var
[[ -d $var ]] && var=$(cd "$var" && pwd -P)
images=$var/images
name=tusko-sandbox-$hash
image=$images/$name
rootfs=$image/rootfs

complete() { [[ -d $rootfs && -f $image/image.json ]]; }

# Point $images/tusko-sandbox at this recipe's image (atomically: rename a new link).
link_current() {
  [[ "$(readlink "$images/tusko-sandbox" 2>/dev/null)" == "$name" ]] && return 0
  ln -sfn "$name" "$images/.tusko-sandbox.link.$$"
  mv -Tf "$images/.tusko-sandbox.link.$$" "$images/tusko-sandbox"
}

finish() {
  link_current || say "warning: could not point $images/tusko-sandbox at $name"
  if [[ $mode == build ]]; then
    say "tusko-sandbox $hash: $rootfs ($(sed -n 's/.*"size_human": "\([^"]*\)".*/\1/p' "$image/image.json"))"
  fi
  echo "$rootfs"
  exit 0
}

if [[ $mode == check ]]; then
  if complete; then
    echo "$rootfs"
    exit 0
  fi
  say "no image for recipe $hash (expected $rootfs); run images/sandbox/build.sh"
  exit 1
fi

# Fast path: no lock, no root needed.
complete && finish

# --- build ---------------------------------------------------------------------
[[ $(id -u) == 0 ]] || die "building the image needs root (debootstrap, chroot); run: sudo $0"
for tool in debootstrap unshare chroot flock npm node mount; do
  command -v "$tool" >/dev/null || die "'$tool' not found on this host (scripts/deps.sh installs what the build needs)"
done
[[ -f $keyring ]] || die "$keyring missing (package debian-archive-keyring)"

mkdir -p "$images" "$var/cache/sandbox-debs"
exec 9>"$images/.lock"
if ! flock -n 9; then
  say "another build holds $images/.lock; waiting for it"
  flock 9
fi
complete && finish # the other build made it

# Leftovers of interrupted builds. Mounts were made in private mount namespaces,
# so they died with their builds; --one-file-system guards against any that did not.
for d in "$images"/.build-*; do
  [[ -e $d ]] || continue
  say "removing the leftovers of an interrupted build: $d"
  rm -rf --one-file-system -- "$d"
done

tmp=$images/.build-$hash.$$
root=$tmp/rootfs
log=$images/$name.log
mkdir -p "$tmp"
: >"$log"
ok=0
heartbeat_pid=
cleanup() {
  [[ -n $heartbeat_pid ]] && kill "$heartbeat_pid" 2>/dev/null
  if [[ $ok != 1 ]]; then
    rm -rf --one-file-system -- "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# step NAME FUNCTION: run FUNCTION with its output in the log, say how long it took,
# print a line every 30 s while it runs, and on failure name the step and the log.
nsteps=6
stepno=0
build_start=$SECONDS
step() {
  local label=$1 fn=$2 start=$SECONDS rc
  stepno=$((stepno + 1))
  say "step $stepno/$nsteps: $label ..."
  echo "=== step $stepno/$nsteps: $label ($(date -u +%FT%TZ))" >>"$log"
  (
    trap - EXIT INT
    trap 'kill $s 2>/dev/null; exit 0' TERM
    while :; do
      sleep 30 &
      s=$!
      wait $s
      say "  ... still on $label ($(fmt_secs $((SECONDS - start)))): $(tail -n 1 "$log" | tr -cd '[:print:]' | cut -c1-100)"
    done
  ) >/dev/null 9>&- &
  heartbeat_pid=$!
  set +e
  (
    set -e
    "$fn"
  ) >>"$log" 2>&1 </dev/null
  rc=$?
  set -e
  kill "$heartbeat_pid" 2>/dev/null
  wait "$heartbeat_pid" 2>/dev/null || true
  heartbeat_pid=
  if [[ $rc != 0 ]]; then
    say "step $stepno/$nsteps ($label) FAILED after $(fmt_secs $((SECONDS - start))) (exit $rc)"
    say "last lines of the log:"
    tail -n 15 "$log" | sed 's/^/    /' >&2
    say "full log: $log"
    exit 1
  fi
  say "step $stepno/$nsteps: $label done in $(fmt_secs $((SECONDS - start)))"
}

# Run a shell script inside the tree as root, with /proc, a private /dev/pts and
# the host's .deb cache mounted, all in a private mount namespace (so the mounts
# vanish with it, even if the build is killed).
in_root() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --propagation private -- /bin/sh -euc '
    root=$1 cache=$2
    shift 2
    mount -t proc proc "$root/proc"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
    mount --bind "$cache" "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -euxc "$@"
  ' in_root "$root" "$var/cache/sandbox-debs" "$@"
}

packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$here/packages.txt"; }

do_debootstrap() {
  unshare --mount --propagation private -- \
    debootstrap --variant=minbase --keyring="$keyring" --cache-dir="$var/cache/sandbox-debs" \
    "$suite" "$root" "$mirror"
  do_configure
}

do_configure() {
  # Debian's archive, updates and security (the host's execd links against the
  # host's current libssl3 and friends; the image should be as new).
  {
    echo "deb $mirror $suite main"
    echo "deb $mirror $suite-updates main"
    [[ $security_mirror == none ]] || echo "deb $security_mirror $suite-security main"
  } >"$root/etc/apt/sources.list"
  cat >"$root/etc/apt/apt.conf.d/90tusko" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
  # Keep documentation, man pages and translations out of every later install
  # (copyright files stay: they are small and the licences ask for them).
  cat >"$root/etc/dpkg/dpkg.cfg.d/90tusko-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  # No daemons start during installs.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
}

do_packages() {
  local pkgs
  pkgs=$(packages | tr '\n' ' ')
  in_root "apt-get update -q
    apt-get install -y -q --no-install-recommends $pkgs
    apt-get autoclean -q" # drops superseded .debs from the host cache
  # python-pptx only where PyPI answers (it does not on every build host).
  if in_root "timeout 8 python3 -c \"import urllib.request; urllib.request.urlopen('https://pypi.org/simple/python-pptx/', timeout=5)\"" 2>/dev/null; then
    echo "PyPI is reachable: installing python-pptx==$python_pptx_version"
    if in_root "apt-get install -y -q --no-install-recommends python3-pip
      pip install --no-cache-dir --break-system-packages python-pptx==$python_pptx_version
      apt-get purge -y -q --auto-remove python3-pip"; then
      echo "python-pptx installed" >"$tmp/python-pptx"
    else
      echo "WARNING: PyPI answered but installing python-pptx failed; continuing without it"
    fi
  else
    echo "PyPI is not reachable (8 s timeout): skipping python-pptx; decks use pptxgenjs"
  fi
}

do_npm() {
  # Installed with the host's npm into a staging folder, exactly as the lockfile
  # says, without running package scripts; then copied into the image.
  mkdir -p "$tmp/npm"
  cp "$here/npm/package.json" "$here/npm/package-lock.json" "$tmp/npm/"
  (cd "$tmp/npm" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn)
  # pptxgenjs lists @types/node as a runtime dependency: type declarations only.
  rm -rf "$tmp/npm/node_modules/@types" "$tmp/npm/node_modules/undici-types"
  mkdir -p "$root/usr/local/lib"
  rm -rf "$root/usr/local/lib/node_modules"
  cp -a "$tmp/npm/node_modules" "$root/usr/local/lib/node_modules"
  chown -R 0:0 "$root/usr/local/lib/node_modules"
  # Debian's node searches /usr/share/nodejs (no NODE_PATH needed); link each
  # direct dependency there. Node resolves the link, so its own dependencies are
  # found next to it in /usr/local/lib/node_modules.
  local dep
  for dep in $(node -e 'console.log(Object.keys(require(process.argv[1]).dependencies).join("\n"))' "$here/npm/package.json"); do
    ln -sfn "/usr/local/lib/node_modules/$dep" "$root/usr/share/nodejs/$dep"
  done
}

do_configure_image() {
  in_root "useradd --uid 1000 --user-group --home-dir /workspace --no-create-home --shell /bin/bash sandbox
    fc-cache -f"
  mkdir -p "$root/workspace" "$root/opt/tusko/bin"
  chown 1000:1000 "$root/workspace"
  chmod 755 "$root/workspace" "$root/opt/tusko" "$root/opt/tusko/bin"
  # Debian's /etc/matplotlibrc selects TkAgg, which fails without a display:
  # sandboxes are headless. (ipykernel still picks its inline backend.)
  sed -i 's/^backend[[:space:]]*:.*/backend: Agg/' "$root/etc/matplotlibrc"
  grep -q '^backend: Agg$' "$root/etc/matplotlibrc"
  # (No MPLBACKEND here: ipykernel only selects its inline backend when it is unset.)
  echo LANG=C.UTF-8 >"$root/etc/environment"
  echo 'export LANG=C.UTF-8' >"$root/etc/profile.d/tusko.sh"
  echo sandbox >"$root/etc/hostname"
  printf '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  : >"$root/etc/resolv.conf" # the runtime (or Docker) provides one
  echo "$hash" >"$root/etc/tusko-image"
  rm -f "$root/usr/sbin/policy-rc.d"
}

do_cleanup() {
  local before after
  before=$(du -sm "$root" | cut -f1)
  # Documentation, man pages, translations (C.UTF-8 is built into glibc, in
  # /usr/lib/locale/C.utf8), package lists and caches, logs.
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian \
    "$root"/usr/share/linda "$root"/usr/share/locale/*
  find "$root/usr/lib/locale" -mindepth 1 -maxdepth 1 ! -name C.utf8 -exec rm -rf {} +
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/cache/apt/archives/partial/* "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old \
    "$root"/var/cache/ldconfig/aux-cache "$root"/root/.cache "$root"/tmp/* "$root"/var/tmp/*
  find "$root/var/log" -type f -delete
  # Test suites of Python packages (pandas' alone is 36 MB); never imported at run time.
  find "$root/usr/lib/python3/dist-packages" -type d -name tests -prune -exec rm -rf {} +
  : >"$root/etc/machine-id"
  after=$(du -sm "$root" | cut -f1)
  echo "cleanup: ${before} MB -> ${after} MB"
}

do_finalize() {
  local bytes human pptx pypptx=false
  bytes=$(du -sb "$root" | cut -f1)
  human=$(du -sh "$root" | cut -f1)
  pptx=$(node -p 'require(process.argv[1]).version' "$root/usr/local/lib/node_modules/pptxgenjs/package.json")
  [[ -f $tmp/python-pptx ]] && pypptx=true
  # The document libraries the image really holds (probed, not assumed): the
  # agent's system prompt names exactly these.
  local libs
  libs=$(chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp python3 -c '
import importlib, json, shutil, subprocess
out = []
for mod, name in [("openpyxl", "openpyxl"), ("docx", "python-docx"), ("pptx", "python-pptx"),
                  ("pypdf", "pypdf"), ("xlsxwriter", "xlsxwriter"), ("pandas", "pandas"),
                  ("matplotlib", "matplotlib"), ("diff_match_patch", "diff-match-patch")]:
    try:
        m = importlib.import_module(mod)
        out.append({"name": name, "language": "python", "version": str(getattr(m, "__version__", ""))})
    except Exception:
        pass
if shutil.which("soffice"):
    out.append({"name": "libreoffice", "language": "cli", "version": ""})
if shutil.which("pdftoppm"):
    out.append({"name": "poppler-utils", "language": "cli", "version": ""})
print(json.dumps(out))
')
  libs=$(printf '%s' "$libs" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const l=JSON.parse(s);l.push({name:"pptxgenjs",language:"node",version:process.argv[1]});console.log(JSON.stringify(l))})' "$pptx")
  # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
  chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$tmp/packages.lock"
  cat >"$tmp/image.json" <<EOF
{
  "name": "tusko-sandbox",
  "hash": "$hash",
  "suite": "$suite",
  "built_at": "$(date -u +%FT%TZ)",
  "build_seconds": $((SECONDS - build_start)),
  "size_bytes": $bytes,
  "size_human": "$human",
  "debian_packages": $(wc -l <"$tmp/packages.lock"),
  "pptxgenjs": "$pptx",
  "python_pptx": $pypptx,
  "document_libraries": $libs
}
EOF
}

say "building tusko-sandbox $hash (first build takes a few minutes); log: $log"
step "debootstrap ($suite, minbase)" do_debootstrap
step "packages (apt-get install, $(packages | wc -l) packages)" do_packages
step "npm (pptxgenjs from npm/package-lock.json)" do_npm
step "setup (sandbox user, mount points, fonts)" do_configure_image
step "cleanup (docs, man pages, locales, caches)" do_cleanup
step "finalize (image.json, packages.lock)" do_finalize

# Into place: one rename makes the image visible.
mv "$log" "$tmp/build.log"
rm -f "$tmp/python-pptx"
rm -rf "$tmp/npm"
if [[ -e $image ]]; then # incomplete (no image.json): not ours to trust
  rm -rf --one-file-system -- "$image"
fi
mv -T "$tmp" "$image"
ok=1
link_current

# Keep the current image and the newest other one; remove older ones.
keep_prev=
while read -r _ d; do
  [[ $d == "$image" ]] && continue
  if [[ -z $keep_prev ]]; then
    keep_prev=$d
    continue
  fi
  say "removing old image $d"
  rm -rf --one-file-system -- "$d"
done < <(for d in "$images"/tusko-sandbox-*/; do
  d=${d%/}
  [[ -f $d/image.json ]] && echo "$(stat -c %Y "$d/image.json") $d"
done | sort -rn)

say "built tusko-sandbox $hash in $(fmt_secs $((SECONDS - build_start))): $rootfs ($(sed -n 's/.*"size_human": "\([^"]*\)".*/\1/p' "$image/image.json"))"
echo "$rootfs"
