#!/usr/bin/env bash
# Builds one Go command from the Go module proxy at the version a module directory's
# go.mod pins, into a cache outside the checkout keyed by that version and a hash of
# the pins. A second run with the same pins does nothing. Prints the bin directory.
#
#   go-build-tool.sh DIR NAME MODULE PACKAGE [LDFLAGS]
#     DIR      the directory holding go.mod and go.sum (tests/kwok, tests/helm)
#     NAME     the command's name, also the cache folder's
#     MODULE   the module whose pinned version keys the cache
#     PACKAGE  the package to build
#     LDFLAGS  extra -ldflags; `{version}` is replaced by the pinned version
#
#   CAMELK_CACHE   cache root (default: ~/.cache/camelk-gitops; see scripts/cache-root.sh)
set -euo pipefail

dir=$(cd "$1" && pwd)
name=$2 module=$3 package=$4 ldflags=${5:-}
version=$(awk -v m="$module" '$1 == m { print $2 }' "$dir/go.mod")
# shellcheck source=../scripts/cache-root.sh
. "$(dirname "$0")/../scripts/cache-root.sh"
cache=$CAMELK_CACHE
pins=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-12)
bin="$cache/$name/$name-$version-$pins/bin"

if [ -x "$bin/$name" ]; then
  echo "$bin"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
tmp="$bin.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "$name: building $name $version into $bin (first time only)" >&2
(cd "$dir" && go build -trimpath \
  -ldflags="-s -w ${ldflags//\{version\}/$version}" \
  -o "$tmp/" "$package")
rm -rf "$bin"; mv "$tmp" "$bin"
echo "$name: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
