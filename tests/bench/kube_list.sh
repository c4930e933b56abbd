#!/usr/bin/env bash
# tests/bench/kube_list.sh: how fast the informer lists and caches 10,000
# VmGroups from a real kube-apiserver, and what the process holding it
# costs in memory. Prints, e.g.:
#   kube_list: 10000 vmgroups listed and cached in 1.23 s; RSS idle 4.1 MiB, after 11.0 MiB (0.7 KiB per group)
# for the default (streaming) list, the same for pages of 500, and the
# budgets: < 5 s, < 1 KiB per cached group, idle RSS < 10 MiB.
#
# The driver (tests/bench/kube_list.c) is built here without sanitizers,
# with the Makefile's flags, against build/libvmgroup.a. It runs against
# $ENV_DIR when that holds a running environment (tests/env/up), else it
# starts one of its own and stops it at the end. KUBE_LIST_COUNT changes
# the number of groups (10000).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
count=${KUBE_LIST_COUNT:-10000}
ns=bench-kube-list

say() { printf 'kube_list: %s\n' "$*" >&2; }

make -s --no-print-directory build/libvmgroup.a >&2 || {
	say "make build/libvmgroup.a failed"
	exit 1
}
mkvar() { make -s --no-print-directory --eval 'print-var-%: ; @echo $($*)' "print-var-$1"; }
cflags=$(mkvar ALL_CFLAGS)
libs=$(mkvar PKG_LIBS)
mkdir -p build/bench
# shellcheck disable=SC2086 # word splitting of the flags is wanted
cc $cflags -o build/bench/kube_list tests/bench/kube_list.c build/libvmgroup.a $libs -lm

own_env=0
if [ -n "${ENV_DIR:-}" ] && [ -f "$ENV_DIR/env" ]; then
	# shellcheck disable=SC1091
	. "$ENV_DIR/env"
	kubectl get --raw /readyz >/dev/null || {
		say "the environment in $ENV_DIR is not running"
		exit 1
	}
else
	ENV_DIR=$(mktemp -d /tmp/vmgroup-bench-kube.XXXXXX)
	say "starting an environment in $ENV_DIR"
	if ! tests/env/up "$ENV_DIR" >"$ENV_DIR.log" 2>&1; then
		cat "$ENV_DIR.log" >&2
		exit 1
	fi
	own_env=1
	# shellcheck disable=SC1091
	. "$ENV_DIR/env"
fi
cleanup() {
	if [ "$own_env" = 1 ]; then
		tests/env/down "$ENV_DIR" >/dev/null 2>&1 || true
		rm -rf "$ENV_DIR" "$ENV_DIR.log"
	else
		# The test environment runs no namespace controller: a deleted
		# namespace would keep its groups for good, so they go first, in
		# one request for the whole collection.
		kubectl delete --raw "/apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/$ns/vmgroups" >/dev/null 2>&1 || true
		kubectl delete namespace "$ns" --wait=false --ignore-not-found >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

kubectl apply -k crds >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
kubectl create namespace "$ns" >/dev/null 2>&1 || true
say "creating $count VmGroups (with their status) in $ns"
build/bench/kube_list create --kubeconfig "$KUBECONFIG" --namespace "$ns" --count "$count" >&2

# field NAME LINE: the value of NAME=... in LINE.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

# measure MODE: runs one process holding only an informer; sets the figures.
measure() {
	local out
	out=$(build/bench/kube_list measure --kubeconfig "$KUBECONFIG" --list-mode "$1")
	idle=$(field idle_kib "$out")
	anon=$(field idle_anon_kib "$out")
	after=$(field after_kib "$out")
	n=$(field count "$out")
	secs=$(field seconds "$out")
	[ -n "$idle" ] && [ -n "$after" ] && [ -n "$n" ] && [ "$n" -gt 0 ] || {
		say "measuring ($1) failed: $out"
		exit 1
	}
	per=$(awk -v a="$after" -v i="$idle" -v n="$n" 'BEGIN { printf "%.2f", (a - i) / n }')
	line=$(awk -v n="$n" -v s="$secs" -v i="$idle" -v a="$after" -v p="$per" 'BEGIN {
		printf "%d vmgroups listed and cached in %.2f s; RSS idle %.1f MiB, after %.1f MiB (%.2f KiB per group)",
			n, s, i / 1024, a / 1024, p }')
}

measure auto
auto_line=$line auto_secs=$secs auto_per=$per auto_idle=$idle auto_anon=$anon
measure paged
paged_line=$line

echo "kube_list: $auto_line"
echo "kube_list (paged lists, limit 500): $paged_line"
verdict() { awk -v v="$1" -v max="$2" 'BEGIN { print (v < max) ? "ok" : "OVER" }'; }
printf 'kube_list: budgets: list < 5 s %s, < 1 KiB per group %s, idle RSS < 10 MiB %s (%.1f MiB, %.1f MiB of it anonymous; the rest is shared library pages: libcurl with its dependencies and OpenSSL)\n' \
	"$(verdict "$auto_secs" 5)" "$(verdict "$auto_per" 1)" "$(verdict "$auto_idle" 10240)" \
	"$(awk -v i="$auto_idle" 'BEGIN { print i / 1024 }')" "$(awk -v i="$auto_anon" 'BEGIN { print i / 1024 }')"
