#!/usr/bin/env bash
# tests/bench/controller.sh: the operator at scale against vcsim. For 100
# groups x 3 replicas and 10 x 30: seconds from apply to all RUNNING, peak
# resident memory and CPU seconds of the manager, API-server and vCenter
# requests per group created, and both counts over an idle period of
# resyncs (target: zero). The idle period starts once vCenter has settled:
# vcsim streams the changes of a large batch minutes after its tasks ended
# (it computes a long poll's answer update by update, against the whole
# filter), and the manager reads what they announce; "settle s" is how long
# after all groups were RUNNING vcsim took to go quiet (under 10% of a CPU
# for 10 s). Prints one table, then what the idle requests were. IDLE_SECONDS
# (default 60) sets the idle period; BENCH_CASES (default "100x3 10x30") the
# cases; BENCH_TASKS (default 16) --max-vcenter-tasks.
set -euo pipefail
. "$ENV_DIR/env"
export GOVC_PERSIST_SESSION=false
idle=${IDLE_SECONDS:-60}
log=$ENV_DIR/logs/bench-manager.log

kubectl apply -k "$VMG_TOP/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null


# The manager of the running case; stopped if this script stops early.
pid=
trap '[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true' EXIT

metric_sum() { # PATTERN: the sum of the samples whose line matches
	curl -sf "$murl" | awk -v p="$1" '$0 !~ /^#/ && $1 ~ p { s += $2 } END { printf "%d", s }'
}

metric_by() { # PATTERN LABEL: "value=count ..." of the samples whose line matches
	curl -sf "$murl" | awk -v p="$1" -v l="$2" '$0 !~ /^#/ && $1 ~ p {
		v = $1; sub(".*" l "=\"", "", v); sub("\".*", "", v); n[v] += $2 }
		END { for (v in n) printf "%s=%d ", v, n[v] }' | tr ' ' '\n' | sort | tr '\n' ' '
}

ticks() { # PID: the CPU time it has used, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

cpu_seconds() { # PID
	awk -v t="$(ticks "$1")" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

alive() { # the manager of the running case
	kill -0 "$pid" || { echo "bench: the manager died; see $log" >&2; exit 1; }
}

run_case() { # GROUPS REPLICAS
	local groups=$1 replicas=$2 ns=bench-$1x$2 mport pport t0 t1 t2 api0 vc0 api2 vc2all hwm cpu1 n
	local apis vcs prev cur
	mport=$((20000 + RANDOM % 6000))
	pport=$((26000 + RANDOM % 6000))
	murl=http://127.0.0.1:$mport/metrics
	kubectl create namespace "$ns" >/dev/null
	# vcsim computes a long poll's answer update by update, each against
	# the whole filter: with a few hundred VMs one answer can take minutes
	# (a real vCenter answers at once). The defaults wait for it (the
	# session's patience: up to 13 minutes while vcsim answers CurrentTime),
	# and the manager's log says so ("has not answered the long poll").
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --sync-period=10s \
		--metrics-bind-address "127.0.0.1:$mport" --metrics-secure=false \
		--health-probe-bind-address "127.0.0.1:$pport" --max-vcenter-tasks "${BENCH_TASKS:-16}" \
		</dev/null >>"$log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null && break; sleep 0.2; done
	api0=$(metric_sum '^rest_client_requests_total')
	vc0=$(metric_sum '^vmgroup_vcenter_requests_total')

	t0=$(date +%s.%N)
	for i in $(seq 0 $((groups - 1))); do
		printf 'apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: g%d\n  namespace: %s\nspec:\n  cpu: 1\n  memory: 1\n  template: vm-operator-template\n  replicas: %d\n---\n' "$i" "$ns" "$replicas"
	done | kubectl apply -f - >/dev/null
	while :; do
		n=$(kubectl get vg -n "$ns" -o jsonpath='{range .items[*]}{.status.phase}{"/"}{.status.currentReplicas}{"\n"}{end}' | grep -c "^RUNNING/$replicas\$" || true)
		[ "$n" -eq "$groups" ] && break
		alive
		sleep 0.5
	done
	t1=$(date +%s.%N)
	cpu1=$(cpu_seconds "$pid")

	# Settled: vcsim under 10% of a CPU over 10 s (at most 15 minutes).
	local hz vcsim
	hz=$(getconf CLK_TCK)
	vcsim=$(cat "$ENV_DIR/run/vcsim.pid")
	while [ "$(date +%s)" -lt $((${t1%.*} + 900)) ]; do
		prev=$(ticks "$vcsim")
		sleep 10
		cur=$(ticks "$vcsim")
		[ $((cur - prev)) -lt "$hz" ] && break
		alive
	done
	t2=$(date +%s.%N)
	apis=$(metric_sum '^rest_client_requests_total')
	vcs=$(metric_sum '^vmgroup_vcenter_requests_total')
	local vcm0 apim0
	vcm0=$(metric_by '^vmgroup_vcenter_requests_total' method)
	apim0=$(metric_by '^rest_client_requests_total' method)

	sleep "$idle"
	api2=$(metric_sum '^rest_client_requests_total')
	vc2all=$(metric_sum '^vmgroup_vcenter_requests_total')
	hwm=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
	idle_detail="$idle_detail$(printf '%d x %d idle: vCenter %s-> %s; API %s-> %s' "$groups" "$replicas" \
		"$vcm0" "$(metric_by '^vmgroup_vcenter_requests_total' method)" \
		"$apim0" "$(metric_by '^rest_client_requests_total' method)")
"

	awk -v g="$groups" -v r="$replicas" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v hwm="$hwm" \
		-v cpu="$cpu1" -v a="$((apis - api0))" -v v="$((vcs - vc0))" -v ai="$((api2 - apis))" \
		-v vi="$((vc2all - vcs))" \
		'BEGIN { s = t1 - t0; printf "%4d x %-3d %9.1f %10.1f %8.2f %7.0f%% %10.1f %10.1f %9.0f %9d %11d\n", g, r, s, hwm, cpu, 100 * cpu / s, a / g, v / g, t2 - t1, ai, vi }'

	kill -TERM "$pid"
	wait "$pid" || true
	# Clean up with a fresh manager so that vCenter is left empty.
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --metrics-bind-address 0 \
		--health-probe-bind-address 0 --max-vcenter-tasks 16 \
		</dev/null >>"$log" 2>&1 &
	pid=$!
	kubectl delete namespace "$ns" --wait=false >/dev/null
	kubectl delete vg --all -n "$ns" --timeout=1800s >/dev/null
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
}

printf '%-10s %9s %10s %8s %8s %10s %10s %9s %9s %11s\n' groups "to RUN s" "peak MiB" "CPU s" "CPU/wall" "API/group" "vC/group" "settle s" "API idle" "vC idle(*)"
idle_detail=
for c in ${BENCH_CASES:-100x3 10x30}; do
	run_case "${c%x*}" "${c#*x}"
done
echo "API/group, vC/group: requests from apply until settled, per group."
echo "(*) vCenter requests during ${idle} s idle, the long-polling WaitForUpdatesEx calls included;"
echo "    API idle: API-server requests during the same period (resyncs every 10 s)."
echo "Requests by method, before and after the idle period:"
printf '%s' "$idle_detail"
