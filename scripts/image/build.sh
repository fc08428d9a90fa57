#!/usr/bin/env bash
# Container images of `reconciler` and `kubectl-camelk` (`make image`), built without a
# daemon and without root: umoci writes an OCI image layout, skopeo pushes it.
#
# Each image holds one binary in /usr/local/bin, the shared libraries `ldd` lists for it
# (the binaries link Debian's OpenSSL through git2's HTTPS: a static build would need an
# OpenSSL for musl, which this machine does not have, so the image carries the very
# libraries the binary was built and tested against), the CA bundle (for HTTPS Git
# remotes), and /etc/passwd and /etc/group naming the user it runs as, 65532 (nonroot).
# No shell, no package manager.
#
#   scripts/image/build.sh [reconciler|kubectl-camelk]...   (default: both)
#
# Variables:
#   IMAGE_REPOSITORY  repository prefix (default: ghcr.io/camelk-gitops, as examples/deploy
#                     and the chart name it); an image is <prefix>/<binary>:v<version>
#   IMAGE_DIR         the OCI image layout written (default: dist/oci)
#   IMAGE_BIN_DIR     take the binaries from this directory instead of building them in
#                     release mode (tests use it)
#   IMAGE_PUSH        push each image to this registry prefix with skopeo, e.g.
#                     127.0.0.1:5000/camelk-gitops (plain HTTP only on loopback)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

die() {
    echo "image: $*" >&2
    exit 1
}

for tool in umoci skopeo ldd; do
    command -v "$tool" >/dev/null || die "$tool is required (apt-get install umoci skopeo)"
done

# workspace_field KEY: a field of [workspace.package] in Cargo.toml.
source "$root/scripts/workspace.sh"
version=$(workspace_field version)
source=$(workspace_field repository)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
prefix=${IMAGE_REPOSITORY:-ghcr.io/camelk-gitops}
layout=${IMAGE_DIR:-dist/oci}
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=(reconciler kubectl-camelk)

if [[ -n ${IMAGE_BIN_DIR:-} ]]; then
    bin_dir=$IMAGE_BIN_DIR
else
    # One build a package: built together, Cargo would unify features and link the
    # reconciler's server and reference operator into the plugin (as scripts/dist/package.sh).
    for b in "${binaries[@]}"; do
        case $b in
            reconciler) package=camelk-reconciler ;;
            kubectl-camelk) package=kubectl-camelk ;;
            *) die "no binary '$b' (reconciler or kubectl-camelk)" ;;
        esac
        cargo build --release --locked -p "$package" --bin "$b" >&2
    done
    bin_dir=${CARGO_TARGET_DIR:-target}/release
fi

[[ -d $layout ]] || umoci init --layout "$layout"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

for b in "${binaries[@]}"; do
    binary=$bin_dir/$b
    [[ -x $binary ]] || die "no executable $binary"
    tag=$b-v$version
    ref=$layout:$tag
    umoci new --image "$ref"
    umoci unpack --rootless --image "$ref" "$work/$b" >/dev/null
    rootfs=$work/$b/rootfs
    install -D -m 0755 "$binary" "$rootfs/usr/local/bin/$b"
    # The loader and every library, at the paths the binary asks for.
    ldd "$binary" | awk '/=> \// { print $3 } /^[ \t]*\/.*\(0x/ { print $1 }' | sort -u |
        while read -r lib; do install -D -m 0755 "$lib" "$rootfs$lib"; done
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
    install -d -m 1777 "$rootfs/tmp"
    umoci repack --image "$ref" "$work/$b" >/dev/null
    # The host's architecture: the image carries the host's libraries (ldd above).
    umoci config --image "$ref" \
        --os linux --architecture "$(dpkg --print-architecture)" \
        --config.user 65532:65532 \
        --config.entrypoint "/usr/local/bin/$b" \
        --config.workingdir / \
        --config.env HOME=/tmp \
        --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
        --config.label "org.opencontainers.image.title=$b" \
        --config.label "org.opencontainers.image.version=v$version" \
        --config.label "org.opencontainers.image.revision=$revision" \
        --config.label "org.opencontainers.image.source=$source" \
        --config.label "org.opencontainers.image.licenses=Apache-2.0" \
        --config.label "org.opencontainers.image.ref.name=$prefix/$b:v$version"
    umoci gc --layout "$layout"
    echo "image: $prefix/$b:v$version in $layout (tag $tag)" >&2
    if [[ -n ${IMAGE_PUSH:-} ]]; then
        tls=()
        [[ $IMAGE_PUSH == 127.0.0.1:* || $IMAGE_PUSH == localhost:* ]] && tls=(--dest-tls-verify=false)
        skopeo copy --quiet "${tls[@]}" "oci:$ref" "docker://$IMAGE_PUSH/$b:v$version"
        echo "image: pushed $IMAGE_PUSH/$b:v$version" >&2
    fi
done
