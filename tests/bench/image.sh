#!/usr/bin/env bash
# tests/bench/image.sh: the image's size, uncompressed (podman image inspect
# .Size) and pushed (the compressed layers and config the registry's
# manifest lists), next to the base image's and the manager binary's, as
# built and stripped. Builds with `make image CONTAINER_TOOL=podman` and
# pushes with `make image-push` to a registry on loopback that it starts.
# Skipped, saying why, where podman is not installed.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
say() { printf 'image: %s\n' "$*" >&2; }

if ! command -v podman >/dev/null; then
	echo "image: skipped: podman is not installed (hack/env/deps installs it)"
	exit 0
fi

work=$(mktemp -d /tmp/vmgroup-bench-image.XXXXXX)
img=
cleanup() {
	hack/image/registry stop "$work" >/dev/null 2>&1 || true
	[ -z "$img" ] || podman rmi "$img" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

hack/image/base
reg=$(hack/image/registry start "$work")
img=$reg/vmgroup-operator:bench
t0=$SECONDS
make --no-print-directory image CONTAINER_TOOL=podman IMG="$img" >"$work/build.log" 2>&1 || {
	tail -n 30 "$work/build.log" >&2
	say "make image failed"
	exit 1
}
build_s=$((SECONDS - t0))
make --no-print-directory image-push CONTAINER_TOOL=podman IMG="$img" >"$work/push.log" 2>&1 || {
	tail -n 20 "$work/push.log" >&2
	say "make image-push failed"
	exit 1
}
manifest=$(curl -fsS \
	-H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
	"http://$reg/v2/vmgroup-operator/manifests/bench")

image_size=$(podman image inspect --format '{{.Size}}' "$img")
pushed=$(jq '[.config.size, .layers[].size] | add' <<<"$manifest")
layers=$(jq '.layers | length' <<<"$manifest")
base_size=$(podman image inspect --format '{{.Size}}' debian:bookworm-slim)
in_image=$(podman run --rm --network=none --entrypoint /usr/bin/stat "$img" -c %s /manager)
cp bin/vmgroup-operator "$work/stripped"
strip "$work/stripped"
bin_size=$(stat -c %s bin/vmgroup-operator)
stripped=$(stat -c %s "$work/stripped")

mib() { awk -v b="$1" 'BEGIN { printf "%8.1f MiB", b / 1048576 }'; }
printf '%-46s %s\n' \
	"image, uncompressed (podman .Size)" "$(mib "$image_size")" \
	"image, pushed ($layers compressed layers + config)" "$(mib "$pushed")" \
	"base debian:bookworm-slim, uncompressed" "$(mib "$base_size")" \
	"/manager in the image (as built, with -g)" "$(mib "$in_image")" \
	"bin/vmgroup-operator (make build)" "$(mib "$bin_size")" \
	"bin/vmgroup-operator, stripped" "$(mib "$stripped")"
echo "(make image took ${build_s} s; the base images: hack/image/base)"
