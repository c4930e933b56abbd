# tests/e2e/manager.bash: starting and stopping the manager for the
# controller suites, and reading vCenter the way a user would (govc).
# Loaded after helpers.bash.

# pick_port VAR [EXCEPT]: sets VAR to a port on 127.0.0.1 that nothing
# listens on (and that is not EXCEPT). Not a $(...) function: subshells
# would all draw the same $RANDOM.
pick_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000)) # below the ephemeral range
		[ "$p" != "${2:-}" ] || continue
		ss -Htln "sport = :$p" | grep -q . || break
	done
	printf -v "$1" '%s' "$p"
}

# start_manager NAME [FLAGS...]: runs the manager in the background against
# the environment, with plain-HTTP metrics on a free port ($METRICS_URL) and
# probes on another ($PROBE_URL); its log is $ENV_DIR/logs/NAME.log.
start_manager() {
	local name=$1 mport pport
	shift
	pick_port mport
	pick_port pport "$mport"
	export METRICS_URL="http://127.0.0.1:$mport/metrics"
	export PROBE_URL="http://127.0.0.1:$pport"
	echo "$mport" >"$ENV_DIR/run/$name.metrics-port"
	echo "$pport" >"$ENV_DIR/run/$name.probe-port"
	setsid "$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
		--metrics-bind-address "127.0.0.1:$mport" --metrics-secure=false \
		--health-probe-bind-address "127.0.0.1:$pport" "$@" \
		</dev/null >>"$ENV_DIR/logs/$name.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/$name.pid"
	retry 20 curl -sf "$PROBE_URL/healthz" >/dev/null
}

# manager_urls NAME: sets METRICS_URL and PROBE_URL of a running manager.
manager_urls() {
	export METRICS_URL="http://127.0.0.1:$(cat "$ENV_DIR/run/$1.metrics-port")/metrics"
	export PROBE_URL="http://127.0.0.1:$(cat "$ENV_DIR/run/$1.probe-port")"
}

# stop_manager NAME [SIGNAL]: stops it (default SIGTERM) and waits.
stop_manager() {
	local pid sig=${2:-TERM} i
	pid=$(cat "$ENV_DIR/run/$1.pid" 2>/dev/null) || return 0
	kill -"$sig" "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$ENV_DIR/run/$1.pid"
}

# folder_of NS NAME: the group's folder (namespace_name for plain names).
folder_of() { echo "/DC0/vm/vm-operator/$1_$2"; }

# vms NS NAME: the names of the VMs in the group's folder, sorted.
vms() {
	GOVC_PERSIST_SESSION=false govc find "$(folder_of "$1" "$2")" -type m -name '*' 2>/dev/null |
		xargs -r -n1 basename | sort
}

vm_count() { vms "$1" "$2" | grep -c . || true; }

# vm_prop NS NAME VM PROPERTY: one property of a VM, as govc reads it.
vm_prop() {
	GOVC_PERSIST_SESSION=false govc object.collect -s "$(folder_of "$1" "$2")/$3" "$4"
}

# vm_mark NS NAME VM: the group UID the VM is marked with.
vm_mark() { vm_mark_at "$(folder_of "$1" "$2")/$3"; }

# vm_mark_at PATH: the group UID the VM at PATH is marked with.
vm_mark_at() { vm_extra_at "$1" vmgroup.codeconnect.vmworld.com.uid; }

# vm_extra_at PATH KEY: the extraConfig value of KEY of the VM at PATH.
vm_extra_at() {
	GOVC_PERSIST_SESSION=false govc vm.info -e -json "$1" |
		jq -r --arg k "$2" '(.virtualMachines // .VirtualMachines)[0] | (.config // .Config) | (.extraConfig // .ExtraConfig)[] | select((.key // .Key) == $k) | (.value // .Value)'
}

# copy_marks FROM TO: gives the VM at TO every mark of the VM at FROM, as
# vSphere's clone copies extraConfig (vcsim's does not).
copy_marks() {
	local k args=()
	for k in uid template instance-uuid; do
		args+=(-e "vmgroup.codeconnect.vmworld.com.$k=$(vm_extra_at "$1" "vmgroup.codeconnect.vmworld.com.$k")")
	done
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$2" "${args[@]}"
}

# phase NS NAME / status field helpers.
vg_field() { kubectl get vg "$2" -n "$1" -o "jsonpath=$3" 2>/dev/null; }
phase() { vg_field "$1" "$2" '{.status.phase}'; }

# wait_running NS NAME REPLICAS [SECONDS]: RUNNING with REPLICAS VMs, each
# powered on, and status saying so for the current generation.
wait_running() {
	local ns=$1 name=$2 n=$3 secs=${4:-90}
	retry "$secs" running_now "$ns" "$name" "$n"
}

running_now() {
	local ns=$1 name=$2 n=$3 gen obs
	[ "$(phase "$ns" "$name")" = RUNNING ] || return 1
	[ "$(vg_field "$ns" "$name" '{.status.currentReplicas}')" = "$n" ] || return 1
	gen=$(vg_field "$ns" "$name" '{.metadata.generation}')
	obs=$(vg_field "$ns" "$name" '{.status.observedGeneration}')
	[ "$gen" = "$obs" ] || return 1
	[ "$(vm_count "$ns" "$name")" = "$n" ] || return 1
}

# metric NAME_WITH_LABELS: a value from the manager's /metrics.
metric() {
	curl -sf "$METRICS_URL" | awk -v m="$1" '$1 == m { print $2; found=1 } END { if (!found) print 0 }'
}

# metric_above NAME N: the metric's value is above N (for retry).
metric_above() {
	[ "$(metric "$1")" -gt "$2" ]
}

# apply_vg NS NAME CPU MEMORY TEMPLATE REPLICAS
apply_vg() {
	kubectl apply -f - <<EOF
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: $2
  namespace: $1
spec:
  cpu: $3
  memory: $4
  template: $5
  replicas: $6
EOF
}
