#!/usr/bin/env bats
# The operator under faults: vCenter sessions terminated, kube-apiserver and
# vcsim restarted mid-run, the manager killed while scaling. It must end
# with exactly the declared VMs, never more.

load helpers
load manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace faults --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	start_manager faults-manager --watch-namespace faults
}

teardown_file() {
	stop_manager faults-manager
	stop_manager faults-badpool
	stop_manager faults-watch KILL
	stop_manager faults-rotate
}

setup() {
	manager_urls faults-manager
}

teardown() {
	# A test that stopped vcsim and failed must not leave it stopped, nor
	# failing the operator's logins.
	kill -CONT "$(cat "$ENV_DIR/run/vcsim.pid")" 2>/dev/null || true
	rm -f "$ENV_DIR/vcsim/login-fault" "$ENV_DIR/vcsim/method-faults"
	# Nor the manager with flags of its own.
	if [ -f "$ENV_DIR/run/faults-manager.flags" ]; then
		stop_manager faults-manager
		start_manager faults-manager --watch-namespace faults
		rm -f "$ENV_DIR/run/faults-manager.flags"
	fi
}

# restart_manager [FLAGS...]: the file's manager again, with FLAGS.
restart_manager() {
	stop_manager faults-manager
	touch "$ENV_DIR/run/faults-manager.flags"
	start_manager faults-manager --watch-namespace faults "$@"
}

# The operator's vCenter sessions (its User-Agent names it).
operator_sessions() {
	GOVC_PERSIST_SESSION=false govc session.ls -json |
		jq -r '(.sessionList // .SessionList // [])[] | select(((.userAgent // .UserAgent) // "") | test("vmgroup-operator")) | (.key // .Key)'
}

# keep_and_poke KEEP POKE: a group KEEP RUNNING with 1 VM, whose status is
# to stay as it is, and a group POKE RUNNING with none, to scale so that
# the manager calls vCenter; the writes of their convergence are out.
keep_and_poke() {
	apply_vg faults "$1" 1 1 vm-operator-template 1
	apply_vg faults "$2" 1 1 vm-operator-template 0
	wait_running faults "$1" 1
	wait_running faults "$2" 0
	sleep 2
}

@test "faults: vCenter sessions terminated mid-run: the operator logs in again and goes on" {
	local outages logins logmark log="$ENV_DIR/logs/faults-manager.log"
	apply_vg faults sess 1 1 vm-operator-template 1
	wait_running faults sess 1
	logmark=$(wc -l <"$log")
	outages=$(metric vmgroup_vcenter_outages_total)
	logins=$(metric vmgroup_vcenter_logins_total)
	keys=$(operator_sessions)
	[ -n "$keys" ]
	removed=0
	for k in $keys; do
		# Sessions of managers stopped earlier may be gone already.
		GOVC_PERSIST_SESSION=false govc session.rm "$k" && removed=$((removed + 1)) || true
	done
	[ "$removed" -ge 1 ]
	# A change the watch sees and the operator leaves alone: the long poll
	# answers, the next one is refused (NotAuthenticated), and sent again
	# after the login it names the ended session's collector.
	GOVC_PERSIST_SESSION=false govc object.destroy /DC0/vm/vm-operator/not-a-group 2>/dev/null || true
	GOVC_PERSIST_SESSION=false govc folder.create /DC0/vm/vm-operator/not-a-group >/dev/null
	retry 30 metric_above vmgroup_vcenter_logins_total "$logins"
	kubectl scale vg sess -n faults --replicas=3
	wait_running faults sess 3 60
	[ "$(metric vmgroup_vcenter_logins_total)" -ge 2 ]
	# One outage: the login. The watch is rebuilt on the new session with
	# its cache served, not lost a second time once logged in.
	retry 10 vcenter_ready_is 1
	[ "$(metric vmgroup_vcenter_outages_total)" -eq $((outages + 1)) ]
	# The log says why the watch was rebuilt, and that it was.
	tail -n +$((logmark + 1)) "$log" | grep -q 'inventory: the vCenter session was renewed; rebuilding the watch'
	tail -n +$((logmark + 1)) "$log" | grep -q 'inventory: watch rebuilt ([0-9]* objects)'
	GOVC_PERSIST_SESSION=false govc object.destroy /DC0/vm/vm-operator/not-a-group
}

@test "faults: a lost session and a restart of the manager leave an up-to-date group's status alone" {
	local rv logins vcsim
	keep_and_poke keep poke
	rv=$(vg_field faults keep '{.metadata.resourceVersion}')
	logins=$(metric vmgroup_vcenter_logins_total)
	# The sessions end; a clone for the other group finds out, the manager
	# logs in again and rebuilds its watch.
	for k in $(operator_sessions); do
		GOVC_PERSIST_SESSION=false govc session.rm "$k" || true
	done
	kubectl scale vg poke -n faults --replicas=1
	wait_running faults poke 1 60
	[ "$(metric vmgroup_vcenter_logins_total)" -gt "$logins" ]
	[ "$(vg_field faults keep '{.metadata.resourceVersion}')" = "$rv" ]
	# A manager restarted while vCenter does not answer for 4 s (a grace
	# of 5 minutes, however slow the machine).
	vcsim=$(cat "$ENV_DIR/run/vcsim.pid")
	kill -STOP "$vcsim"
	restart_manager --vc-grace-period=5m
	sleep 4
	kill -CONT "$vcsim"
	retry 60 curl -sf "$PROBE_URL/readyz"
	sleep 2
	# Not one write: no PENDING with no VMs and RUNNING again.
	[ "$(vg_field faults keep '{.metadata.resourceVersion}')" = "$rv" ]
	running_now faults keep 1
	kubectl delete vg keep poke -n faults --timeout=90s
}

@test "faults: an outage longer than --vc-grace-period is said in status, which keeps the VMs it named" {
	local vcsim
	apply_vg faults long 1 1 vm-operator-template 1
	wait_running faults long 1
	vcsim=$(cat "$ENV_DIR/run/vcsim.pid")
	kill -STOP "$vcsim"
	restart_manager --vc-grace-period=2s
	retry 30 bash -c "[[ \"\$(kubectl get vg long -n faults -o jsonpath='{.status.phase} {.status.lastMessage}')\" == 'PENDING logging in to vCenter' ]]"
	# The VM is the last known: not gone from the status.
	[ "$(vg_field faults long '{.status.currentReplicas}')" = 1 ]
	[ "$(vg_field faults long '{.status.vms[*].name}')" = long-0 ]
	kill -CONT "$vcsim"
	wait_running faults long 1 60
	kubectl delete vg long -n faults --timeout=90s
}

@test "faults: a login answered with a SystemError (a vCenter starting) is retried and held by the grace, not taken for a refused password" {
	local rv pid lines outages log="$ENV_DIR/logs/faults-manager.log"
	restart_manager --vc-grace-period=5m
	keep_and_poke sysk sysp
	outages=$(metric vmgroup_vcenter_outages_total)
	rv=$(vg_field faults sysk '{.metadata.resourceVersion}')
	pid=$(cat "$ENV_DIR/run/faults-manager.pid")
	lines=$(wc -l <"$log")
	# vcsim answers the operator's logins with a SystemError from now on;
	# its sessions end, and a clone for the other group finds out: the
	# calls that waited for the login fail, the manager retries.
	echo SystemError >"$ENV_DIR/vcsim/login-fault"
	for k in $(operator_sessions); do
		GOVC_PERSIST_SESSION=false govc session.rm "$k" || true
	done
	kubectl scale vg sysp -n faults --replicas=1
	retry 30 bash -c "tail -n +$((lines + 1)) '$log' | grep -q 'vCenter Login failed: SystemError'"
	retry 10 bash -c "! curl -sf '$PROBE_URL/readyz' >/dev/null"
	# The clone that waited for the login says, in the words a group's
	# status would show, that the login failed, not that a connection did.
	retry 30 bash -c "tail -n +$((lines + 1)) '$log' | grep -q \"creating VM sysp-0: vCenter login failed; see the operator's log\""
	refute grep -q "creating VM sysp-0: connection failed" <(tail -n +$((lines + 1)) "$log")
	# The grace hides the outage from the groups; the metrics show it.
	vcenter_ready_is 0
	[ "$(metric vmgroup_vcenter_outages_total)" -gt "$outages" ]
	# Neither group says the login was refused (a wrong password is said
	# at once, grace or not).
	sleep 2
	refute grep -q refused <<<"$(vg_field faults sysp '{.status.lastMessage}')"
	refute grep -q refused <<<"$(vg_field faults sysk '{.status.lastMessage}')"
	kill -0 "$pid"
	[ "$(vg_field faults sysk '{.metadata.resourceVersion}')" = "$rv" ]
	rm -f "$ENV_DIR/vcsim/login-fault"
	wait_running faults sysp 1 120
	kill -0 "$pid"
	retry 10 vcenter_ready_is 1
	# The up-to-date group was left alone all along.
	[ "$(vg_field faults sysk '{.metadata.resourceVersion}')" = "$rv" ]
	refute grep -q "refused the login" <(tail -n +$((lines + 1)) "$log")
	kubectl delete vg sysk sysp -n faults --timeout=90s
}

@test "faults: kube-apiserver restarted mid-run: scaling completes" {
	kubectl scale vg sess -n faults --replicas=5
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver
	wait_running faults sess 5 90
}

@test "faults: vcsim restarted mid-run: the watch recovers and scaling completes" {
	kubectl scale vg sess -n faults --replicas=2
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim
	wait_running faults sess 2 120
	# The watch is live again: an out-of-band power-off is repaired.
	GOVC_PERSIST_SESSION=false govc vm.power -off "$(folder_of faults sess)/sess-0" >/dev/null
	retry 30 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $(folder_of faults sess)/sess-0 runtime.powerState)\" = poweredOn ]"
}

@test "faults: /readyz and vmgroup_vcenter_ready turn unready while vCenter is down, and ready again; the outage is counted" {
	local outages
	retry 10 curl -sf "$PROBE_URL/readyz"
	vcenter_ready_is 1
	outages=$(metric vmgroup_vcenter_outages_total)
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim stop
	retry 30 bash -c "! curl -sf '$PROBE_URL/readyz' >/dev/null"
	run curl -s "$PROBE_URL/readyz"
	[[ "$output" == *"not ready"* ]]
	vcenter_ready_is 0
	[ "$(metric vmgroup_vcenter_outages_total)" -eq $((outages + 1)) ]
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
	retry 60 curl -sf "$PROBE_URL/readyz"
	vcenter_ready_is 1
	# One outage, however many logins it took to end it.
	[ "$(metric vmgroup_vcenter_outages_total)" -eq $((outages + 1)) ]
	wait_running faults sess 2 60
	kubectl delete vg sess -n faults --timeout=90s
}

# vcenter_ready_is V: vmgroup_vcenter_ready is served, and is V.
vcenter_ready_is() {
	run curl -sf "$METRICS_URL"
	[ "$status" -eq 0 ]
	grep -qx "vmgroup_vcenter_ready $1" <<<"$output"
}

# watch_max NS NAME FILE: samples the group's VM count every 0.2 s into FILE.
watch_max() {
	(
		while :; do
			vm_count "$1" "$2" >>"$3"
			sleep 0.2
		done
	) 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/faults-watch.pid"
}

@test "faults: SIGKILL of the manager while scaling, again and again: never more VMs than asked, and exactly that many at the end" {
	apply_vg faults kill 1 1 vm-operator-template 2
	wait_running faults kill 2
	prev=2
	for target in 6 3 8 4; do
		samples=$BATS_TEST_TMPDIR/counts-$target
		: >"$samples"
		watch_max faults kill "$samples"
		kubectl scale vg kill -n faults --replicas=$target
		sleep "0.$((RANDOM % 9 + 1))"
		stop_manager faults-manager KILL
		start_manager faults-manager --watch-namespace faults
		sleep "0.$((RANDOM % 9 + 1))"
		stop_manager faults-manager KILL
		start_manager faults-manager --watch-namespace faults
		wait_running faults kill "$target" 90
		stop_manager faults-watch KILL
		# While going from prev to target, the group never held more VMs
		# than the larger of the two.
		bound=$((prev > target ? prev : target))
		max=$(sort -n "$samples" | tail -1)
		echo "scale $prev -> $target: at most $max VMs seen (bound $bound)"
		[ -n "$max" ]
		[ "$max" -le "$bound" ]
		prev=$target
	done
	[ "$(vm_count faults kill)" = 4 ]
	run vms faults kill
	for vm in $output; do
		[[ "$vm" == kill-* ]]
	done
	kubectl delete vg kill -n faults --timeout=90s
	[ "$(GOVC_PERSIST_SESSION=false govc ls /DC0/vm/vm-operator | grep -c faults_kill || true)" = 0 ]
}

@test "faults: a group deleted while vCenter creates its folder keeps its finalizer until the folder is gone" {
	local vcsim
	vcsim=$(cat "$ENV_DIR/run/vcsim.pid")
	retry 30 curl -sf "$PROBE_URL/readyz"
	# vcsim stopped: the folder's creation is asked for and not answered.
	kill -STOP "$vcsim"
	apply_vg faults early 1 1 vm-operator-template 1
	retry 30 bash -c '[[ "$(kubectl get vg early -n faults -o jsonpath={.status.lastMessage})" == *"creating folder"* ]]'
	kubectl delete vg early -n faults --wait=false
	sleep 3
	run kubectl get vg early -n faults -o 'jsonpath={.metadata.finalizers}'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *vm.codeconnect.vmworld.com/finalizer* ]]
	kill -CONT "$vcsim"
	# The folder the task made goes, then the object.
	kubectl wait --for=delete vg/early -n faults --timeout=90s
	refute bash -c "GOVC_PERSIST_SESSION=false govc ls /DC0/vm/vm-operator | grep -q faults_early"
	grep -q '"Deleted folder faults_early"' "$ENV_DIR/logs/faults-manager.log"
}

@test "faults: a placement that names nothing gives ERROR naming it, and nothing is done in vCenter" {
	stop_manager faults-manager
	start_manager faults-badpool --watch-namespace faults --resource-pool=no-such-pool
	apply_vg faults badpool 1 1 vm-operator-template 1
	retry 30 bash -c '[ "$(kubectl get vg badpool -n faults -o jsonpath={.status.phase})" = ERROR ]'
	run vg_field faults badpool '{.status.lastMessage}'
	echo "$output"
	[[ "$output" == *no-such-pool* ]]
	[ "$(vm_count faults badpool)" = 0 ]
	# /readyz (anyone may read it) names the failing check; the reason is
	# in the status above and in the log.
	run curl -s "$PROBE_URL/readyz"
	[[ "$output" == *vcenter* ]]
	[[ "$output" != *no-such-pool* ]]
	stop_manager faults-badpool
	start_manager faults-manager --watch-namespace faults
	wait_running faults badpool 1
	kubectl delete vg badpool -n faults --timeout=90s
}

# on_with_cpu NS NAME CPUS VM...: each VM powered on with CPUS CPUs.
on_with_cpu() {
	local ns=$1 name=$2 cpus=$3 vm
	shift 3
	for vm in "$@"; do
		[ "$(vm_prop "$ns" "$name" "$vm" runtime.powerState)" = poweredOn ] || return 1
		[ "$(vm_prop "$ns" "$name" "$vm" config.hardware.numCPU)" = "$cpus" ] || return 1
	done
}

@test "faults: a size vCenter refuses leaves the VMs on with their size and says so; a new spec tries again" {
	apply_vg faults resize 1 1 vm-operator-template 2
	wait_running faults resize 2
	echo ReconfigVM_Task=InvalidArgument >"$ENV_DIR/vcsim/method-faults"
	kubectl patch vg resize -n faults --type=merge -p '{"spec":{"cpu":2}}'
	retry 60 bash -c '[ "$(kubectl get vg resize -n faults -o jsonpath={.status.phase})" = ERROR ]'
	run vg_field faults resize '{.status.lastMessage}'
	echo "$output"
	[[ "$output" == *"vCenter refused to reconfigure VM resize-"*InvalidArgument* ]]
	# The VM powered off for its resize is on again, and stays so with
	# the other: no VM is powered off again for the refused size.
	retry 60 on_with_cpu faults resize 1 resize-0 resize-1
	sleep 5
	on_with_cpu faults resize 1 resize-0 resize-1
	run kubectl describe vg resize -n faults
	[[ "$output" == *ResizeRefused* ]]
	# A size vCenter takes: a new spec, tried again, applied.
	rm -f "$ENV_DIR/vcsim/method-faults"
	kubectl patch vg resize -n faults --type=merge -p '{"spec":{"cpu":3}}'
	wait_running faults resize 2
	on_with_cpu faults resize 3 resize-0 resize-1
	kubectl delete vg resize -n faults --timeout=90s
}

@test "faults: a password rotated in VC_PASS_FILE is logged in with, without a restart" {
	local f="$BATS_TEST_TMPDIR/vc-pass"
	stop_manager faults-manager
	printf 'not-the-password\n' >"$f"
	VC_PASS='' VC_PASS_FILE="$f" start_manager faults-rotate --watch-namespace faults
	apply_vg faults rotate 1 1 vm-operator-template 1
	retry 60 bash -c '[[ "$(kubectl get vg rotate -n faults -o jsonpath={.status.lastMessage})" == *"incorrect user name or password"* ]]'
	[ "$(vm_count faults rotate)" = 0 ]
	# As the kubelet updates a mounted Secret: a new file swapped in.
	printf '%s\n' "$VC_PASS" >"$f.new"
	mv "$f.new" "$f"
	wait_running faults rotate 1
	grep -q 'the vCenter password in .* changed' "$ENV_DIR/logs/faults-rotate.log"
	refute grep -qF not-the-password "$ENV_DIR/logs/faults-rotate.log"
	kubectl delete vg rotate -n faults --timeout=90s
	stop_manager faults-rotate
	start_manager faults-manager --watch-namespace faults
}

@test "faults: after logins, re-logins and errors, the vCenter password is in no manager log, Event or status" {
	local f n=0
	for f in "$ENV_DIR"/logs/ctl-manager.log "$ENV_DIR"/logs/faults-*.log; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		grep -q '"logger":"vcenter"' "$f" # the log did see vCenter
		refute grep -qF "$VC_PASS" "$f"
	done
	[ "$n" -ge 2 ]
	kubectl get events,vg -A -o yaml >"$BATS_TEST_TMPDIR/objects.yaml"
	grep -q 'kind: Event' "$BATS_TEST_TMPDIR/objects.yaml"
	refute grep -qF "$VC_PASS" "$BATS_TEST_TMPDIR/objects.yaml"
}
