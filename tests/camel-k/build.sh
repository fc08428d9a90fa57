#!/usr/bin/env bash
# Builds upstream Apache Camel K's `kamel` binary (whose hidden `kamel operator`
# command is the real operator) from the Go module proxy at the release pinned in
# <VERSION>/go.mod, and copies that release's CRDs out of the module. Output goes
# to a cache outside the checkout keyed by the version and a hash of the pins; a
# second run with the same pins does nothing. Prints the directory holding
# bin/kamel and crds/*.yaml on stdout.
#
#   bash tests/camel-k/build.sh [--crds-only] [VERSION]
#
#   VERSION       a release with a folder here; default: CAMEL_K_VERSION of versions.env
#                 (the one tests run; CAMEL_K_PREVIOUS_VERSION is the demo's upgrade)
#   --crds-only   only fetch the module and copy its CRDs (seconds, no compile)
#   CAMELK_CACHE  cache root (default: ~/.cache/camelk-gitops; see scripts/cache-root.sh)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
crds_only=
if [ "${1:-}" = --crds-only ]; then crds_only=1; shift; fi
version=${1:-$CAMEL_K_VERSION}
mod="$here/$version"
if [ ! -f "$mod/go.mod" ]; then
  echo "camel-k: no pinned module for $version (have: $(cd "$here" && printf '%s ' v*/ | tr -d /))" >&2
  exit 2
fi
# The pin is the go.mod's own requirement, so the folder name cannot lie about it.
pinned=$(awk '$1 == "github.com/apache/camel-k/v2" { print $2 }' "$mod/go.mod")
if [ "$pinned" != "$version" ]; then
  echo "camel-k: $mod/go.mod pins camel-k $pinned, not $version" >&2
  exit 2
fi

# shellcheck source=../../scripts/cache-root.sh
. "$here/../../scripts/cache-root.sh"
cache=$CAMELK_CACHE
pins=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
out="$cache/camel-k/camel-k-$version-$pins"
have_crds() { [ -f "$out/crds/camel.apache.org_integrations.yaml" ]; }
have_kamel() { [ -x "$out/bin/kamel" ]; }

if have_crds && { [ -n "$crds_only" ] || have_kamel; }; then
  echo "$out"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
mkdir -p "$out"
tmp=
trap 'if [ -n "$tmp" ]; then rm -rf "$tmp"; fi' EXIT
cd "$mod"
go mod download github.com/apache/camel-k/v2
src=$(go list -m -f '{{.Dir}}' github.com/apache/camel-k/v2)

# Each part is made in a temporary folder and renamed into place, so a build
# that is interrupted, or raced by a second one, never leaves half a folder.
if ! have_crds; then
  # The release's CRDs as its own install applies them (v2.10.1 and v2.8.0: 8 kinds, no KameletBinding).
  crds="$src/pkg/resources/config/crd/bases"
  [ -d "$crds" ] || { echo "camel-k: no CRDs at $crds" >&2; exit 1; }
  tmp="$out/crds.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  cp "$crds"/*.yaml "$tmp/"
  chmod -R u+w "$tmp"
  mv -T "$tmp" "$out/crds" 2>/dev/null || rm -rf "$tmp"
  tmp=
fi

if [ -z "$crds_only" ] && ! have_kamel; then
  start=$(date +%s)
  echo "camel-k: building kamel $version into $out (first time only)" >&2
  commit=$(go mod download -json github.com/apache/camel-k/v2 | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p')
  tmp="$out/bin.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  go build -trimpath \
    -ldflags="-s -w -X github.com/apache/camel-k/v2/pkg/util/defaults.GitCommit=${commit:-$version}" \
    -o "$tmp/" github.com/apache/camel-k/v2/cmd/kamel
  mv -T "$tmp" "$out/bin" 2>/dev/null || rm -rf "$tmp"
  tmp=
  echo "camel-k: built kamel $version in $(( $(date +%s) - start ))s" >&2
fi
echo "$out"
