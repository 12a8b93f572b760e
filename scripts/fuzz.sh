#!/usr/bin/env bash
# fuzz.sh - runs the cargo-fuzz targets of fuzz/ (docs/fuzzing.md), each for a bounded
# time on a copy of its seed corpus in a temporary folder (the repository never grows).
# A crash fails the run and prints the reproducer's path (kept under
# target/fuzz-artifacts/). Gets what it needs when missing: the nightly toolchain and
# cargo-fuzz (into ~/.cargo/bin).
#
#   scripts/fuzz.sh                      every target, TUGBOAT_FUZZ_SECONDS (20) each
#   scripts/fuzz.sh 600 rendered_config  one target for ten minutes
set -Eeuo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${TUGBOAT_FUZZ_SECONDS:-20}}
shift || true

rustup run nightly rustc --version >/dev/null 2>&1 ||
  rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
export TUGBOAT_HAPROXY_DIR=${TUGBOAT_HAPROXY_DIR:-$HOME/.cache/tugboat/haproxy}

# No sanitizer: the code is safe Rust (unsafe_code is forbidden), so AddressSanitizer
# would find nothing a panic does not, at half the speed and twice the build.
# The build is kept beside the haproxy binaries, so a fresh checkout reuses it.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR_FUZZ:-$HOME/.cache/tugboat/fuzz-target}
fuzz=(cargo +nightly fuzz)
build=(--sanitizer none --fuzz-dir fuzz)
"${fuzz[@]}" build "${build[@]}"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <("${fuzz[@]}" list --fuzz-dir fuzz)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=$PWD/target/fuzz-artifacts
failed=()
for target in "${targets[@]}"; do
  mkdir -p "$work/$target" "$artifacts/$target"
  cp -r "fuzz/seeds/$target/." "$work/$target/"
  dict=fuzz/dict/keys.dict
  case $target in
    manifests | gateway) dict=fuzz/dict/manifests.dict ;;
    master_cli) dict=fuzz/dict/master_cli.dict ;;
  esac
  # The targets write rendered configs for `haproxy -c` under the temporary folder.
  if ! TMPDIR=$work "${fuzz[@]}" run "${build[@]}" "$target" "$work/$target" -- \
    -max_total_time="$seconds" -dict="$dict" -max_len=8192 -timeout=30 \
    -artifact_prefix="$artifacts/$target/" -print_final_stats=1 2>"$work/$target.log"; then
    tail -n 40 "$work/$target.log"
    failed+=("$target")
    for found in "$artifacts/$target"/*; do
      [ -e "$found" ] && echo "fuzz: $target: reproducer $found (again: cargo +nightly fuzz run --sanitizer none --fuzz-dir fuzz $target $found)"
    done
    continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$target.log" | grep -o '[0-9]*$' || echo '?')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/$target.log" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz: $target: ${seconds}s, $runs runs, $speed/s, no finding"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (reproducers above)" >&2
  exit 1
fi
