#!/usr/bin/env bash
# tests/bench/controller.sh: the operator at scale against vcsim. For 100
# groups x 3 replicas and 10 x 30: seconds from apply to all RUNNING, peak
# resident memory and CPU seconds of the manager, API-server and vCenter
# requests per group created, and both counts over an idle period of
# resyncs (target: zero). Prints one table. IDLE_SECONDS (default 60) sets
# the idle period.
set -euo pipefail
. "$ENV_DIR/env"
export GOVC_PERSIST_SESSION=false
idle=${IDLE_SECONDS:-60}
log=$ENV_DIR/logs/bench-manager.log

kubectl apply -k "$VMG_TOP/crds" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null


metric_sum() { # PATTERN: the sum of the samples whose line matches
	curl -sf "$murl" | awk -v p="$1" '$0 !~ /^#/ && $1 ~ p { s += $2 } END { printf "%d", s }'
}

cpu_seconds() { # PID
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}

run_case() { # GROUPS REPLICAS
	local groups=$1 replicas=$2 ns=bench-$1x$2 mport pport pid t0 t1 api0 vc0 api1 vc1 api2 vc2 hwm cpu1 n
	mport=$((20000 + RANDOM % 6000))
	pport=$((26000 + RANDOM % 6000))
	murl=http://127.0.0.1:$mport/metrics
	kubectl create namespace "$ns" >/dev/null
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --sync-period=10s \
		--metrics-bind-address "127.0.0.1:$mport" --metrics-secure=false \
		--health-probe-bind-address "127.0.0.1:$pport" --max-vcenter-tasks 16 \
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
		kill -0 "$pid" || { echo "bench: the manager died; see $log" >&2; exit 1; }
		sleep 0.5
	done
	t1=$(date +%s.%N)
	api1=$(metric_sum '^rest_client_requests_total')
	vc1=$(metric_sum '^vmgroup_vcenter_requests_total')
	cpu1=$(cpu_seconds "$pid")

	sleep "$idle"
	api2=$(metric_sum '^rest_client_requests_total')
	vc2all=$(metric_sum '^vmgroup_vcenter_requests_total')
	hwm=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")

	awk -v g="$groups" -v r="$replicas" -v t0="$t0" -v t1="$t1" -v hwm="$hwm" -v cpu="$cpu1" \
		-v a="$((api1 - api0))" -v v="$((vc1 - vc0))" -v ai="$((api2 - api1))" \
		-v vi="$((vc2all - vc1))" -v idle="$idle" \
		'BEGIN { s = t1 - t0; printf "%4d x %-3d %9.1f %10.1f %8.2f %7.0f%% %10.1f %10.1f %9d %11d\n", g, r, s, hwm, cpu, 100 * cpu / s, a / g, v / g, ai, vi }'

	kill -TERM "$pid"
	wait "$pid" || true
	# Clean up with a fresh manager so that vCenter is left empty.
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" --metrics-bind-address 0 \
		--health-probe-bind-address 0 --max-vcenter-tasks 16 </dev/null >>"$log" 2>&1 &
	pid=$!
	kubectl delete namespace "$ns" --wait=false >/dev/null
	kubectl delete vg --all -n "$ns" --timeout=600s >/dev/null
	kill -TERM "$pid"
	wait "$pid" || true
}

printf '%-10s %9s %10s %8s %8s %10s %10s %9s %11s\n' groups "to RUN s" "peak MiB" "CPU s" "CPU/wall" "API/group" "vC/group" "API idle" "vC idle(*)"
run_case 100 3
run_case 10 30
echo "(*) vCenter requests during ${idle} s idle, the long-polling WaitForUpdatesEx calls included;"
echo "    API idle: API-server requests during the same period (resyncs every 10 s)."
