#!/usr/bin/env bats
# The image, built and pushed the way the README says: `make image` and
# `make image-push` with CONTAINER_TOOL=podman, to Debian's docker-registry
# on loopback; the image runs as user 65532 with no network; a registry that
# is down fails the push at once, naming the registry. The base images come
# from hack/image/base (no registry outside is reachable here).

load helpers

# A first build installs the build stage's packages and compiles: minutes.
BATS_TEST_TIMEOUT=1800

setup_file() {
	local out
	out=$("$VMG_TOP/hack/image/base" 2>&1) || {
		echo "$out"
		return 1
	}
	[ -z "$out" ] || sed 's/^/# /' <<<"$out" >&3
	REG=$("$VMG_TOP/hack/image/registry" start "$BATS_FILE_TMPDIR/reg")
	echo "$REG" >"$BATS_FILE_TMPDIR/registry"
	echo "e2e-$$-$RANDOM" >"$BATS_FILE_TMPDIR/tag"
}

teardown_file() {
	"$VMG_TOP/hack/image/registry" stop "$BATS_FILE_TMPDIR/reg" || true
	podman rmi -f "$(cat "$BATS_FILE_TMPDIR/registry")/vmgroup-operator:$(cat "$BATS_FILE_TMPDIR/tag")" \
		>/dev/null 2>&1 || true
}

setup() {
	REG=$(cat "$BATS_FILE_TMPDIR/registry")
	TAG=$(cat "$BATS_FILE_TMPDIR/tag")
	IMG=$REG/vmgroup-operator:$TAG
}

@test "image: make image CONTAINER_TOOL=podman builds the Dockerfile" {
	local t0=$SECONDS
	run make -C "$VMG_TOP" --no-print-directory image CONTAINER_TOOL=podman IMG="$IMG"
	echo "$output" | tail -n 30
	[ "$status" -eq 0 ]
	echo "# make image took $((SECONDS - t0)) s" >&3
	podman image exists "$IMG"
}

@test "image: it runs --version as user 65532:65532 with no network, and says the tree's version" {
	local want
	want=$(git -C "$VMG_TOP" describe --tags --always --dirty 2>/dev/null || echo dev)
	[ "$(podman image inspect --format '{{.Config.User}}' "$IMG")" = 65532:65532 ]
	run podman run --rm --network=none "$IMG" --version
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "vmgroup-operator $want" ]
	run podman run --rm --network=none --entrypoint /usr/bin/id "$IMG" -u
	[ "$output" = 65532 ]
}

@test "image: make image-push puts it in the registry, every layer included" {
	local manifest digest
	run make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman IMG="$IMG"
	echo "$output" | tail -n 20
	[ "$status" -eq 0 ]
	run curl -fsS "http://$REG/v2/vmgroup-operator/tags/list"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r --arg t "$TAG" '.tags | index($t) != null' <<<"$output")" = true ]
	manifest=$(curl -fsS \
		-H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
		"http://$REG/v2/vmgroup-operator/manifests/$TAG")
	[ "$(jq '.layers | length' <<<"$manifest")" -ge 2 ]
	for digest in $(jq -r '.config.digest, .layers[].digest' <<<"$manifest"); do
		curl -fsS -o /dev/null -I "http://$REG/v2/vmgroup-operator/blobs/$digest" ||
			{ echo "blob $digest missing"; return 1; }
	done
}

@test "image: make image-push to a registry that is down fails within 30 s and names it" {
	local port t0 down
	for _ in $(seq 1 100); do
		port=$((20000 + RANDOM % 12000))
		ss -Htln "sport = :$port" | grep -q . || break
	done
	down=127.0.0.1:$port
	podman tag "$IMG" "$down/vmgroup-operator:$TAG"
	t0=$SECONDS
	run timeout 120 make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman \
		IMG="$down/vmgroup-operator:$TAG"
	podman rmi "$down/vmgroup-operator:$TAG" >/dev/null 2>&1 || true
	echo "$output" | tail -n 5
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ]
	[ $((SECONDS - t0)) -lt 30 ]
	grep -q "$down" <<<"$output"
}
