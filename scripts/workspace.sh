# shellcheck shell=bash
# Sourced by the release scripts (scripts/dist, scripts/image), run from the workspace root.

# `key = "value"` of the [workspace.package] table of the workspace Cargo.toml.
workspace_field() {
    awk -v key="$1" '
        /^\[/ { in_table = ($0 == "[workspace.package]"); next }
        in_table && $1 == key && $2 == "=" { gsub(/"/, "", $3); print $3; exit }
    ' Cargo.toml
}
