#!/usr/bin/env bash
# Builds Helm (helm.sh/helm/v4, for `helm lint` and `helm template` of charts/) at the
# version pinned in go.mod, cached (tests/go-build-tool.sh). Prints the bin directory
# (holding `helm`) on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# The version Helm reports comes from its own variable, not from the module.
exec bash "$here/../go-build-tool.sh" "$here" helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm \
  "-X helm.sh/helm/v4/internal/version.version={version}"
