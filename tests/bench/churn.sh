#!/usr/bin/env bash
# tests/bench/churn.sh: a soak of group churn against the test environment
# and the real manager. Each round creates CHURN_GROUPS groups of 2 VMs,
# scales them to 3, resizes them (1 CPU / 1 GiB to 2 / 2), and deletes
# them; after each round it prints the manager's resident memory (VmRSS),
# the event recorder's cache entries (vmgroup_events_cache_entries, which
# must be back to 0 once every group is gone) and the seconds the round
# took. Memory is read once the manager has been idle for CHURN_SETTLE_S
# seconds after the delete, so that it has given its free heap pages back
# (it does every 5 s).
#
# The rule: after round CHURN_BASE (the first rounds warm up allocator
# arenas, curl's connections and caches), VmRSS may not grow by more than
# CHURN_TOLERANCE_KIB: the median of the last three rounds against the
# median of rounds CHURN_BASE-1..CHURN_BASE+1 (one round's figure moves by
# a few hundred KiB either way; a leak shows in the medians), and no single
# round may be more than twice the tolerance above that base; and the cache
# entries are 0 after every round. Exits 1 when either is broken.
#
#   CHURN_ROUNDS (30)  CHURN_GROUPS (10)  CHURN_BASE (5)  CHURN_TOLERANCE_KIB (1024)
#   CHURN_SETTLE_S (6) CHURN_NS (churn) CHURN_LOG ($ENV_DIR/logs/churn-manager.log)
#
# Needs ENV_DIR (a running hack/env/up), VMG_BIN and VMG_TOP, as
# tests/bench/run and tests/e2e/run set them.
set -euo pipefail
. "$ENV_DIR/env"
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
export GOVC_PERSIST_SESSION=false
rounds=${CHURN_ROUNDS:-30}
groups=${CHURN_GROUPS:-10}
base=${CHURN_BASE:-5}
tol=${CHURN_TOLERANCE_KIB:-1024}
ns=${CHURN_NS:-churn}
settle=${CHURN_SETTLE_S:-6}
log=${CHURN_LOG:-$ENV_DIR/logs/churn-manager.log}

kubectl apply -k "$VMG_TOP/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

pid=
trap '[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true' EXIT

port() { # a free port on 127.0.0.1, not $1
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		[ "$p" != "${1:-}" ] || continue
		ss -Htln "sport = :$p" | grep -q . || break
	done
	echo "$p"
}
mport=$(port)
pport=$(port "$mport")
murl=http://127.0.0.1:$mport/metrics
# Only what a Deployment gives it: govc's variables stay out.
env -u GOVC_PASSWORD -u GOVC_USERNAME -u GOVC_URL \
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --sync-period=10s \
	--watch-namespace "$ns" --metrics-bind-address "127.0.0.1:$mport" --metrics-secure=false \
	--health-probe-bind-address "127.0.0.1:$pport" </dev/null >>"$log" 2>&1 &
pid=$!
for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null || { echo "churn: the manager is not ready; see $log" >&2; exit 1; }

alive() {
	kill -0 "$pid" 2>/dev/null || { echo "churn: the manager died; see $log" >&2; exit 1; }
}

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }

cache_entries() { # the gauge, or "absent"
	curl -sf "$murl" | awk '$1 == "vmgroup_events_cache_entries" { print $2; f = 1 } END { if (!f) print "absent" }'
}

# all_running N CPU: every group RUNNING with N VMs of CPU vCPUs, its status
# describing its current generation.
all_running() {
	local n=$1 cpu=$2 got
	got=$(kubectl get vg -n "$ns" -o jsonpath='{range .items[*]}{.status.phase}/{.status.currentReplicas}/{.spec.cpu}/{.metadata.generation}/{.status.observedGeneration}{"\n"}{end}' |
		awk -F/ -v n="$n" -v c="$cpu" '$1 == "RUNNING" && $2 == n && $3 == c && $4 == $5' | wc -l)
	[ "$got" -eq "$groups" ]
}

wait_for() { # SECONDS COMMAND...
	local secs=$1 t
	shift
	t=$(($(date +%s) + secs))
	until "$@"; do
		alive
		[ "$(date +%s)" -lt "$t" ] || { echo "churn: timed out waiting for: $*" >&2; return 1; }
		sleep 0.5
	done
}

cache_settled() { # 0, or no such gauge (a manager without it fails below)
	case $(cache_entries) in 0 | absent) return 0 ;; *) return 1 ;; esac
}

printf '%5s %9s %11s %9s %8s\n' round "RSS KiB" "vs base" "cache" "round s"
base_rss=
worst=0
fail=0
all=()

for r in $(seq 1 "$rounds"); do
	t0=$(date +%s)
	for i in $(seq 0 $((groups - 1))); do
		printf 'apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: c%d\n  namespace: %s\nspec:\n  cpu: 1\n  memory: 1\n  template: vm-operator-template\n  replicas: 2\n---\n' "$i" "$ns"
	done | kubectl apply -f - >/dev/null
	wait_for 300 all_running 2 1
	# While the groups exist, the recorder remembers their events.
	busy=$(cache_entries)
	kubectl scale vg --all -n "$ns" --replicas=3 >/dev/null
	wait_for 300 all_running 3 1
	for i in $(seq 0 $((groups - 1))); do
		kubectl patch vg "c$i" -n "$ns" --type merge -p '{"spec":{"cpu":2,"memory":2}}' >/dev/null
	done
	wait_for 300 all_running 3 2
	kubectl delete vg --all -n "$ns" --timeout=300s >/dev/null
	# The manager forgets a group once it sees it gone.
	wait_for 60 cache_settled || true
	sleep "$settle"
	cache=$(cache_entries)
	rss=$(rss_kib)
	all+=("$rss")
	# The base: the median of rounds base-1..base+1, known after base+1.
	if [ -z "$base_rss" ] && [ "$r" -ge $((base + 1)) ]; then
		base_rss=$(median "${all[@]:base-2:3}")
	fi
	delta=-
	if [ -n "$base_rss" ]; then
		delta=$((rss - base_rss))
		[ "$delta" -le "$worst" ] || worst=$delta
	fi
	printf '%5d %9d %11s %9s %8d   (cache while running: %s)\n' "$r" "$rss" "$delta" "$cache" $(($(date +%s) - t0)) "$busy"
	if [ "$cache" != 0 ] || [ "$busy" = absent ] || [ "$busy" = 0 ]; then
		fail=1
	fi
done
kill -TERM "$pid"
wait "$pid" || true
pid=

end_rss=$(median "${all[@]: -3}")
growth=$((end_rss - base_rss))
echo "rule: VmRSS, median of the last 3 rounds at most $tol KiB above the median of rounds"
echo "      $((base - 1))..$((base + 1)) ($base_rss KiB), no round more than $((2 * tol)) KiB above it;"
echo "      event cache entries > 0 while groups exist and 0 once they are deleted"
echo "growth: $growth KiB (median of the last 3 rounds: $end_rss KiB); worst round: +$worst KiB"
if [ "$growth" -gt "$tol" ]; then
	echo "churn: FAIL: resident memory grew $growth KiB over the base (tolerance $tol KiB)"
	fail=1
fi
if [ "$worst" -gt $((2 * tol)) ]; then
	echo "churn: FAIL: one round was $worst KiB over the base (at most $((2 * tol)) KiB)"
	fail=1
fi
[ "$fail" -eq 0 ] || { echo "churn: FAIL" >&2; exit 1; }
echo "churn: ok"
