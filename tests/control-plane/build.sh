#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd from the Go module
# proxy at the versions pinned in kube/go.mod and etcd/go.mod, into a cache
# outside the checkout keyed by those versions and pins. A second run with the
# same pins does nothing. Prints the bin directory on stdout.
#
#   CAMELK_CACHE   cache root (default: ~/.cache/camelk-gitops; see scripts/cache-root.sh)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

# shellcheck source=../../scripts/cache-root.sh
. "$here/../../scripts/cache-root.sh"
cache=$CAMELK_CACHE
pins=$(cat "$here"/kube/go.mod "$here"/kube/go.sum "$here"/etcd/go.mod "$here"/etcd/go.sum "$here/versions.env" | sha256sum | cut -c1-12)
bin="$cache/control-plane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-$pins/bin"

if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/kube-scheduler" ] \
   && [ -x "$bin/etcd" ] \
   && "$bin/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; then
  echo "$bin"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

tmp="$bin.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "control-plane: building Kubernetes $KUBE_VERSION and etcd $ETCD_VERSION into $bin (first time only)" >&2
(cd "$here/kube" && go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ld" -o "$tmp/" ./cmd/...)
(cd "$here/etcd" && go build -trimpath -ldflags="-s -w" -o "$tmp/" ./cmd/etcd)
rm -rf "$bin"; mv "$tmp" "$bin"
echo "control-plane: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
