#!/usr/bin/env bash
# Builds KWOK (sigs.k8s.io/kwok: simulated nodes and pod status, no kubelet) at the
# version pinned in go.mod, cached (tests/go-build-tool.sh). Prints the bin directory
# (holding `kwok`) on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../go-build-tool.sh" "$here" kwok sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok
