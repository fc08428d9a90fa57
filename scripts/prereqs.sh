#!/usr/bin/env bash
# What `make demo` and `make test` need besides the caches they build, checked in
# seconds before anything slow starts, with the one command that installs what is
# missing. The Debian package lists live here only; `.ci/run` installs them with
# `--install`.
#
#   scripts/prereqs.sh demo|test              check; exit 1 naming what is missing
#   scripts/prereqs.sh --install demo|test    install the Debian packages (as root)
set -euo pipefail

install=false
if [[ ${1:-} == --install ]]; then
  install=true
  shift
fi
goal=${1:-test}

# The build: C toolchain and headers for libgit2/openssl-sys, git, make.
build_packages=(build-essential pkg-config libssl-dev git make)
# The tests besides: kubectl (`kubectl plugin list`), OpenSSH server and client (the
# `--push` over SSH test), umoci, skopeo and docker-registry (the image test builds,
# pushes and pulls on loopback), lua5.4 (the Argo CD health check), shellcheck (`make lint`),
# prometheus (the metric analysis of a rollout step queries a real one on loopback).
test_packages=(kubectl openssh-server openssh-client umoci skopeo docker-registry lua5.4 shellcheck prometheus)
# Go builds the control plane, KWOK, Camel K, Helm, Flux and actionlint.
go_minimum=1.26

case $goal in
  demo) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/prereqs.sh [--install] demo|test" >&2; exit 2 ;;
esac

missing=()
for pkg in "${packages[@]}"; do
  # "install ok installed" only: a removed package can still be known to dpkg.
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if $install; then
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "prereqs: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  fi
  exit 0
fi

problems=()
if [[ ${#missing[@]} -gt 0 ]]; then
  problems+=("Debian packages ${missing[*]}: sudo apt-get install -y ${missing[*]}")
fi
if ! command -v go >/dev/null; then
  problems+=("Go >= $go_minimum: install it from https://go.dev/dl/ (or Debian's golang-go if it is that recent)")
else
  have=$(go env GOVERSION 2>/dev/null | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
  if [[ $(printf '%s\n%s\n' "$go_minimum" "$have" | sort -V | head -1) != "$go_minimum" ]]; then
    problems+=("Go >= $go_minimum (found go$have): install it from https://go.dev/dl/")
  fi
fi
command -v cargo >/dev/null || problems+=("Rust (cargo): curl https://sh.rustup.rs -sSf | sh")
if [[ $goal == test && -z ${FUZZ_TOOLCHAIN:-} ]]; then
  # The fuzz targets need a nightly toolchain (libFuzzer's instrumentation).
  if ! command -v rustup >/dev/null || ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    problems+=("a nightly Rust toolchain (the fuzz targets): rustup toolchain install nightly")
  fi
fi

if [[ ${#problems[@]} -gt 0 ]]; then
  echo "make $goal needs:" >&2
  for p in "${problems[@]}"; do echo "  - $p" >&2; done
  exit 1
fi
