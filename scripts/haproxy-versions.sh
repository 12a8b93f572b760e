#!/usr/bin/env bash
# haproxy-versions.sh - several HAProxy versions side by side on Debian bookworm,
# (called by get-haproxy.sh, which chooses the series and the tarball folder)
# using only Debian's archive and PRIVATE apt configurations (the system's
# /etc/apt is never written; system apt is used only to install missing
# -dev/runtime packages and patchelf from the system's own bookworm sources).
#
#   usage: haproxy-versions.sh TARGET_DIR
#   gives: TARGET_DIR/haproxy-2.6/haproxy   bookworm's binary package, unpacked (dpkg -x)
#          TARGET_DIR/haproxy-3.0/haproxy   built with make from trixie's source package
#                                           (or trixie's binary package, see below)
#          TARGET_DIR/haproxy-3.2/haproxy   built from sid's source, if it can be downloaded
#          TARGET_DIR/haproxy-3.4/haproxy   built from experimental's source, if it can be downloaded
#
# A series that bookworm does not package is built from Debian's source package; when
# that cannot be downloaded (mirrors that serve no sources answer 404), from an upstream
# tarball (HAPROXY_TARBALL_DIR); when there is none either, it is the newer release's
# BINARY package (trixie's, so 3.0 only): its haproxy with the shared libraries it needs,
# computed from its DT_NEEDED and its packages' Depends (trixie's glibc and ld.so,
# OpenSSL, Lua, PCRE2, libstdc++, ...), unpacked into TARGET_DIR/haproxy-X.Y/lib, and
# patchelf setting the binary's interpreter to that ld.so and its DT_RPATH to that
# folder (so it survives the master's re-exec on reload; nothing of trixie is installed,
# and the binary loads no library from outside TARGET_DIR/haproxy-X.Y). Such a
# binary is tied to its path: moved, it is reinstalled. The .mode/.origin/.stamp files
# say which of the three an install is: a later run that can download the source keeps
# the cached binary; HAPROXY_REFRESH=1 then builds from source (a failed source download
# is remembered until the private lists are next updated, HAPROXY_LISTS_MAX_AGE).
#
# Idempotent: downloads are cached, finished versions are skipped (no network
# needed then). Environment knobs (all optional):
#   HAPROXY_SERIES="2.6 3.0 3.2 3.4"  series wanted; a series with a bookworm binary
#                                     package is unpacked, the others are built
#   HAPROXY_REQUIRED="2.6 3.0"        series whose absence is an error (others: warning)
#   HAPROXY_CACHE=TARGET_DIR/.cache   apt lists (apt/, apt-trixie/), .deb/.dsc downloads,
#                                     build trees, logs
#   HAPROXY_JOBS=$(nproc)             make -j
#   HAPROXY_LUA=5.3                   Lua for source builds (5.3 or 5.4)
#   HAPROXY_MAKE_EXTRA=""             extra make args, e.g. "USE_QUIC=1 USE_QUIC_OPENSSL_COMPAT=1"
#   HAPROXY_DEBIAN_PATCHES=1          apply debian/patches (Debian's security fixes)
#   HAPROXY_TARBALL_DIR=../haproxy-src  fallback: haproxy-X.Y.*.tar.gz used when Debian's
#                                     source of series X.Y cannot be downloaded
#   HAPROXY_BINARY_SUITE=trixie       last fallback: the release whose binary packages
#                                     (with their libraries) are used
#   HAPROXY_APT_INSTALL=1             install missing packages with the system apt-get
#                                     (refuses if apt would remove anything); 0 = only tell
#   HAPROXY_REFRESH=0                 1 = re-resolve versions and rebuild if Debian has newer
#   HAPROXY_LISTS_MAX_AGE=86400       seconds before the private apt lists are refreshed
#   HAPROXY_SMOKE=1                   master-worker + reload smoke test of each binary
#   HAPROXY_SMOKE_PORT=19080          loopback port used by the smoke test
#   HAPROXY_SMOKE_DIR=(mktemp -d)     where the smoke test puts its config, log and master socket
#   HAPROXY_MIRROR=...                the Debian mirror; default: the one the system's
#                                     apt sources use (the URI serving bookworm)
#   HAPROXY_SECURITY_MIRROR=...       default: the system's URI serving bookworm-security
set -Eeuo pipefail

log()  { printf '[haproxy-versions] %s\n' "$*" >&2; }
warn() { printf '[haproxy-versions] WARNING: %s\n' "$*" >&2; }
die()  { printf '[haproxy-versions] ERROR: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 TARGET_DIR"
mkdir -p "$1"
TARGET=$(cd "$1" && pwd -P)
CACHE=${HAPROXY_CACHE:-$TARGET/.cache}
SERIES=${HAPROXY_SERIES:-2.6 3.0 3.2 3.4}
# Upstream release tarballs (3.2 and 3.4 when Debian's archive cannot serve their
# sources): get-haproxy.sh points this at a folder of them when there is one.
HAPROXY_TARBALL_DIR=${HAPROXY_TARBALL_DIR-}
REQUIRED=${HAPROXY_REQUIRED:-2.6 3.0}
JOBS=${HAPROXY_JOBS:-$(nproc)}
LUA=${HAPROXY_LUA:-5.3}
PATCHES=${HAPROXY_DEBIAN_PATCHES:-1}
# The mirrors the system's own apt sources name (deb822 .sources files or one-line lists).
system_uri() { # suite
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$1" 'BEGIN{RS=""} $0 ~ ("Suites:[^\n]*[ ]" s "([ \n]|$)") {
      for (i = 1; i <= NF; i++) if ($i == "URIs:") { print $(i+1); exit } }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v s="$1" '$1 == "deb" && $3 == s { print $2; exit }' || true
}
MIRROR=${HAPROXY_MIRROR:-$(system_uri bookworm | head -1 || true)}
SECMIRROR=${HAPROXY_SECURITY_MIRROR:-$(system_uri bookworm-security | head -1 || true)}
[ -n "$MIRROR" ] || die "no Debian mirror found in the system's apt sources: set HAPROXY_MIRROR"
[ -n "$SECMIRROR" ] || SECMIRROR=${MIRROR%/debian}/debian-security
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ARCH=$(dpkg --print-architecture)
mkdir -p "$CACHE"/{apt/lists/partial,apt/cache/archives/partial,debs,src,build,logs}
CACHE=$(cd "$CACHE" && pwd -P)
exec 9>"$CACHE/.lock"; flock 9            # one run at a time per cache

# ---------------------------------------------------------------- private apt
APTDIR=$CACHE/apt
write_if_changed() { # file content
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then printf '%s\n' "$2" > "$1"; fi
}
[ -r "$KEYRING" ] || die "$KEYRING missing (package debian-archive-keyring)"
opt="arch=$ARCH signed-by=$KEYRING"
write_if_changed "$APTDIR/sources.list" "\
deb [$opt] $MIRROR bookworm main
deb [$opt] $MIRROR bookworm-updates main
deb [$opt] $SECMIRROR bookworm-security main
deb-src [signed-by=$KEYRING] $MIRROR trixie main
deb-src [signed-by=$KEYRING] $MIRROR trixie-updates main
deb-src [signed-by=$KEYRING] $SECMIRROR trixie-security main
deb-src [signed-by=$KEYRING] $MIRROR sid main
deb-src [signed-by=$KEYRING] $MIRROR experimental main"
# Read after the system's apt.conf(.d): points apt at the private files of folder $1 and
# drops the system's update/dpkg hooks (docker-clean, appstream, packagekit).
write_apt_conf() { write_if_changed "$1/apt.conf" "\
Dir::Etc::SourceList \"$1/sources.list\";
Dir::Etc::SourceParts \"/dev/null\";
Dir::Etc::Preferences \"/dev/null\";
Dir::Etc::PreferencesParts \"/dev/null\";
Dir::State::Lists \"$1/lists\";
Dir::Cache \"$1/cache\";
Dir::Cache::pkgcache \"\";
Dir::Cache::srcpkgcache \"\";
Acquire::GzipIndexes \"true\";
Acquire::Languages \"none\";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;$( [ -f "$1/no-date-check" ] &&
  printf '\nAcquire::Check-Valid-Until "false";\nAcquire::Check-Date "false";' )"; }
write_apt_conf "$APTDIR"
papt_get()   { apt-get   -c "$APTDIR/apt.conf" -q "$@"; }
papt_cache() { apt-cache -c "$APTDIR/apt.conf" "$@"; }
# A second private configuration with only the newer release's BINARY packages (the
# fallback for a series whose source cannot be downloaded): kept apart so that nothing
# of it is ever chosen for bookworm's own binary series.
BINSUITE=${HAPROXY_BINARY_SUITE:-trixie}
BINDIR=$CACHE/apt-$BINSUITE
BINDEBS=$CACHE/debs/$BINSUITE
mkdir -p "$BINDIR"/{lists/partial,cache/archives/partial} "$BINDEBS"
write_if_changed "$BINDIR/sources.list" "\
deb [$opt] $MIRROR $BINSUITE main
deb [$opt] $MIRROR $BINSUITE-updates main
deb [$opt] $SECMIRROR $BINSUITE-security main"
write_apt_conf "$BINDIR"
bapt_get()   { apt-get   -c "$BINDIR/apt.conf" -q "$@"; }
bapt_cache() { apt-cache -c "$BINDIR/apt.conf" "$@"; }
# let apt's sandbox user write into our download folders (avoids "unsandboxed" warnings)
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$CACHE/debs" "$CACHE/src" "$BINDEBS"; fi

update_lists() { # apt-folder : apt-get update of that private configuration, when stale
  local a=$1 stamp=$1/lists/.updated max=${HAPROXY_LISTS_MAX_AGE:-86400} ulog
  ulog=$CACHE/logs/apt-update$([ "$a" = "$APTDIR" ] || echo "-$BINSUITE").log
  if [ ! -f "$stamp" ] || [ "$a/sources.list" -nt "$stamp" ] ||
     [ $(( $(date +%s) - $(stat -c %Y "$stamp") )) -gt "$max" ]; then
    log "apt-get update (private lists in $a/lists)"
    if ! apt-get -c "$a/apt.conf" -q update > "$ulog" 2>&1; then
      # A mirror that is a frozen snapshot serves Release files past their Valid-Until
      # (sid, experimental, -security): retry without that date check (signatures are
      # still verified).
      grep -qE 'is expired|not valid yet' "$ulog" ||
        { tail -20 "$ulog" >&2; die "private apt-get update failed"; }
      warn "mirror's Release files are outside their validity dates; retrying with Acquire::Check-Valid-Until=false"
      touch "$a/no-date-check"; write_apt_conf "$a"
      apt-get -c "$a/apt.conf" -q update > "$ulog" 2>&1 ||
        { tail -20 "$ulog" >&2; die "private apt-get update failed"; }
    fi
    touch "$stamp"
  fi
}
LISTS_READY=0
ensure_lists() {
  [ "$LISTS_READY" = 1 ] && return 0
  update_lists "$APTDIR"
  LISTS_READY=1
  MADISON=$(papt_cache madison haproxy)       # every haproxy version the private lists know
}
BINLISTS_READY=0
ensure_binary_lists() { # the newer release's binary lists, only when the fallback needs them
  [ "$BINLISTS_READY" = 1 ] && return 0
  update_lists "$BINDIR"
  BINLISTS_READY=1
  BINMADISON=$(bapt_cache madison haproxy)
}

# candidates SERIES Packages|Sources [MADISON] -> versions of haproxy in that series,
# newest first (from $MADISON, the lists of the main private configuration, by default)
candidates() {
  local v out=() i j t
  while read -r v; do
    [ -n "$v" ] && out+=("$v")
  done < <(printf '%s\n' "${3-$MADISON}" | awk -F'|' -v s="$1." -v k="$2" '
      { v=$2; gsub(/ /,"",v); n=split($3,w," "); if (w[n]==k && index(v,s)==1) print v }' | sort -u)
  for ((i=0; i<${#out[@]}; i++)); do          # sort newest first (dpkg ordering)
    for ((j=i+1; j<${#out[@]}; j++)); do
      if dpkg --compare-versions "${out[j]}" gt "${out[i]}"; then
        t=${out[i]}; out[i]=${out[j]}; out[j]=$t
      fi
    done
  done
  [ ${#out[@]} -eq 0 ] || printf '%s\n' "${out[@]}"
}

# ------------------------------------------------------- system packages (guarded)
missing_pkgs() { local p; for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"; done; }

apt_install() { # PKG... : install with the SYSTEM apt config, never removing anything
  [ $# -gt 0 ] || return 0
  if [ "${HAPROXY_APT_INSTALL:-1}" != 1 ] || [ "$(id -u)" != 0 ]; then
    die "missing packages: $* (run: apt-get install --no-install-recommends $*)"
  fi
  export DEBIAN_FRONTEND=noninteractive
  local sim
  if ! sim=$(apt-get -s install --no-install-recommends "$@" 2>&1); then
    log "system apt lists look stale: apt-get update (system sources, unchanged)"
    apt-get -q update >/dev/null
    sim=$(apt-get -s install --no-install-recommends "$@" 2>&1) || { echo "$sim" >&2; die "cannot install: $*"; }
  fi
  if grep -q '^Remv ' <<<"$sim"; then
    grep '^Remv ' <<<"$sim" >&2; die "refusing: installing $* would remove the packages above"
  fi
  grep '^Inst [^ ]* \[' <<<"$sim" | sed 's/^/[haproxy-versions] note, upgrade: /' >&2 || true
  log "apt-get install --no-install-recommends $*"
  apt-get -q install -y --no-install-recommends --no-remove "$@" > "$CACHE/logs/apt-install.log" 2>&1 ||
    { tail -20 "$CACHE/logs/apt-install.log" >&2; die "apt-get install failed"; }
}

soname_pkg() { # package providing a shared library a bookworm haproxy binary may miss
  case $1 in
    liblua5.3.so.0) echo liblua5.3-0 ;;      liblua5.4.so.0) echo liblua5.4-0 ;;
    libopentracing-c-wrapper.so.0) echo libopentracing-c-wrapper0 ;;
    libopentracing.so.1) echo libopentracing1 ;;
    libpcre2-8.so.0) echo libpcre2-8-0 ;;    libssl.so.3|libcrypto.so.3) echo libssl3 ;;
    libsystemd.so.0) echo libsystemd0 ;;     libcrypt.so.1) echo libcrypt1 ;;
    libz.so.1) echo zlib1g ;;                libjemalloc.so.2) echo libjemalloc2 ;;
    *) return 1 ;;
  esac
}
missing_runtime() { ldd "$1" 2>/dev/null | awk '/not found/ {print $1}'; }

# ---------------------------------------------------------------- per series
declare -A MODE VER ORIGIN FILE BUILD_S RESULT
MAKE_COMMON="TARGET=linux-glibc USE_OPENSSL=1 USE_LUA=1 LUA_INC=/usr/include/lua$LUA LUA_LIB_NAME=lua$LUA USE_PCRE2=1 USE_PCRE2_JIT=1 USE_PROMEX=1 IGNOREGIT=1 ${HAPROXY_MAKE_EXTRA:-}"
stamp_for() { # series mode -> what a finished install must match to be skipped
  if [ "$2" = binary ]; then echo "binary $ARCH"
  elif [ "$2" = newer-binary ]; then echo "binary $BINSUITE $ARCH, libraries in $TARGET/haproxy-$1/lib"
  else echo "source patches=$PATCHES $MAKE_COMMON | cc $(cc -dumpfullversion 2>/dev/null) | $(ldd --version 2>/dev/null | head -1)"; fi
}
is_done() { # series mode
  local d=$TARGET/haproxy-$1
  [ -x "$d/haproxy" ] && [ -f "$d/.stamp" ] && [ "$(cat "$d/.stamp")" = "$(stamp_for "$1" "$2")" ] &&
    "$d/haproxy" -v >/dev/null 2>&1
}

fetch_deb() { # series apt-get-function download-folder madison -> sets VER/FILE; newest first
  local s=$1 get=$2 to=$3 v f
  for v in $(candidates "$s" Packages "$4"); do
    f=$to/haproxy_${v#*:}_$ARCH.deb
    if [ ! -s "$f" ]; then
      log "$s: apt-get download haproxy=$v"
      (cd "$to" && "$get" download "haproxy=$v") > "$CACHE/logs/download-$v.log" 2>&1 ||
        { warn "$s: download of $v failed: $(grep -m1 -E '^E:' "$CACHE/logs/download-$v.log")"; continue; }
    fi
    dpkg-deb --info "$f" >/dev/null 2>&1 || { rm -f "$f"; continue; }
    VER[$s]=$v; FILE[$s]=$f; return 0
  done
  return 1
}
fetch_binary() { # series -> bookworm's binary package
  fetch_deb "$1" papt_get "$CACHE/debs" "$MADISON" || return 1
  ORIGIN[$1]="Debian binary package haproxy=${VER[$1]}"
}
fetch_newer_binary() { # series -> the newer release's binary package (fallback)
  ensure_binary_lists
  fetch_deb "$1" bapt_get "$BINDEBS" "$BINMADISON" || return 1
  ORIGIN[$1]="Debian $BINSUITE binary package haproxy=${VER[$1]}, with $BINSUITE's shared libraries in $TARGET/haproxy-$1/lib (source not downloadable)"
}

dsc_complete() { # .dsc present and every file it lists present with the listed size
  [ -s "$1" ] || return 1
  local size name
  while read -r _ size name; do
    [ "$(stat -c %s "$(dirname "$1")/$name" 2>/dev/null)" = "$size" ] || return 1
  done < <(awk '/^Checksums-Sha256:/ {f=1; next} /^[^ ]/ {f=0} f && NF==3' "$1")
}

fetch_source() { # series -> sets VER/FILE(.dsc or tarball); tries newest first
  local s=$1 v dsc tb nope
  for v in $(candidates "$s" Sources); do
    dsc=$CACHE/src/haproxy_${v#*:}.dsc
    nope=$CACHE/src/.unavailable-${v#*:}      # failed since the last list update: don't retry
    if [ -f "$nope" ] && [ "$nope" -nt "$APTDIR/lists/.updated" ]; then
      warn "$s: source $v was not downloadable (cached result, see $CACHE/logs/source-$v.log)"; continue
    fi
    if ! dsc_complete "$dsc"; then
      log "$s: apt-get source --download-only haproxy=$v"
      (cd "$CACHE/src" && papt_get source --download-only "haproxy=$v") > "$CACHE/logs/source-$v.log" 2>&1 ||
        { warn "$s: source $v not downloadable: $(grep -m1 -E '^E:' "$CACHE/logs/source-$v.log")"
          rm -f "$dsc"; touch "$nope"; continue; }
    fi
    VER[$s]=$v; FILE[$s]=$dsc; ORIGIN[$s]="Debian source package haproxy=$v"; return 0
  done
  if [ -n "${HAPROXY_TARBALL_DIR:-}" ]; then
    tb=$(ls "$HAPROXY_TARBALL_DIR"/haproxy-"$s".*.tar.gz 2>/dev/null | sort -V | tail -1 || true)
    if [ -n "$tb" ]; then
      v=$(basename "$tb" .tar.gz); v=${v#haproxy-}
      VER[$s]=$v; FILE[$s]=$tb; ORIGIN[$s]="upstream tarball $tb"; return 0
    fi
  fi
  return 1
}

install_binary() { # series
  local s=$1 d=$TARGET/haproxy-$1 x=$CACHE/build/deb-${VER[$1]}
  rm -rf "$x"; mkdir -p "$x" "$d"
  dpkg -x "${FILE[$s]}" "$x"
  local miss=() so p
  for so in $(missing_runtime "$x/usr/sbin/haproxy"); do
    p=$(soname_pkg "$so") || die "$s: no package known for missing library $so"
    miss+=("$p")
  done
  apt_install $(printf '%s\n' "${miss[@]}" | sort -u)
  install -m 0755 "$x/usr/sbin/haproxy" "$d/haproxy.new" && mv -f "$d/haproxy.new" "$d/haproxy"
  rm -rf "$x" "$d/lib"                          # the fallback's libraries, if it was used before
}

# ------------------------------------------ the newer release's binary (fallback)
# Its haproxy needs a newer glibc (and OpenSSL, ...) than bookworm's: it gets its own,
# taken from the same release's packages into TARGET/haproxy-X.Y/lib, and patchelf
# points it there (interpreter, and a DT_RPATH, which also applies to the libraries'
# own dependencies). Nothing is installed system-wide but patchelf.
deb_depends() { # .deb -> the packages its Pre-Depends and Depends name, every alternative
  dpkg-deb -f "$1" Pre-Depends Depends 2>/dev/null | sed -E 's/^[A-Za-z-]+://' | tr ',|' '\n\n' |
    sed -E 's/\(.*\)//; s/:[a-z0-9]+//; s/[[:space:]]//g' | awk 'NF && !seen[$0]++'
}
binary_suite_deb() { # package -> its .deb in the newer release (downloaded once); fails if none
  local p=$1 v a f
  read -r v a < <(bapt_cache show --no-all-versions "$p" 2>/dev/null |
    awk '/^Version:/ {v=$2} /^Architecture:/ {a=$2} /^$/ {exit} END {print v, a}')
  [ -n "$v" ] || return 1                       # a virtual package: its providers are listed too
  f=$BINDEBS/${p}_${v//:/%3a}_$a.deb            # the name apt-get download gives it
  if [ ! -s "$f" ]; then
    (cd "$BINDEBS" && bapt_get download "$p=$v") >> "$CACHE/logs/download-$BINSUITE-libs.log" 2>&1 ||
      { warn "download of $BINSUITE's $p=$v failed (log: $CACHE/logs/download-$BINSUITE-libs.log)"; return 1; }
  fi
  dpkg-deb --info "$f" >/dev/null 2>&1 || { rm -f "$f"; return 1; }
  echo "$f"
}
copy_libs() { # .deb lib-folder soname... -> when the .deb ships one of the sonames, copies
  # all its shared objects (top of its lib folders) into lib-folder and prints their
  # names; fails when it ships none
  local f=$1 lib=$2 x e n t r; shift 2
  local -A wanted=(); for n in "$@"; do wanted[$n]=1; done
  local hit=0 names
  names=$(dpkg-deb --fsys-tarfile "$f" | tar -t)
  while read -r e; do
    n=${e##*/}; [ -n "$n" ] && [ -n "${wanted[$n]:-}" ] && { hit=1; break; }
  done <<<"$names"
  [ $hit = 1 ] || return 1
  x=$(mktemp -d "$CACHE/build/pkg.XXXXXX"); dpkg -x "$f" "$x"
  local objects=() dir
  for dir in "$x"/{lib,lib64,usr/lib,usr/lib64} "$x"/{lib,usr/lib}/*-linux-gnu*; do
    [ -d "$dir" ] || continue
    for e in "$dir"/*.so "$dir"/*.so.*; do
      [[ ${e##*/} =~ \.so(\.[0-9]+)*$ ]] && { [ -f "$e" ] || [ -L "$e" ]; } && objects+=("$e")
    done
  done
  for e in "${objects[@]}"; do                  # files first, then links to them
    n=${e##*/}
    if [ ! -L "$e" ] && [ ! -e "$lib/$n" ]; then cp -p "$e" "$lib/$n"; echo "$n"; fi
  done
  for e in "${objects[@]}"; do
    n=${e##*/}
    [ -L "$e" ] && [ ! -e "$lib/$n" ] || continue
    t=$(readlink "$e")
    case $t in /*) r=$x$t ;; *) r=${e%/*}/$t ;; esac
    if [ -f "$lib/${r##*/}" ]; then ln -s "${r##*/}" "$lib/$n"; echo "$n"
    elif [ -f "$r" ] && [ ! -L "$r" ]; then cp -p "$r" "$lib/$n"; echo "$n"; fi
  done
  rm -rf "$x"
}

install_newer_binary() { # series
  local s=$1 d=$TARGET/haproxy-$1 x=$CACHE/build/newer-${VER[$1]}
  rm -rf "$x"; mkdir -p "$x/lib" "$d"
  dpkg -x "${FILE[$s]}" "$x/deb"
  local bin=$x/deb/usr/sbin/haproxy lib=$x/lib interp so p f n copied missing queue=()
  local -A want=() seen=()
  interp=$(patchelf --print-interpreter "$bin"); interp=${interp##*/}
  want[$interp]=1
  for so in $(patchelf --print-needed "$bin"); do want[$so]=1; done
  mapfile -t queue < <(deb_depends "${FILE[$s]}")
  : > "$lib/.packages"
  # Every DT_NEEDED, of haproxy and then of each library taken, from the package among the
  # dependencies (breadth first) that ships it.
  while :; do
    missing=()
    for so in "${!want[@]}"; do [ -e "$lib/$so" ] || missing+=("$so"); done
    [ ${#missing[@]} -gt 0 ] || break
    [ ${#queue[@]} -gt 0 ] || die "$s: no $BINSUITE package among haproxy's dependencies ships ${missing[*]}"
    p=${queue[0]}; queue=("${queue[@]:1}")
    [ -z "${seen[$p]:-}" ] || continue
    seen[$p]=1
    f=$(binary_suite_deb "$p") || continue
    copied=$(copy_libs "$f" "$lib" "${missing[@]}") || continue   # none of the missing ones
    dpkg-deb -W --showformat='${Package} ${Version}\n' "$f" >> "$lib/.packages"
    for n in $copied; do
      for so in $(patchelf --print-needed "$lib/$n" 2>/dev/null || true); do want[$so]=1; done
    done
    mapfile -t -O "${#queue[@]}" queue < <(deb_depends "$f")
  done
  log "$s: $BINSUITE's libraries in $d/lib: $(awk '{printf "%s%s", sep, $1; sep=", "}' "$lib/.packages")"
  cp -p "$bin" "$x/haproxy"
  patchelf --set-interpreter "$d/lib/$interp" --force-rpath --set-rpath "$d/lib" "$x/haproxy"
  rm -rf "$d/lib.old"; [ ! -e "$d/lib" ] || mv "$d/lib" "$d/lib.old"
  mv "$lib" "$d/lib"
  install -m 0755 "$x/haproxy" "$d/haproxy.new" && mv -f "$d/haproxy.new" "$d/haproxy"
  rm -rf "$d/lib.old" "$x"
  # Every library must come from the lib folder: none of the system's.
  local trace
  trace=$(LD_TRACE_LOADED_OBJECTS=1 "$d/haproxy" 2>&1) || { echo "$trace" >&2; die "$s: the patched binary does not load"; }
  if grep -v -F -e "=> $d/lib/" -e 'linux-vdso.so' -e "$d/lib/$interp (" <<<"$trace" | grep -q .; then
    echo "$trace" >&2; die "$s: libraries resolved outside $d/lib"
  fi
}

build_source() { # series
  local s=$1 v=${VER[$1]} f=${FILE[$1]} d=$TARGET/haproxy-$1
  local b=$CACHE/build/haproxy-$v blog=$CACHE/logs/build-$v.log subvers=()
  rm -rf "$b" "$b.tmp"
  case $f in
    *.dsc)
      local sp=(); [ "$PATCHES" = 1 ] || sp=(--skip-patches)
      dpkg-source "${sp[@]}" --no-copy -x "$f" "$b.tmp" > "$CACHE/logs/extract-$v.log" 2>&1 ||
        { tail "$CACHE/logs/extract-$v.log" >&2; die "$s: dpkg-source -x failed"; }
      subvers=("SUBVERS=-${v##*-}") ;;              # -vv shows e.g. 3.0.11-1+deb13u3 like Debian's
    *) mkdir -p "$b.tmp" && tar -xzf "$f" -C "$b.tmp" --strip-components=1 ;;
  esac
  mv "$b.tmp" "$b"
  log "$s: make -j$JOBS $MAKE_COMMON ${subvers[*]}   (log: $blog)"
  local t0=$SECONDS
  # shellcheck disable=SC2086
  make -C "$b" -j"$JOBS" $MAKE_COMMON "${subvers[@]}" > "$blog" 2>&1 ||
    { tail -30 "$blog" >&2; die "$s: build of $v failed"; }
  BUILD_S[$s]=$((SECONDS - t0))
  log "$s: built $v in ${BUILD_S[$s]}s"
  mkdir -p "$d"
  install -m 0755 "$b/haproxy" "$d/haproxy.new" && mv -f "$d/haproxy.new" "$d/haproxy"
  rm -rf "$d/lib"                               # the fallback's libraries, if it was used before
  [ "${HAPROXY_KEEP_BUILD:-0}" = 1 ] || rm -rf "$b"
}

# ---------------------------------------------------------------- smoke test
SMOKE_PY='
import socket, sys, time, http.client
sock, port = sys.argv[1], int(sys.argv[2])
def cli(cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(15)
    s.connect(sock); s.sendall((cmd + "\n").encode()); s.shutdown(socket.SHUT_WR)
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            buf += d
    except ConnectionResetError: pass        # 2.6 closes the CLI when the master re-execs
    s.close(); return buf.decode(errors="replace")
def proc():
    reloads, workers, sect = None, [], ""
    for line in cli("show proc").splitlines():
        if line.startswith("#"): sect = line[1:].strip(); continue
        f = line.split()
        if len(f) > 2 and f[1] == "master": reloads = int(f[2])
        elif len(f) > 1 and f[1] == "worker" and sect == "workers": workers.append(int(f[0]))
    return reloads, workers
def http_get():           # retried: since 3.1 a worker is listed before it has bound its ports
    end = time.time() + 15
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/")
            r = c.getresponse(); r.read(); c.close(); return r.status
        except OSError:
            if time.time() > end: raise
            time.sleep(0.2)
end = time.time() + 20
while True:
    try:
        r0, w0 = proc()
        if r0 is not None and w0: break
    except OSError: pass
    if time.time() > end: sys.exit("master CLI not answering")
    time.sleep(0.2)
h0 = http_get()
rep = " ".join(cli("reload").split())[:60]
end = time.time() + 30
while True:
    time.sleep(0.3)
    try:
        r1, w1 = proc()
        if r1 is not None and r1 > r0 and w1 and not set(w1) & set(w0): break
    except OSError: pass
    if time.time() > end: sys.exit("reload not seen in show proc (reloads %s -> %s)" % (r0, r1))
h1 = http_get()
assert h0 == 200 and h1 == 200, (h0, h1)
open(sys.argv[3], "w").write(" ".join(str(p) for p in w0 + w1))
print("show proc: reloads %d -> %d, worker %s -> %s; HTTP %d/%d; reload reply: %r" % (r0, r1, w0, w1, h0, h1, rep))
'
SMOKE_PID=
cleanup() { if [ -n "$SMOKE_PID" ] && kill -0 "$SMOKE_PID" 2>/dev/null; then kill "$SMOKE_PID"; wait "$SMOKE_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT

smoke() { # series
  local s=$1 bin=$TARGET/haproxy-$1/haproxy port=${HAPROXY_SMOKE_PORT:-19080}
  local run                         # short path: unix socket names are limited to 107 bytes
  if [ -n "${HAPROXY_SMOKE_DIR:-}" ]; then run=$HAPROXY_SMOKE_DIR/$s; rm -rf "$run"; mkdir -p "$run"
  else run=$(mktemp -d /tmp/haproxy-smoke.XXXXXX); fi
  cat > "$run/smoke.cfg" <<EOF
global
    log stderr format raw local0 notice
defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s
frontend smoke
    bind 127.0.0.1:$port
    http-request return status 200 content-type text/plain string ok
EOF
  "$bin" -c -q -f "$run/smoke.cfg" || { RESULT[$s]="config check FAILED"; return 1; }
  "$bin" -W -db -S "$run/master.sock,mode,600" -f "$run/smoke.cfg" > "$run/haproxy.log" 2>&1 9>&- &
  SMOKE_PID=$!
  local out rc=0
  out=$(python3 -c "$SMOKE_PY" "$run/master.sock" "$port" "$run/workers" 2>&1) || rc=$?
  kill "$SMOKE_PID" 2>/dev/null || true                   # SIGTERM to the master, by its PID
  wait "$SMOKE_PID" 2>/dev/null || true; SMOKE_PID=
  local w i                                               # the master stops its workers; check
  for w in $(cat "$run/workers" 2>/dev/null); do
    for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$w" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$w" 2>/dev/null; then warn "$s: worker $w still running, killing it"; kill "$w" || true; rc=1; fi
  done
  if [ $rc = 0 ]; then RESULT[$s]="smoke OK: $out"; rm -rf "$run"
  else RESULT[$s]="smoke FAILED: $out (log: $run/haproxy.log)"; cat "$run/haproxy.log" >&2; return 1; fi
}

# ---------------------------------------------------------------- main
todo=()
for s in $SERIES; do
  d=$TARGET/haproxy-$s
  if [ "${HAPROXY_REFRESH:-0}" != 1 ] && [ -f "$d/.mode" ] && is_done "$s" "$(cat "$d/.mode")"; then
    MODE[$s]=$(cat "$d/.mode"); VER[$s]=$(cat "$d/.version"); ORIGIN[$s]="(cached) $(cat "$d/.origin")"
    continue                                    # finished earlier: no network needed
  fi
  ensure_lists
  if [ -n "$(candidates "$s" Packages)" ]; then MODE[$s]=binary; else MODE[$s]=source; fi
  if [ "${MODE[$s]}" = binary ]; then fetch_binary "$s" || true; else fetch_source "$s" || true; fi
  if [ "${MODE[$s]}" = source ] && [ -z "${VER[$s]:-}" ] && fetch_newer_binary "$s"; then
    MODE[$s]=newer-binary                       # no source, no tarball: the newer release's binary
  fi
  if [ -z "${VER[$s]:-}" ]; then
    case " $REQUIRED " in *" $s "*) die "$s: no downloadable Debian package found";; esac
    warn "$s: no downloadable Debian package (listed files may 404 on this mirror): skipped"
    RESULT[$s]="SKIPPED (not available)"; continue
  fi
  if [ -f "$d/.version" ] && [ "$(cat "$d/.version")" = "${VER[$s]}" ] && is_done "$s" "${MODE[$s]}"; then
    ORIGIN[$s]="(cached) ${ORIGIN[$s]}"; continue   # HAPROXY_REFRESH=1 and nothing newer
  fi
  todo+=("$s")
done

# build dependencies (only when something is to be built)
need_build=0
for s in "${todo[@]}"; do [ "${MODE[$s]}" = source ] && need_build=1; done
if [ $need_build = 1 ]; then
  apt_install $(missing_pkgs gcc make libc6-dev dpkg-dev libssl-dev "liblua$LUA-dev" libpcre2-dev)
fi
for s in "${todo[@]}"; do
  if [ "${MODE[$s]}" = newer-binary ]; then apt_install $(missing_pkgs patchelf); break; fi
done

for s in "${todo[@]}"; do
  case ${MODE[$s]} in
    binary) install_binary "$s" ;;
    newer-binary) install_newer_binary "$s" ;;
    *) build_source "$s" ;;
  esac
  d=$TARGET/haproxy-$s
  "$d/haproxy" -vv > "$d/haproxy-vv.txt" 2>&1 || { cat "$d/haproxy-vv.txt" >&2; die "$s: $d/haproxy -vv failed"; }
  echo "${MODE[$s]}" > "$d/.mode"; echo "${VER[$s]}" > "$d/.version"; echo "${ORIGIN[$s]}" > "$d/.origin"
  stamp_for "$s" "${MODE[$s]}" > "$d/.stamp"
done

fail=0
for s in $SERIES; do
  [ -x "$TARGET/haproxy-$s/haproxy" ] && [ -n "${VER[$s]:-}" ] || continue
  if [ "${HAPROXY_SMOKE:-1}" = 1 ]; then
    if command -v python3 >/dev/null; then smoke "$s" || fail=1; else RESULT[$s]="smoke skipped (no python3)"; fi
  fi
done

log "summary (total ${SECONDS}s wall):"
for s in $SERIES; do
  if [ -n "${VER[$s]:-}" ]; then
    printf '  %-4s %-22s %s%s\n     %s\n%s' "$s" "${VER[$s]}" "$TARGET/haproxy-$s/haproxy" \
      "${BUILD_S[$s]:+  (build ${BUILD_S[$s]}s)}" "${ORIGIN[$s]}" "${RESULT[$s]:+     ${RESULT[$s]}
}" >&2
  else
    printf '  %-4s %s\n' "$s" "${RESULT[$s]:-SKIPPED}" >&2
  fi
done
exit $fail
