#!/usr/bin/env bash
# Builds what `make demo` or `make test` runs, the Go builds beside the Cargo build:
# two compilers keep both cores busy while either waits on a link or a download.
# Every output is cached (see the Makefile), so a second run only checks.
#
#   scripts/build.sh demo|test
set -euo pipefail
cd "$(dirname "$0")/.."
goal=${1:-test}
# shellcheck source=../tests/camel-k/versions.env
. tests/camel-k/versions.env

go_builds=(tests/control-plane/build.sh tests/kwok/build.sh "tests/camel-k/build.sh $CAMEL_K_VERSION")
case $goal in
  # The demo's upgrade starts from the older release; without it the demo runs two
  # operators of the newer one and says why, so its build may fail (`?`).
  demo) go_builds+=("tests/camel-k/build.sh $CAMEL_K_PREVIOUS_VERSION?") ;;
  test) go_builds+=(tests/helm/build.sh tests/flux/build.sh tests/actionlint/build.sh) ;;
  *) echo "usage: scripts/build.sh demo|test" >&2; exit 2 ;;
esac

log=$(mktemp -t camelk-go-builds.XXXXXX)
trap 'rm -f "$log"' EXIT
(
  set -e
  for build in "${go_builds[@]}"; do
    t=$(date +%s)
    optional=false
    [[ $build == *\? ]] && optional=true && build=${build%\?}
    # shellcheck disable=SC2086 # a script and its arguments
    if bash $build >/dev/null; then
      echo "build: $build took $(($(date +%s) - t))s" >&2
    elif $optional; then
      echo "build: $build failed after $(($(date +%s) - t))s (optional)" >&2
    else
      exit 1
    fi
  done
) 2>"$log" &
go_pid=$!

t=$(date +%s)
case $goal in
  demo) cargo build --quiet --locked -p camelk-reconciler -p kubectl-camelk -p xtask --bins ;;
  test)
    # What run-tests builds and runs, so that its build is a no-op; benchmarks and
    # examples are checked by `make lint` (clippy --all-targets).
    cargo test --workspace --no-run --locked
    # run-tests itself: `cargo test --no-run` builds a package's binaries only for its
    # integration tests, and xtask has none, so a cold cache would have no runner.
    cargo build --locked -p xtask --bin run-tests
    # The fuzz targets (nightly) while Go may still build.
    bash scripts/fuzz.sh --build-only
    ;;
esac
echo "build: cargo took $(($(date +%s) - t))s" >&2

if ! wait "$go_pid"; then
  cat "$log" >&2
  echo "build: a Go build failed (above); run it alone to see why" >&2
  exit 1
fi
cat "$log" >&2
