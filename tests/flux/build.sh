#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from the Go module proxy at
# the release pinned in source-controller/go.mod and kustomize-controller/go.mod (one
# wrapper module each: see the comments there), and copies each release's CRDs out of
# its module (config/crd/bases/). Output goes to a cache outside the checkout keyed by
# the version and a hash of the pins; a second run with the same pins does nothing.
# Prints the directory holding bin/source-controller, bin/kustomize-controller and
# crds/*.yaml on stdout.
#
#   bash tests/flux/build.sh
#
#   CAMELK_CACHE  cache root (default: ~/.cache/camelk-gitops; see scripts/cache-root.sh)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
controllers=(source-controller kustomize-controller)

# Both wrappers must pin one release: the two controllers share their CRDs' API versions.
version=
for c in "${controllers[@]}"; do
  pinned=$(awk -v m="github.com/fluxcd/$c" '$1 == m { print $2 }' "$here/$c/go.mod")
  if [ -z "$pinned" ]; then
    echo "flux: $here/$c/go.mod requires no github.com/fluxcd/$c" >&2
    exit 2
  fi
  if [ -n "$version" ] && [ "$pinned" != "$version" ]; then
    echo "flux: source-controller is pinned at $version but $c at $pinned" >&2
    exit 2
  fi
  version=$pinned
done

# shellcheck source=../../scripts/cache-root.sh
. "$here/../../scripts/cache-root.sh"
# shellcheck source=../lib/cache-parts.sh
. "$here/../lib/cache-parts.sh"
cache=$CAMELK_CACHE
pins=$(for c in "${controllers[@]}"; do cat "$here/$c/go.mod" "$here/$c/go.sum"; done | sha256sum | cut -c1-12)
out="$cache/flux/flux-$version-$pins"
have_crds() {
  [ -f "$out/crds/source.toolkit.fluxcd.io_gitrepositories.yaml" ] &&
    [ -f "$out/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml" ]
}
have_bins() { [ -x "$out/bin/source-controller" ] && [ -x "$out/bin/kustomize-controller" ]; }

if have_crds && have_bins; then
  echo "$out"
  exit 0
fi

parts_begin

# Each part is made aside and renamed into place (tests/lib/cache-parts.sh).
if ! have_crds; then
  part_start crds
  for c in "${controllers[@]}"; do
    src=$(cd "$here/$c" && go mod download "github.com/fluxcd/$c" &&
      go list -m -f '{{.Dir}}' "github.com/fluxcd/$c")
    crds="$src/config/crd/bases"
    [ -d "$crds" ] || { echo "flux: no CRDs at $crds" >&2; exit 1; }
    cp "$crds"/*.yaml "$tmp/"
  done
  chmod -R u+w "$tmp"
  part_done crds
fi

if ! have_bins; then
  part_start bin
  for c in "${controllers[@]}"; do
    start=$(date +%s)
    echo "flux: building $c $version into $out (first time only)" >&2
    (cd "$here/$c" && go build -trimpath -ldflags="-s -w" -o "$tmp/" "github.com/fluxcd/$c")
    echo "flux: built $c $version in $(( $(date +%s) - start ))s" >&2
  done
  part_done bin
fi
if ! have_crds || ! have_bins; then
  echo "flux: $out is incomplete (another build's folder in the way?)" >&2
  exit 1
fi
echo "$out"
