#!/usr/bin/env bash
# Builds actionlint (github.com/rhysd/actionlint, the linter `make lint` runs on the
# GitHub workflows and CI templates) at the version pinned in go.mod, cached
# (tests/go-build-tool.sh). Prints the bin directory (holding `actionlint`) on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../go-build-tool.sh" "$here" actionlint github.com/rhysd/actionlint \
  github.com/rhysd/actionlint/cmd/actionlint "-X github.com/rhysd/actionlint.version={version}"
