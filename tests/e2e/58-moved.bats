#!/usr/bin/env bats
# A group's VMs are those marked with its UID, wherever they are under the
# root folder: one moved out of the group's folder by hand is not cloned
# again, is repaired where it is, goes by the usual order on scale-down and
# is destroyed with the group; a copy of one, made by hand, is left alone
# (vSphere copies its marks, not its instanceUuid),
# and so is one whose mark someone changed.
# The manager runs with the default --sync-period (10 minutes), so that
# what it does here comes from the inventory watch: a change of a VM
# outside any group's folder reaches its group by the VM's mark.

load helpers
load manager

ROOT=/DC0/vm/vm-operator

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace moved --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	start_manager moved-manager --watch-namespace moved
}

teardown_file() {
	kubectl delete vg --all -n moved --timeout=90s >/dev/null 2>&1 || true
	local vm
	for vm in $(GOVC_PERSIST_SESSION=false govc find "$ROOT" -type m -name 'mv-*' 2>/dev/null); do
		GOVC_PERSIST_SESSION=false govc vm.destroy "$vm" >/dev/null 2>&1 || true
	done
	stop_manager moved-manager
	kubectl delete namespace moved --wait=false >/dev/null 2>&1 || true
}

setup() {
	manager_urls moved-manager
}

# anywhere: the VMs of group mv anywhere under the root folder, by path.
anywhere() {
	GOVC_PERSIST_SESSION=false govc find "$ROOT" -type m -name 'mv-*' | LC_ALL=C sort
}

@test "moved: a VM moved out of its group's folder is not cloned again" {
	apply_vg moved mv 1 1 vm-operator-template 2
	wait_running moved mv 2
	GOVC_PERSIST_SESSION=false govc object.mv "$(folder_of moved mv)/mv-1" "$ROOT"
	# The move changes the group's folder, which enqueues the group: for
	# 8 s, no VM is cloned in place of the one moved out.
	for _ in $(seq 8); do
		sleep 1
		run anywhere
		[ "$output" = "$(printf '%s\n%s' "$(folder_of moved mv)/mv-0" "$ROOT/mv-1")" ]
	done
	[ "$(phase moved mv)" = RUNNING ]
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 2 ]
	[ "$(vg_field moved mv '{.status.vms[*].name}')" = "mv-0 mv-1" ]
}

@test "moved: renamed where it is now, it still counts (its instanceUuid is its mark's)" {
	GOVC_PERSIST_SESSION=false govc object.rename "$ROOT/mv-1" mv-kept
	for _ in $(seq 6); do
		sleep 1
		[ "$(vms moved mv)" = mv-0 ]
	done
	retry 20 bash -c "[ \"\$(kubectl get vg mv -n moved -o jsonpath='{.status.vms[*].name}')\" = 'mv-0 mv-kept' ]"
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 2 ]
	GOVC_PERSIST_SESSION=false govc object.rename "$ROOT/mv-kept" mv-1
	retry 20 bash -c "[ \"\$(kubectl get vg mv -n moved -o jsonpath='{.status.vms[*].name}')\" = 'mv-0 mv-1' ]"
}

@test "moved: powered off by hand where it is now, it is powered on again" {
	GOVC_PERSIST_SESSION=false govc vm.power -off "$ROOT/mv-1" >/dev/null
	retry 30 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $ROOT/mv-1 runtime.powerState)\" = poweredOn ]"
}

@test "moved: destroyed by hand where it is now, the group clones it again in its folder" {
	# The operator may power it on again between the two steps: retry.
	retry 20 bash -c "GOVC_PERSIST_SESSION=false govc vm.power -off $ROOT/mv-1 >/dev/null 2>&1; GOVC_PERSIST_SESSION=false govc vm.destroy $ROOT/mv-1"
	wait_running moved mv 2 60
	run anywhere
	[ "$output" = "$(printf '%s\n%s' "$(folder_of moved mv)/mv-0" "$(folder_of moved mv)/mv-1")" ]
}

@test "moved: scaled down, the VM moved out goes by the usual order (the highest slot)" {
	GOVC_PERSIST_SESSION=false govc object.mv "$(folder_of moved mv)/mv-1" "$ROOT"
	kubectl scale vg mv -n moved --replicas=1
	retry 60 bash -c "[ -z \"\$(GOVC_PERSIST_SESSION=false govc find $ROOT -type m -name mv-1)\" ]"
	wait_running moved mv 1
	run anywhere
	[ "$output" = "$(folder_of moved mv)/mv-0" ]
}

@test "moved: a VM the group clones has the instanceUuid its mark says" {
	local vm
	vm="$(folder_of moved mv)/mv-0"
	[ -n "$(vm_extra_at "$vm" vmgroup.codeconnect.vmworld.com.instance-uuid)" ]
	[ "$(vm_extra_at "$vm" vmgroup.codeconnect.vmworld.com.instance-uuid)" = \
		"$(GOVC_PERSIST_SESSION=false govc object.collect -s "$vm" config.instanceUuid)" ]
}

# instance_mark PATH: the instance mark of the VM at PATH ("" for none).
instance_mark() { vm_extra_at "$1" vmgroup.codeconnect.vmworld.com.instance-uuid; }

@test "moved: a VM cloned before the instance mark gets it from the manager, quietly, and a copy of it is then foreign" {
	local f uuid i
	f=$(folder_of moved mv)
	uuid=$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-0" config.instanceUuid)
	# As an operator without the instance mark left it: the manager
	# stopped, the VM without the mark.
	stop_manager moved-manager
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$f/mv-0" -e "vmgroup.codeconnect.vmworld.com.instance-uuid="
	[ -z "$(instance_mark "$f/mv-0")" ]
	start_manager moved-manager --watch-namespace moved
	for i in $(seq 30); do
		[ "$(instance_mark "$f/mv-0")" != "$uuid" ] || break
		[ "$(phase moved mv)" = RUNNING ]
		sleep 1
	done
	[ "$(instance_mark "$f/mv-0")" = "$uuid" ]
	grep -q 'Wrote the instance mark of VM mv-0' "$ENV_DIR/logs/moved-manager.log"
	[ "$(phase moved mv)" = RUNNING ]
	# Neither powered off nor said in an event.
	[ "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-0" runtime.powerState)" = poweredOn ]
	run kubectl get events -n moved --field-selector involvedObject.name=mv -o 'jsonpath={.items[*].reason}'
	[[ " $output " != *" Marked "* && " $output " != *" MarkFailed "* ]]
	# A copy made now in the folder, the marks with it, is foreign: under
	# the old rule it would have been a member.
	GOVC_PERSIST_SESSION=false govc vm.clone -vm "$f/mv-0" -folder "$f" -on=false mv-0-copy >/dev/null
	copy_marks "$f/mv-0" "$f/mv-0-copy"
	[ "$(instance_mark "$f/mv-0-copy")" = "$uuid" ]
	retry 30 bash -c "kubectl get vg mv -n moved -o jsonpath='{.status.conditions[?(@.type==\"Degraded\")].reason}' | grep -qx ForeignVMs"
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 1 ]
	[ "$(vg_field moved mv '{.status.vms[*].name}')" = mv-0 ]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$f/mv-0-copy"
	retry 30 bash -c "[ \"\$(kubectl get vg mv -n moved -o jsonpath='{.status.conditions[?(@.type==\"Degraded\")].reason}')\" = AsExpected ]"
}

@test "moved: the instance mark removed by hand while the manager runs is written again" {
	local f uuid i
	f=$(folder_of moved mv)
	uuid=$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-0" config.instanceUuid)
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$f/mv-0" -e "vmgroup.codeconnect.vmworld.com.instance-uuid="
	for i in $(seq 30); do
		[ "$(instance_mark "$f/mv-0")" != "$uuid" ] || break
		sleep 1
	done
	[ "$(instance_mark "$f/mv-0")" = "$uuid" ]
	[ "$(phase moved mv)" = RUNNING ]
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 1 ]
}

@test "moved: with --max-instance-marks=0 the manager writes no instance mark, and the VM cloned before it still counts" {
	local f uuid log n
	f=$(folder_of moved mv)
	log="$ENV_DIR/logs/moved-manager.log"
	uuid=$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-0" config.instanceUuid)
	stop_manager moved-manager
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$f/mv-0" -e "vmgroup.codeconnect.vmworld.com.instance-uuid="
	n=$(wc -l <"$log")
	start_manager moved-manager --watch-namespace moved --max-instance-marks=0
	retry 20 bash -c "tail -n +$((n + 1)) '$log' | grep -q 'writing no instance marks (--max-instance-marks=0)'"
	# A scale-up: the pass that clones mv-1 would have marked mv-0 too.
	kubectl scale vg mv -n moved --replicas=2
	wait_running moved mv 2
	[ -z "$(instance_mark "$f/mv-0")" ]
	[ "$(instance_mark "$f/mv-1")" = "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-1" config.instanceUuid)" ]
	refute grep -q 'instance mark of VM mv-0' <(tail -n +$((n + 1)) "$log")
	[ "$(vg_field moved mv '{.status.vms[*].name}')" = "mv-0 mv-1" ]
	# Back to one VM, and to the defaults: the mark is written then.
	kubectl scale vg mv -n moved --replicas=1
	wait_running moved mv 1
	stop_manager moved-manager
	start_manager moved-manager --watch-namespace moved
	for n in $(seq 30); do
		[ "$(instance_mark "$f/mv-0")" != "$uuid" ] || break
		sleep 1
	done
	[ "$(instance_mark "$f/mv-0")" = "$uuid" ]
}

@test "moved: a clone of its VM made by hand outside its folder (the mark copied) is left alone" {
	GOVC_PERSIST_SESSION=false govc vm.clone -vm "$(folder_of moved mv)/mv-0" -folder "$ROOT" -on=false mv-0-debug >/dev/null
	# vSphere copies extraConfig with a clone, vcsim does not: the marks
	# are set as the clone would carry them.
	copy_marks "$(folder_of moved mv)/mv-0" "$ROOT/mv-0-debug"
	[ "$(vm_mark_at "$ROOT/mv-0-debug")" = "$(vg_field moved mv '{.metadata.uid}')" ]
	for _ in $(seq 6); do
		sleep 1
		[ "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$ROOT/mv-0-debug" runtime.powerState)" = poweredOff ]
	done
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 1 ]
	[ "$(phase moved mv)" = RUNNING ]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$ROOT/mv-0-debug"
}

@test "moved: a clone of its VM made by hand in its folder (the marks copied) is reported, neither counted nor destroyed" {
	local f
	f=$(folder_of moved mv)
	GOVC_PERSIST_SESSION=false govc vm.clone -vm "$f/mv-0" -folder "$f" -on=false mv-0-copy >/dev/null
	copy_marks "$f/mv-0" "$f/mv-0-copy"
	[ "$(vm_mark_at "$f/mv-0-copy")" = "$(vg_field moved mv '{.metadata.uid}')" ]
	# Taken for a member, it would make 2 of 1 and go first (no slot).
	retry 30 bash -c "kubectl get vg mv -n moved -o jsonpath='{.status.conditions[?(@.type==\"Degraded\")].reason}' | grep -qx ForeignVMs"
	for _ in $(seq 6); do
		sleep 1
		[ "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$f/mv-0-copy" runtime.powerState)" = poweredOff ]
	done
	[ "$(vg_field moved mv '{.status.currentReplicas}')" = 1 ]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$f/mv-0-copy"
}

@test "moved: a clone of its VM made by hand outside its folder under the same name is not taken for it once the VM goes" {
	local f
	f=$(folder_of moved mv)
	# Cloned under another name, then renamed: vcsim's files are named
	# after the VM, and mv-0's are taken.
	GOVC_PERSIST_SESSION=false govc vm.clone -vm "$f/mv-0" -folder "$ROOT" -on=false mv-0-copy >/dev/null
	GOVC_PERSIST_SESSION=false govc object.rename "$ROOT/mv-0-copy" mv-0
	copy_marks "$f/mv-0" "$ROOT/mv-0"
	# The VM destroyed by hand (the operator may power it on again
	# between the two steps: retry): the group clones it again in its
	# folder, and does not adopt the copy as the VM moved out.
	retry 20 bash -c "GOVC_PERSIST_SESSION=false govc vm.power -off $f/mv-0 >/dev/null 2>&1; GOVC_PERSIST_SESSION=false govc vm.destroy $f/mv-0"
	wait_running moved mv 1 60
	[ "$(vms moved mv)" = mv-0 ]
	[ "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$ROOT/mv-0" runtime.powerState)" = poweredOff ]
	[ "$(vm_mark_at "$ROOT/mv-0")" = "$(vg_field moved mv '{.metadata.uid}')" ]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$ROOT/mv-0"
}

@test "moved: its mark changed by hand outside its folder, the VM is no longer the group's, which clones another at once" {
	kubectl scale vg mv -n moved --replicas=2
	wait_running moved mv 2
	GOVC_PERSIST_SESSION=false govc object.mv "$(folder_of moved mv)/mv-1" "$ROOT"
	sleep 2
	[ "$(vms moved mv)" = mv-0 ]
	# Marked for another owner: only that change of the mark can tell the
	# group (the default --sync-period is 10 minutes).
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$ROOT/mv-1" -e "vmgroup.codeconnect.vmworld.com.uid=someone-else"
	wait_running moved mv 2 60
	[ "$(vm_mark_at "$ROOT/mv-1")" = someone-else ]
	[ "$(GOVC_PERSIST_SESSION=false govc object.collect -s "$ROOT/mv-1" runtime.powerState)" = poweredOn ]
	GOVC_PERSIST_SESSION=false govc vm.power -off "$ROOT/mv-1" >/dev/null
	GOVC_PERSIST_SESSION=false govc vm.destroy "$ROOT/mv-1"
	kubectl scale vg mv -n moved --replicas=1
	wait_running moved mv 1
}

@test "moved: deleted while its VM is out of its folder, the group destroys that VM too" {
	GOVC_PERSIST_SESSION=false govc object.mv "$(folder_of moved mv)/mv-0" "$ROOT"
	kubectl delete vg mv -n moved --timeout=90s
	run anywhere
	[ -z "$output" ]
	run env GOVC_PERSIST_SESSION=false govc ls "$(folder_of moved mv)"
	[ -z "$output" ]
}
