# shellcheck shell=bash disable=SC2154  # $out: set by the script that sources this
# Sourced by tests/camel-k/build.sh and tests/flux/build.sh: a cache folder, $out, filled
# part by part (crds/, bin/). Each part is made in a temporary folder and renamed into
# place, so a build that is interrupted, or raced by a second one, never leaves half a
# folder.

# parts_begin: Go builds only from the pins (no toolchain download, no cgo, go.mod
# as written), $out exists, and a part left half-made is removed on exit.
parts_begin() {
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mkdir -p "$out"
  tmp=
  trap 'if [ -n "$tmp" ]; then rm -rf "$tmp"; fi' EXIT
}

# part_start NAME: $tmp is a new, empty folder in which to make $out/NAME.
part_start() {
  tmp="$out/$1.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
}

# part_done NAME: $tmp renamed to $out/NAME; if a raced build got there first, its
# part stays and this one is removed.
part_done() {
  mv -T "$tmp" "$out/$1" 2>/dev/null || rm -rf "$tmp"
  tmp=
}
