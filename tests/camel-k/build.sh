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
# shellcheck source=../lib/cache-parts.sh
. "$here/../lib/cache-parts.sh"
cache=$CAMELK_CACHE
pins=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
out="$cache/camel-k/camel-k-$version-$pins"
have_crds() { [ -f "$out/crds/camel.apache.org_integrations.yaml" ]; }
have_kamel() { [ -x "$out/bin/kamel" ]; }

if have_crds && { [ -n "$crds_only" ] || have_kamel; }; then
  echo "$out"
  exit 0
fi

parts_begin
cd "$mod"
go mod download github.com/apache/camel-k/v2
src=$(go list -m -f '{{.Dir}}' github.com/apache/camel-k/v2)

# Each part is made aside and renamed into place (tests/lib/cache-parts.sh).
if ! have_crds; then
  # The release's CRDs as its own install applies them (v2.10.1 and v2.8.0: 8 kinds, no KameletBinding).
  crds="$src/pkg/resources/config/crd/bases"
  [ -d "$crds" ] || { echo "camel-k: no CRDs at $crds" >&2; exit 1; }
  part_start crds
  cp "$crds"/*.yaml "$tmp/"
  chmod -R u+w "$tmp"
  part_done crds
fi

if [ -z "$crds_only" ] && ! have_kamel; then
  start=$(date +%s)
  echo "camel-k: building kamel $version into $out (first time only)" >&2
  commit=$(go mod download -json github.com/apache/camel-k/v2 | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p')
  part_start bin
  go build -trimpath \
    -ldflags="-s -w -X github.com/apache/camel-k/v2/pkg/util/defaults.GitCommit=${commit:-$version}" \
    -o "$tmp/" github.com/apache/camel-k/v2/cmd/kamel
  part_done bin
  echo "camel-k: built kamel $version in $(( $(date +%s) - start ))s" >&2
fi
echo "$out"
