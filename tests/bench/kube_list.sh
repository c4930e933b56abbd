#!/usr/bin/env bash
# tests/bench/kube_list.sh: how fast the Kubernetes side lists and caches
# 10,000 VmGroups from a real kube-apiserver, and what it costs in memory.
# Prints, e.g.:
#   kube_list: 10000 vmgroups listed and cached in 1.23 s; RSS idle 10.6 MiB, after 17.0 MiB (0.64 KiB per group)
#   kube_list (paged lists, limit 500): ...
#       a process holding only the client and an informer
#       (tests/bench/kube_list.c), with streaming and with paged lists;
#   kube_list: manager: idle 15.4 MiB (2.5 MiB anonymous); holding 10000 vmgroups 22.0 MiB (0.67 KiB per group), cached in 1.9 s
#       the manager itself, connected to kube-apiserver and vcsim, first
#       watching an empty namespace, then the groups' namespace while
#       another identity holds its Lease, so that it caches every group and
#       reconciles none;
#   kube_list: the libraries alone: 14.4 MiB (2.1 MiB anonymous); the manager's own share when idle: 1.0 MiB
#       tests/bench/lib_floor.c links the manager's libraries, initialises
#       them and makes one HTTPS request to each server, with none of the
#       operator's code: a floor the manager cannot go under;
# then the budgets: < 5 s, < 1 KiB per cached group, idle RSS < 10 MiB.
#
# The drivers are built here without sanitizers, with the Makefile's flags.
# It runs against $ENV_DIR when that holds a running environment
# (hack/env/up), else it starts one of its own and stops it at the end.
# KUBE_LIST_COUNT changes the number of groups (10000); VMG_BIN names the
# manager (bin/vmgroup-operator).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
count=${KUBE_LIST_COUNT:-10000}
ns=bench-kube-list

say() { printf 'kube_list: %s\n' "$*" >&2; }

make -s --no-print-directory build >&2 || {
	say "make build failed"
	exit 1
}
manager=${VMG_BIN:-$top/bin/vmgroup-operator}
make -s --no-print-directory build/bench/kube_list build/bench/lib_floor >&2 || {
	say "building tests/bench/kube_list.c or lib_floor.c failed"
	exit 1
}

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
	if ! hack/env/up "$ENV_DIR" >"$ENV_DIR.log" 2>&1; then
		cat "$ENV_DIR.log" >&2
		exit 1
	fi
	own_env=1
	# shellcheck disable=SC1091
	. "$ENV_DIR/env"
fi
mpid=
cleanup() {
	[ -z "$mpid" ] || kill -TERM "$mpid" 2>/dev/null || true
	if [ "$own_env" = 1 ]; then
		hack/env/down "$ENV_DIR" >/dev/null 2>&1 || true
		rm -rf "$ENV_DIR" "$ENV_DIR.log"
	else
		# The test environment runs no namespace controller: a deleted
		# namespace would stay terminating, refusing the next run's
		# groups. So the groups go (in one request for the whole
		# collection) and the Lease, and the empty namespace stays.
		kubectl delete --raw "/apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/$ns/vmgroups" >/dev/null 2>&1 || true
		kubectl delete lease -n "$ns" bench-held --ignore-not-found >/dev/null 2>&1 || true
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
auto_line=$line auto_secs=$secs auto_per=$per
measure paged
paged_line=$line

# manager NAMESPACE WAIT [FLAGS...]: runs the manager watching NAMESPACE
# until its cache has synced and WAIT more seconds; sets m_secs (start to
# synced), m_count (groups cached), m_rss and m_anon (KiB), and stops it.
manager() {
	local watch=$1 wait_s=$2 log t0 t1
	shift 2
	log=$ENV_DIR/logs/bench-kube-list-manager.log
	: >"$log"
	t0=$(date +%s.%N)
	"$manager" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --watch-namespace "$watch" \
		--metrics-bind-address 0 --health-probe-bind-address 0 "$@" </dev/null >>"$log" 2>&1 &
	mpid=$!
	until grep -q '"VmGroup cache synced' "$log"; do
		kill -0 "$mpid" 2>/dev/null || {
			say "the manager stopped before its cache synced; see $log"
			exit 1
		}
		[ "$(awk -v t="$t0" -v n="$(date +%s.%N)" 'BEGIN { print (n - t > 120) }')" = 0 ] || {
			say "the manager's cache did not sync in 120 s; see $log"
			exit 1
		}
		sleep 0.1
	done
	t1=$(date +%s.%N)
	m_count=$(sed -n 's/.*"VmGroup cache synced: \([0-9]*\) objects.*/\1/p' "$log" | head -n 1)
	m_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	sleep "$wait_s"
	kill -0 "$mpid" 2>/dev/null || {
		say "the manager stopped; see $log"
		exit 1
	}
	m_rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$mpid/status")
	m_anon=$(awk '$1 == "RssAnon:" { print $2 }' "/proc/$mpid/status")
	kill -TERM "$mpid"
	wait "$mpid" || true
	mpid=
}

# Idle: nothing to watch, connected to both servers.
manager bench-kube-list-none "${IDLE_WAIT:-20}"
idle_rss=$m_rss idle_anon=$m_anon
# Holding every group: another identity holds the Lease, for an hour.
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
kubectl apply -f - >/dev/null <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: bench-held
  namespace: $ns
spec:
  holderIdentity: bench-kube-list
  leaseDurationSeconds: 3600
  acquireTime: "$now"
  renewTime: "$now"
EOF
manager "$ns" 5 --leader-elect --leader-election-namespace "$ns" --leader-election-id bench-held
if grep -q '"became the leader' "$ENV_DIR/logs/bench-kube-list-manager.log"; then
	say "the manager took the Lease another identity holds; its figures would include reconciling"
	exit 1
fi
[ "$m_count" = "$count" ] || {
	say "the manager cached $m_count groups, not $count"
	exit 1
}
held_rss=$m_rss held_secs=$m_secs
held_per=$(awk -v a="$held_rss" -v i="$idle_rss" -v n="$count" 'BEGIN { printf "%.2f", (a - i) / n }')

floor=$(build/bench/lib_floor "$KUBE_APISERVER_URL/readyz" "$ENV_DIR/pki/ca.crt" \
	"$ENV_DIR/pki/admin.crt" "$ENV_DIR/pki/admin.key" -- "https://$VC_HOST/sdk" "$VC_CA_FILE")
floor_rss=$(field rss_kib "$floor")
floor_anon=$(field anon_kib "$floor")
[ -n "$floor_rss" ] || {
	say "lib_floor failed: $floor"
	exit 1
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

echo "kube_list: $auto_line"
echo "kube_list (paged lists, limit 500): $paged_line"
echo "kube_list: manager: idle $(mib "$idle_rss") MiB ($(mib "$idle_anon") MiB anonymous);" \
	"holding $count vmgroups $(mib "$held_rss") MiB ($held_per KiB per group), cached $held_secs s after its start"
echo "kube_list: the libraries alone (lib_floor): $(mib "$floor_rss") MiB ($(mib "$floor_anon") MiB anonymous);" \
	"the manager's own share when idle: $(mib $((idle_rss - floor_rss))) MiB"
verdict() { awk -v v="$1" -v max="$2" 'BEGIN { print (v < max) ? "ok" : "OVER" }'; }
echo "kube_list: budgets: list < 5 s $(verdict "$auto_secs" 5)," \
	"< 1 KiB per group $(verdict "$auto_per" 1) (manager $(verdict "$held_per" 1))," \
	"idle RSS < 10 MiB $(verdict "$idle_rss" 10240) (manager; the libraries alone hold $(mib "$floor_rss") MiB)"
