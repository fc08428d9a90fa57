#!/usr/bin/env bash
# Runs each cargo-fuzz target of fuzz/ for FUZZ_SECONDS (default 600) one after the
# other: `make fuzz` (FUZZ_SECONDS=600), `make fuzz-smoke` (10 s each, part of
# `make test`). Usage: scripts/fuzz.sh [--build-only] [TARGET...] (default: every target).
#
# - cargo-fuzz is installed from the crate registry into $CAMELK_CACHE/cargo-fuzz on
#   first use; the fuzz build lives in $CAMELK_CACHE/fuzz/target.
# - The toolchain is the installed nightly (libFuzzer's instrumentation needs it);
#   FUZZ_TOOLCHAIN names another one.
# - Corpora: libFuzzer writes what it finds to its first corpus directory, a scratch
#   one in $CAMELK_CACHE/fuzz/corpus/<target> that grows from run to run; the committed
#   seeds (fuzz/seeds/<target>) come second and are only read. FUZZ_CORPUS=fresh (the
#   smoke) uses an empty scratch directory instead, removed afterwards: replaying the
#   grown one (tens of thousands of inputs) took longer than the smoke's seconds.
# - A crash or failed check stops that target; its input is saved in
#   fuzz/artifacts/<target>/ (not committed) and the script exits 1 after the others ran.
# - FUZZ_SANITIZER (default none): the code under test is safe Rust (unsafe_code is
#   denied), so panics and the targets' assertions are what find bugs; `address`
#   would add AddressSanitizer at about half the speed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-600}
fresh=
case ${FUZZ_CORPUS:-kept} in
  kept) ;;
  fresh) fresh=1 ;;
  *) echo "fuzz: FUZZ_CORPUS is kept or fresh, not ${FUZZ_CORPUS}" >&2; exit 2 ;;
esac
sanitizer=${FUZZ_SANITIZER:-none}
# shellcheck source=cache-root.sh
. scripts/cache-root.sh
cache=$CAMELK_CACHE
cargo_fuzz_version=0.13.2
started=$(date +%s)

fail() { echo "fuzz: $*" >&2; exit 1; }

command -v rustup >/dev/null || fail "rustup is required (for the nightly toolchain)"
toolchain=${FUZZ_TOOLCHAIN:-}
if [ -z "$toolchain" ]; then
  if cargo +nightly --version >/dev/null 2>&1; then
    toolchain=nightly
  else
    toolchain=$(rustup toolchain list | awk '/^nightly/ { print $1; exit }')
  fi
fi
if [ -z "$toolchain" ] || ! cargo "+$toolchain" --version >/dev/null 2>&1; then
  fail "no nightly toolchain: install one (rustup toolchain install nightly) or set FUZZ_TOOLCHAIN"
fi

bin="$cache/cargo-fuzz/bin"
if ! "$bin/cargo-fuzz" --version 2>/dev/null | grep -qx "cargo-fuzz $cargo_fuzz_version"; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version into $cache/cargo-fuzz"
  t=$(date +%s)
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --force \
    --root "$cache/cargo-fuzz" --target-dir "$cache/cargo-fuzz/build" ||
    fail "cannot install cargo-fuzz from the crate registry"
  rm -rf "$cache/cargo-fuzz/build"
  echo "fuzz: cargo-fuzz installed in $(( $(date +%s) - t ))s"
fi
export PATH="$bin:$PATH"

build_only=
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo "+$toolchain" fuzz list --fuzz-dir fuzz)
fi
[ ${#targets[@]} -gt 0 ] || fail "no fuzz targets in fuzz/"

# The main workspace's target directory is for the stable build; never share it.
unset CARGO_TARGET_DIR
fuzz=(--fuzz-dir fuzz --sanitizer "$sanitizer" --target-dir "$cache/fuzz/target")
t=$(date +%s)
cargo "+$toolchain" fuzz build "${fuzz[@]}" || fail "the fuzz targets do not build"
echo "fuzz: built ${#targets[@]} targets with $toolchain in $(( $(date +%s) - t ))s"
[ -z "$build_only" ] || exit 0

failed=()
for target in "${targets[@]}"; do
  corpus="$cache/fuzz/corpus/$target"
  [ -z "$fresh" ] || corpus=$(mktemp -d -t "camelk-fuzz-$target.XXXXXX")
  log="$cache/fuzz/logs/$target.log"
  mkdir -p "$corpus" "$(dirname "$log")" "fuzz/seeds/$target"
  if cargo "+$toolchain" fuzz run "${fuzz[@]}" "$target" "$corpus" "fuzz/seeds/$target" -- \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      >"$log" 2>&1; then
    runs=$(awk '/^stat::number_of_executed_units:/ { print $2 }' "$log")
    rate=$(awk '/^stat::average_exec_per_sec:/ { print $2 }' "$log")
    echo "fuzz: $target: ${runs:-?} runs in ${seconds}s (${rate:-?} execs/s), no crash"
  else
    echo "fuzz: $target FAILED; the end of $log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$target")
  fi
  [ -z "$fresh" ] || rm -rf "$corpus"
done
echo "fuzz: done in $(( $(date +%s) - started ))s"
[ ${#failed[@]} -eq 0 ] ||
  fail "${failed[*]} failed; the inputs are in fuzz/artifacts/<target>/ (replay: cargo +$toolchain fuzz run --fuzz-dir fuzz -s $sanitizer TARGET ARTIFACT)"
