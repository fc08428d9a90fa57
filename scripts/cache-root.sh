# shellcheck shell=bash
# The cache root of every slow build output (Go binaries, the Cargo target directory, the
# fuzz build), in one place: $CAMELK_CACHE when set, else $XDG_CACHE_HOME/camelk-gitops,
# else ~/.cache/camelk-gitops. Sourced by the build scripts, which then read $CAMELK_CACHE
# (exported); run alone (as the Makefile does), it prints the directory.
CAMELK_CACHE=${CAMELK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/camelk-gitops}
export CAMELK_CACHE
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  echo "$CAMELK_CACHE"
fi
