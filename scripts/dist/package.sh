#!/usr/bin/env bash
# Release archives and the krew manifest (`make dist`, and the release workflow
# .github/workflows/release.yml: the one way archives are made).
#
#   scripts/dist/package.sh [build|pack]    (default: build, then pack)
#
# build: for each Rust target triple in DIST_TARGETS, builds `kubectl-camelk` and
#   `reconciler` in release mode into DIST_DIR/bin/<target>/. The release
#   workflow runs it on one runner per platform (macOS included: this stage needs
#   only cargo and a POSIX userland, and runs under macOS's bash 3.2).
# pack: for each target, packs the binaries of DIST_BIN_DIR/<target>/ (the build
#   stage's output, gathered from every runner) and writes, in DIST_DIR:
#
#   kubectl-camelk_<version>_<os>_<arch>.tar.gz   kubectl-camelk, LICENSE, README.md
#   reconciler_<version>_<os>_<arch>.tar.gz       reconciler, LICENSE, README.md
#   <archive>.sha256                              `sha256sum -c` format
#
# then renders KREW_MANIFEST from scripts/dist/krew-manifest.yaml.tmpl with the
# version (the workspace's, from Cargo.toml) and one platform per packed target.
#
# Archives are reproducible: entries in a fixed order, owner 0:0, fixed modes,
# mtime SOURCE_DATE_EPOCH (default 0), gzip without name or timestamp. The
# same binaries always give the same sha256.
#
# Variables:
#   DIST_TARGETS       target triples, space separated (default: every target
#                      rustup has installed that krew packaging knows: Linux
#                      and macOS on x86_64 and aarch64; else the host's)
#   DIST_DIR           output directory (default: dist)
#   DIST_BIN_DIR       pack kubectl-camelk and reconciler from <dir>/<target>/
#                      instead of building them (default for `pack`:
#                      DIST_DIR/bin); with one target, <dir> itself may hold
#                      them (tests use it; the target defaults to the host's)
#   DIST_LICENSE       licence file to ship (default: LICENSE); krew requires one
#   KREW_MANIFEST      where to write the manifest (default: krew-manifest.yaml)
#   SOURCE_DATE_EPOCH  mtime of every archive entry (default: 0)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

die() {
    echo "dist: $*" >&2
    exit 1
}

# workspace_field KEY: a field of [workspace.package] in Cargo.toml.
source "$root/scripts/workspace.sh"

version=$(workspace_field version)
repository=$(workspace_field repository)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "workspace version '$version' is not X.Y.Z"
[[ -n $repository ]] || die "no repository in [workspace.package] of Cargo.toml"

stage=${1:-all}
case $stage in
    build | pack | all) ;;
    *) die "unknown stage '$stage' (build or pack; none: both)" ;;
esac

host=$(rustc -vV | awk '/^host: / { print $2 }')

# The targets the installed toolchains can build: rustup's installed standard
# libraries, limited to the platforms platform_of (below) packages.
installed_targets() {
    local listed
    listed=$(rustup target list --installed 2>/dev/null | grep -E '^(x86_64|aarch64)-(unknown-linux-gnu|apple-darwin)$' || true)
    echo "${listed:-$host}"
}
out=${DIST_DIR:-dist}
license=${DIST_LICENSE:-LICENSE}
manifest=${KREW_MANIFEST:-krew-manifest.yaml}
epoch=${SOURCE_DATE_EPOCH:-0}
bin_dir=${DIST_BIN_DIR:-}
if [[ -n $bin_dir ]]; then
    [[ $stage != build ]] || die "DIST_BIN_DIR names binaries to pack; the build stage makes them"
    stage=pack
    targets=${DIST_TARGETS:-$host}
else
    targets=${DIST_TARGETS:-$(installed_targets | tr '\n' ' ')}
    bin_dir=$out/bin
fi

# krew's os/arch of a Rust target triple. Only Unix-like targets: a Windows
# archive would be a .zip with kubectl-camelk.exe, which this script does not make.
platform_of() {
    local os arch
    case $1 in
        *-linux-*) os=linux ;;
        *-apple-darwin) os=darwin ;;
        *) die "target $1: no packaging rule for this platform" ;;
    esac
    case $1 in
        x86_64-*) arch=amd64 ;;
        aarch64-*) arch=arm64 ;;
        *) die "target $1: no krew arch for this CPU" ;;
    esac
    echo "$os $arch"
}

# build TARGET: the two release executables for TARGET, built by cargo, copied
# to $bin_dir/TARGET/.
build() {
    local target=$1 target_flag=() package bin executable
    [[ $target == "$host" ]] || target_flag=(--target "$target")
    mkdir -p "$bin_dir/$target"
    # Two builds: built together, Cargo would unify features and link the
    # reconciler's server (axum, prometheus-client, hmac) into the plugin.
    for package in kubectl-camelk:kubectl-camelk camelk-reconciler:reconciler; do
        bin=${package#*:}
        # ${a[@]+...}: an empty array under `set -u` is an error in bash 3.2 (macOS).
        executable=$(cargo build --release --locked ${target_flag[@]+"${target_flag[@]}"} \
            -p "${package%%:*}" --bin "$bin" --message-format=json-render-diagnostics |
            sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | grep "/$bin\$") ||
            die "cargo built no $bin for $target"
        install -m 0755 "$executable" "$bin_dir/$target/$bin"
    done
    echo "dist: $bin_dir/$target/{kubectl-camelk,reconciler}" >&2
}

# The directory holding the binaries of TARGET: its own subdirectory, or (one
# target) DIST_BIN_DIR itself.
binaries_of() {
    if [[ -d $bin_dir/$1 ]]; then
        echo "$bin_dir/$1"
    elif [[ $(wc -w <<<"$targets") -eq 1 ]]; then
        echo "$bin_dir"
    else
        die "no $bin_dir/$1/: DIST_BIN_DIR holds one subdirectory per target when DIST_TARGETS names several"
    fi
}

# pack ARCHIVE BINARY: a reproducible tar.gz of BINARY, the licence and README.md.
pack() {
    local archive=$1 binary=$2 stage
    stage=$(mktemp -d)
    install -m 0755 "$binary" "$stage/$(basename "$binary")"
    install -m 0644 "$license" "$stage/LICENSE"
    install -m 0644 README.md "$stage/README.md"
    # Sorted names; tar keeps the order it is given.
    (cd "$stage" && LC_ALL=C ls -1) | LC_ALL=C sort |
        tar -C "$stage" --create --format=gnu --no-recursion --files-from=- \
            --owner=0 --group=0 --numeric-owner --mtime="@$epoch" |
        gzip -9 -n >"$archive.tmp"
    mv "$archive.tmp" "$archive"
    rm -rf "$stage"
    (cd "$(dirname "$archive")" && sha256sum "$(basename "$archive")") >"$archive.sha256"
}

for target in $targets; do
    platform_of "$target" >/dev/null
done
if [[ $stage != pack ]]; then
    for target in $targets; do
        build "$target"
    done
fi
[[ $stage != build ]] || exit 0

[[ -f $license ]] || die "no licence file '$license': krew installs only archives that ship one (add LICENSE at the repository root)"
[[ -f README.md ]] || die "no README.md"
mkdir -p "$out"
platforms=""
for target in $targets; do
    platform=$(platform_of "$target")
    read -r os arch <<<"$platform"
    dir=$(binaries_of "$target")
    plugin=$dir/kubectl-camelk
    reconciler=$dir/reconciler
    [[ -x $plugin && -x $reconciler ]] || die "missing executables: $plugin $reconciler"

    plugin_archive=kubectl-camelk_${version}_${os}_${arch}.tar.gz
    pack "$out/$plugin_archive" "$plugin"
    pack "$out/reconciler_${version}_${os}_${arch}.tar.gz" "$reconciler"
    sha256=$(cut -d' ' -f1 "$out/$plugin_archive.sha256")
    uri=$repository/releases/download/v$version/$plugin_archive
    platforms+=$(sed -e "s|@OS@|$os|" -e "s|@ARCH@|$arch|" -e "s|@URI@|$uri|" \
        -e "s|@SHA256@|$sha256|" scripts/dist/krew-platform.yaml.tmpl)$'\n'
    echo "dist: $out/$plugin_archive $sha256" >&2
done

rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
while IFS= read -r line; do
    if [[ $line == "@PLATFORMS@" ]]; then
        printf '%s' "$platforms"
    else
        line=${line//@VERSION@/$version}
        printf '%s\n' "${line//@REPOSITORY@/$repository}"
    fi
done <scripts/dist/krew-manifest.yaml.tmpl >"$rendered"
cp "$rendered" "$manifest"
echo "dist: $manifest (v$version)" >&2
