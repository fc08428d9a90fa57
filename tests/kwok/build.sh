#!/usr/bin/env bash
# Builds KWOK (sigs.k8s.io/kwok: simulated nodes and pod status, no kubelet)
# from the Go module proxy at the version pinned in go.mod, into a cache outside
# the checkout keyed by that version and a hash of the pins. A second run with
# the same pins does nothing. Prints the bin directory (holding `kwok`) on stdout.
#
#   CAMELK_CACHE   cache root (default: $XDG_CACHE_HOME/camelk-gitops or ~/.cache/camelk-gitops)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "sigs.k8s.io/kwok" { print $2 }' "$here/go.mod")
cache=${CAMELK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/camelk-gitops}
pins=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
bin="$cache/kwok/kwok-$version-$pins/bin"

if [ -x "$bin/kwok" ]; then
  echo "$bin"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
tmp="$bin.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "kwok: building kwok $version into $bin (first time only)" >&2
(cd "$here" && go build -trimpath \
  -ldflags="-s -w" \
  -o "$tmp/" sigs.k8s.io/kwok/cmd/kwok)
rm -rf "$bin"; mv "$tmp" "$bin"
echo "kwok: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
