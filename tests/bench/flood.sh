#!/usr/bin/env bash
# tests/bench/flood.sh: the manager under the floods an unauthenticated
# client can make, started as the Deployment starts it (TLS metrics with
# TokenReview/SubjectAccessReview, a plain probe port). A group is created
# with FLOOD_REPLICAS (default 20) and scaled to twice that, once quietly
# and once while
#   - the metrics port gets HTTPS requests with a new random token each,
#     from 64 loopback addresses (FLOOD_CONC), as from many hosts,
#   - the probe and metrics ports get requests pipelined on connections
#     never read,
#   - 40 keep-alive connections sit idle on the probe port,
# and a kubelet-like probe opens a new connection every 0.5 s. Quiet and
# flooded runs alternate for FLOOD_ROUNDS rounds (default 3), so that both
# see the same background load, and their medians are compared. It prints
# the manager's peak resident memory, the convergence times and the probe's
# answer times, and fails when a target is missed: peak RSS under 64 MiB,
# the median convergence under flood within 1.2x of the quiet median (+1 s:
# two waits polled every 0.5 s), every probe answered within 1 s.
set -euo pipefail
. "$ENV_DIR/env"
export GOVC_PERSIST_SESSION=false
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.bash"
log=$ENV_DIR/logs/bench-flood-manager.log
ns=bench-flood
conc=${FLOOD_CONC:-64}
small=${FLOOD_REPLICAS:-20}
rounds=${FLOOD_ROUNDS:-3}
big=$((2 * small))
rss_cap_kib=$((1024 * 1024)) # a flood that gets past 1 GiB is stopped there

kubectl apply -k "$VMG_TOP/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
kubectl create namespace "$ns" >/dev/null 2>&1 || true

port() { # a free loopback port
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		ss -Htln "sport = :$p" | grep -q . || break
	done
	echo "$p"
}
mport=$(port)
pport=$(port)
while [ "$pport" = "$mport" ]; do pport=$(port); done

pid= floods=() watch=
stop_all() {
	local p
	for p in "${floods[@]}" $watch; do kill "$p" 2>/dev/null || true; done
	[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
}
trap stop_all EXIT

"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
	--metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$pport" \
	</dev/null >>"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null || {
	echo "flood: the manager did not get ready; see $log" >&2
	exit 1
}

# converge NAME REPLICAS: seconds until the group is RUNNING with REPLICAS.
converge() {
	local t0 n
	t0=$(date +%s.%N)
	while :; do
		n=$(kubectl get vg "$1" -n "$ns" -o jsonpath='{.status.phase}/{.status.currentReplicas}' 2>/dev/null || true)
		[ "$n" = "RUNNING/$2" ] && break
		kill -0 "$pid" 2>/dev/null || {
			echo "flood: the manager died; see $log" >&2
			exit 1
		}
		[ "$(awk -v t="$t0" -v n="$(date +%s.%N)" 'BEGIN { print (n - t > 600) }')" = 0 ] || {
			echo "flood: group $1 not RUNNING/$2 within 600 s (saw $n)" >&2
			exit 1
		}
		sleep 0.5
	done
	awk -v t="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - t }'
}

# run NAME: create NAME with $small replicas, then scale it to $big; prints
# the sum of both convergence times.
run() {
	local a b
	printf 'apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  cpu: 1\n  memory: 1\n  template: vm-operator-template\n  replicas: %d\n' \
		"$1" "$ns" "$small" | kubectl apply -f - >/dev/null
	a=$(converge "$1" "$small")
	kubectl scale vg "$1" -n "$ns" --replicas="$big" >/dev/null
	b=$(converge "$1" "$big")
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", a + b }'
}

# cpu_ms: the manager's CPU time so far, in ms.
cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$pid/stat"
}

# The floods, each bounded in time; the watchdog keeps the machine safe
# from a manager that does not bound its memory. The attackers run at the
# lowest priority: on these two cores their own CPU would otherwise be taken
# from the manager, the API server and vcsim, which an attacker on another
# host does not do; the kubelet-like probe runs at the normal one.
out=$(mktemp -d)
start_floods() { # ROUND
	local secs=300
	floods=()
	nice -n 19 python3 "$here/flood.py" tokens "127.0.0.1:$mport" "$secs" "$conc" >"$out/tokens.$1" 2>&1 &
	floods+=($!)
	nice -n 19 python3 "$here/flood.py" pipeline "127.0.0.1:$pport" "$secs" >"$out/pipeline.$1" 2>&1 &
	floods+=($!)
	nice -n 19 python3 "$here/flood.py" pipeline "127.0.0.1:$mport" "$secs" tls >"$out/pipeline-metrics.$1" 2>&1 &
	floods+=($!)
	nice -n 19 python3 "$here/flood.py" idle "127.0.0.1:$pport" 40 "$secs" >"$out/idle.$1" 2>&1 &
	floods+=($!)
	python3 "$here/flood.py" probe "127.0.0.1:$pport" "$secs" 0.5 >"$out/probe.$1" 2>&1 &
	floods+=($!)
}
# The clients end on SIGTERM and print their figures.
stop_floods() {
	local p
	for p in "${floods[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait "${floods[@]}" 2>/dev/null || true
	floods=()
}
(
	while kill -0 "$pid" 2>/dev/null; do
		r=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
		if [ "${r:-0}" -gt "$rss_cap_kib" ]; then
			echo "flood: the manager passed 1 GiB resident; stopping it" >&2
			kill -KILL "$pid"
		fi
		sleep 0.2
	done
) &
watch=$!

quiets=() floodeds=() rss_quiet= cpu_quiet=0 cpu_flooded=0
for r in $(seq 1 "$rounds"); do
	c0=$(cpu_ms)
	q=$(run "quiet-$r")
	cpu_quiet=$((cpu_quiet + $(cpu_ms) - c0))
	kubectl delete vg "quiet-$r" -n "$ns" --timeout=600s >/dev/null
	quiets+=("$q")
	[ -n "$rss_quiet" ] || rss_quiet=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
	start_floods "$r"
	sleep 3 # let the floods build up before the group is created
	c0=$(cpu_ms)
	f=$(run "flooded-$r") || f=-1 # -1: not converged (the manager died)
	kill -0 "$pid" 2>/dev/null && cpu_flooded=$((cpu_flooded + $(cpu_ms) - c0))
	stop_floods
	floodeds+=("$f")
	kill -0 "$pid" 2>/dev/null || break
	kubectl delete vg "flooded-$r" -n "$ns" --timeout=600s >/dev/null
done
quiet=$(median "${quiets[@]}")
flooded=$(median "${floodeds[@]}")
case " ${floodeds[*]} " in *" -1 "*) flooded=-1 ;; esac
# Then a short probe checks that the manager answers once the floods are gone.
python3 "$here/flood.py" probe "127.0.0.1:$pport" 5 0.5 >>"$out/probe-after" 2>&1 || true
rc=0
if kill -0 "$pid" 2>/dev/null; then
	hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
else
	echo "flood: FAIL the manager died under the flood; see $log" >&2
	hwm=$rss_cap_kib
	rc=1
fi

printf '%-34s %10s\n' "case" "figure"
printf '%-34s %8.1f s  (rounds: %s)\n' "quiet: create $small, scale to $big" "$quiet" "${quiets[*]}"
printf '%-34s %8.1f s  (rounds: %s)\n' "flooded: create $small, scale to $big" "$flooded" "${floodeds[*]}"
printf '%-34s %8.1f s\n' "manager CPU, quiet runs" "$(awk -v m="$cpu_quiet" 'BEGIN { print m / 1000 }')"
printf '%-34s %8.1f s\n' "manager CPU, flooded runs" "$(awk -v m="$cpu_flooded" 'BEGIN { print m / 1000 }')"
printf '%-34s %8.1f MiB\n' "peak RSS quiet" "$(awk -v k="$rss_quiet" 'BEGIN { print k / 1024 }')"
printf '%-34s %8.1f MiB%s\n' "peak RSS with the floods" "$(awk -v k="$hwm" 'BEGIN { print k / 1024 }')" "$([ "$rc" -eq 0 ] || echo " (or more: killed at the cap)")"
cat "$out"/tokens.1 "$out"/pipeline.1 "$out"/pipeline-metrics.1 "$out"/idle.1 2>/dev/null | sed 's/^/  round 1: /'
cat "$out"/probe.* 2>/dev/null | grep -v probe-worst | sed 's/^/  during: /' || true
sed 's/^/  after:  /' "$out/probe-after" | grep -v probe-worst || true

if [ "$hwm" -ge $((64 * 1024)) ]; then
	echo "flood: FAIL peak RSS $((hwm / 1024)) MiB is not under 64 MiB" >&2
	rc=1
fi
if [ "$(awk -v q="$quiet" -v f="$flooded" 'BEGIN { print (f >= 0 && f <= 1.2 * q + 1) }')" != 1 ]; then
	echo "flood: FAIL convergence under flood (median ${flooded} s) is beyond 1.2x the quiet median ${quiet} s" >&2
	rc=1
fi
worst=$(sed -n 's/^probe-worst-ms //p' "$out/probe-after" | tail -1)
dworst=$(cat "$out"/probe.* 2>/dev/null | sed -n 's/^probe-worst-ms //p' |
	awk 'BEGIN { w = "" } { if (w == "" || (w >= 0 && ($1 < 0 || $1 > w))) w = $1 } END { print w }')
for w in "$dworst" "$worst"; do
	[ -n "$w" ] || continue
	if [ "$(awk -v w="$w" 'BEGIN { print (w >= 0 && w < 1000) }')" != 1 ]; then
		echo "flood: FAIL a probe was not answered within 1 s (worst: $w ms; -1: a probe failed)" >&2
		rc=1
	fi
done
[ -n "$dworst" ] || {
	echo "flood: FAIL the probe client during the flood printed no figures" >&2
	rc=1
}
rm -rf "$out"
exit $rc
