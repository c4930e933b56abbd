#!/usr/bin/env bats
# The operator end to end, driven as a user drives it: kubectl for VmGroups,
# govc to look at (and tamper with) vCenter.

load helpers
load manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace ctl --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	# Its own namespace only: groups that other suites leave behind do not
	# disturb the counts of requests below.
	start_manager ctl-manager --sync-period=3s --watch-namespace ctl
}

teardown_file() {
	stop_manager ctl-manager
}

setup() {
	manager_urls ctl-manager
}

teardown() {
	# A test that failed midway leaves no object held by another writer's
	# finalizer to disturb the counts of the tests after it.
	case $BATS_TEST_DESCRIPTION in
	*"another writer's finalizer"*)
		kubectl patch vg shared -n ctl --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
		;;
	esac
}

@test "controller: a new VmGroup gets its finalizer, folder and VMs, sized, on and marked" {
	apply_vg ctl web 2 2 vm-operator-template 3
	wait_running ctl web 3
	run vg_field ctl web '{.metadata.finalizers[*]}'
	[[ "$output" == *vm.codeconnect.vmworld.com/finalizer* ]]
	run vms ctl web
	[ "$output" = "$(printf 'web-0\nweb-1\nweb-2')" ]
	uid=$(vg_field ctl web '{.metadata.uid}')
	for vm in web-0 web-1 web-2; do
		[ "$(vm_prop ctl web $vm config.hardware.numCPU)" = 2 ]
		[ "$(vm_prop ctl web $vm config.hardware.memoryMB)" = 2048 ]
		[ "$(vm_prop ctl web $vm runtime.powerState)" = poweredOn ]
		[ "$(vm_mark ctl web $vm)" = "$uid" ]
	done
	[ "$(vg_field ctl web '{.status.desiredReplicas}')" = 3 ]
	[ "$(vg_field ctl web '{.status.conditions[?(@.type=="Ready")].status}')" = True ]
	[ "$(vg_field ctl web '{.status.conditions[?(@.type=="Degraded")].status}')" = False ]
}

@test "controller: kubectl describe shows the events of what was done" {
	run kubectl describe vg web -n ctl
	[[ "$output" == *Created* ]]
	[[ "$output" == *web-0* ]]
}

@test "controller: kubectl scale up, down (highest slots first) and to zero" {
	kubectl scale vg web -n ctl --replicas=5
	wait_running ctl web 5
	run vms ctl web
	[ "$output" = "$(printf 'web-0\nweb-1\nweb-2\nweb-3\nweb-4')" ]
	# The two VMs the scale-up made hold the highest slots: they go first.
	kubectl scale vg web -n ctl --replicas=3
	wait_running ctl web 3
	run vms ctl web
	[ "$output" = "$(printf 'web-0\nweb-1\nweb-2')" ]
	kubectl scale vg web -n ctl --replicas=0
	wait_running ctl web 0
	# Scaling up again fills the lowest slots.
	kubectl scale vg web -n ctl --replicas=2
	wait_running ctl web 2
	run vms ctl web
	[ "$output" = "$(printf 'web-0\nweb-1')" ]
}

@test "controller: cpu and memory changes reconfigure the VMs in place" {
	kubectl patch vg web -n ctl --type=merge -p '{"spec":{"cpu":3,"memory":4}}'
	retry 90 bash -c '[ "$(kubectl get vg web -n ctl -o jsonpath={.status.observedGeneration})" = "$(kubectl get vg web -n ctl -o jsonpath={.metadata.generation})" ]'
	wait_running ctl web 2
	for vm in web-0 web-1; do
		[ "$(vm_prop ctl web $vm config.hardware.numCPU)" = 3 ]
		[ "$(vm_prop ctl web $vm config.hardware.memoryMB)" = 4096 ]
		[ "$(vm_prop ctl web $vm runtime.powerState)" = poweredOn ]
	done
	run kubectl describe vg web -n ctl
	[[ "$output" == *Reconfigured* ]]
}

@test "controller: out-of-band destroy, power-off and resize are repaired" {
	GOVC_PERSIST_SESSION=false govc vm.power -off "$(folder_of ctl web)/web-0" >/dev/null
	retry 20 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $(folder_of ctl web)/web-0 runtime.powerState)\" = poweredOn ]"
	# The operator may power it on again between the two steps: retry.
	retry 20 bash -c "GOVC_PERSIST_SESSION=false govc vm.power -off $(folder_of ctl web)/web-1 >/dev/null 2>&1; GOVC_PERSIST_SESSION=false govc vm.destroy $(folder_of ctl web)/web-1"
	wait_running ctl web 2 30
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$(folder_of ctl web)/web-0" -c 1 -m 1024
	retry 30 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $(folder_of ctl web)/web-0 config.hardware.numCPU)\" = 3 ]"
	wait_running ctl web 2 30
}

@test "controller: a foreign VM in the group's folder is left alone and reported" {
	GOVC_PERSIST_SESSION=false govc vm.create -on=false -c 1 -m 512 -g otherGuest -net "VM Network" \
		-folder "$(folder_of ctl web)" -pool /DC0/host/DC0_C0/Resources -ds LocalDS_0 intruder >/dev/null
	retry 30 bash -c '[ "$(kubectl get vg web -n ctl -o jsonpath="{.status.conditions[?(@.type==\"Degraded\")].reason}")" = ForeignVMs ]'
	kubectl scale vg web -n ctl --replicas=1
	wait_running ctl web 1 || [ "$(vm_count ctl web)" = 2 ]
	retry 60 bash -c "GOVC_PERSIST_SESSION=false govc find $(folder_of ctl web) -type m | grep -c . | grep -qx 2"
	run vms ctl web
	[ "$output" = "$(printf 'intruder\nweb-0')" ]
	retry 30 bash -c '[ "$(kubectl get vg web -n ctl -o jsonpath={.status.currentReplicas})" = 1 ]'
}

@test "controller: a VM's name taken in the group's folder by a folder is skipped, as a foreign VM's is" {
	GOVC_PERSIST_SESSION=false govc folder.create "$(folder_of ctl web)/web-1" >/dev/null
	kubectl scale vg web -n ctl --replicas=2
	retry 60 bash -c '[ "$(kubectl get vg web -n ctl -o jsonpath="{.status.phase} {.status.currentReplicas} {.status.vms[*].name}")" = "RUNNING 2 web-0 web-2" ]'
	run vms ctl web
	[ "$output" = "$(printf 'intruder\nweb-0\nweb-2')" ]
	kubectl scale vg web -n ctl --replicas=1
	retry 60 bash -c '[ "$(kubectl get vg web -n ctl -o jsonpath="{.status.phase} {.status.currentReplicas} {.status.vms[*].name}")" = "RUNNING 1 web-0" ]'
	run vms ctl web
	[ "$output" = "$(printf 'intruder\nweb-0')" ]
}

@test "controller: deleting a group whose folder holds a foreign VM keeps the folder and says so" {
	kubectl delete vg web -n ctl --timeout=90s
	run vms ctl web
	[ "$output" = intruder ]
	run kubectl get events -n ctl --field-selector involvedObject.name=web -o jsonpath='{range .items[*]}{.type} {.reason}{"\n"}{end}'
	[[ "$output" == *"Warning FolderKept"* ]]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$(folder_of ctl web)/intruder"
	GOVC_PERSIST_SESSION=false govc object.destroy "$(folder_of ctl web)"
}

@test "controller: a missing template gives ERROR naming the template" {
	apply_vg ctl notmpl 1 1 no-such-template 1
	retry 30 bash -c '[ "$(kubectl get vg notmpl -n ctl -o jsonpath={.status.phase})" = ERROR ]'
	run vg_field ctl notmpl '{.status.lastMessage}'
	[[ "$output" == *no-such-template* ]]
	[ "$(vm_count ctl notmpl)" = 0 ]
	# Fixing the spec clears it.
	kubectl patch vg notmpl -n ctl --type=merge -p '{"spec":{"template":"vm-operator-template"}}'
	wait_running ctl notmpl 1
}

@test "controller: kubectl scale beyond 4096 replicas gives ERROR naming the limit and changes nothing" {
	apply_vg ctl big 1 1 vm-operator-template 1
	wait_running ctl big 1
	kubectl scale vg big -n ctl --replicas=5000
	retry 30 bash -c '[ "$(kubectl get vg big -n ctl -o jsonpath={.status.phase})" = ERROR ]'
	run vg_field ctl big '{.status.lastMessage}'
	[[ "$output" == *"spec.replicas 5000 is above 4096"* ]]
	[ "$(vm_count ctl big)" = 1 ]
	kubectl scale vg big -n ctl --replicas=1
	wait_running ctl big 1
	kubectl delete vg big -n ctl --timeout=90s
}

@test "controller: a template change applies to new VMs and status counts the older ones" {
	GOVC_PERSIST_SESSION=false govc vm.clone -vm /DC0/vm/vm-operator-template -folder /DC0/vm -on=false \
		-pool /DC0/host/DC0_C0/Resources vm-operator-template-2 >/dev/null
	GOVC_PERSIST_SESSION=false govc vm.markastemplate /DC0/vm/vm-operator-template-2
	kubectl patch vg notmpl -n ctl --type=merge -p '{"spec":{"template":"vm-operator-template-2","replicas":2}}'
	wait_running ctl notmpl 2
	run vg_field ctl notmpl '{.status.lastMessage}'
	[[ "$output" == *"1 "*older* || "$output" == *"1 "*template* ]]
	run bash -c "GOVC_PERSIST_SESSION=false govc vm.info -e $(folder_of ctl notmpl)/notmpl-1 | grep vmgroup.codeconnect.vmworld.com.template"
	[[ "$output" == *vm-operator-template-2* ]]
}

@test "controller: deleting a group removes its VMs and folder, then the object" {
	kubectl delete vg notmpl -n ctl --timeout=90s
	run kubectl get vg notmpl -n ctl
	[ "$status" -ne 0 ]
	run env GOVC_PERSIST_SESSION=false govc ls "$(folder_of ctl notmpl)"
	[ -z "$output" ]
	run bash -c "GOVC_PERSIST_SESSION=false govc ls /DC0/vm/vm-operator | grep ctl_notmpl"
	[ -z "$output" ]
}

@test "controller: another writer's finalizer is kept when ours is added and removed" {
	kubectl apply -f - <<EOF
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: shared
  namespace: ctl
  finalizers: [example.com/keep]
spec:
  cpu: 1
  memory: 1
  template: vm-operator-template
  replicas: 1
EOF
	wait_running ctl shared 1
	[ "$(vg_field ctl shared '{.metadata.finalizers[*]}')" = "example.com/keep vm.codeconnect.vmworld.com/finalizer" ]
	kubectl delete vg shared -n ctl --wait=false
	# Ours goes once vCenter is clean; the other writer's stays, and so
	# does the object, until that writer lets it go.
	retry 60 bash -c "[ \"\$(kubectl get vg shared -n ctl -o 'jsonpath={.metadata.finalizers[*]}')\" = example.com/keep ]"
	[ "$(vm_count ctl shared)" = 0 ]
	kubectl patch vg shared -n ctl --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
	retry 30 refute kubectl get vg shared -n ctl
}

@test "controller: two groups never touch each other's VMs" {
	apply_vg ctl a 1 1 vm-operator-template 2
	apply_vg ctl a-b 1 1 vm-operator-template 1
	wait_running ctl a 2
	wait_running ctl a-b 1
	kubectl scale vg a -n ctl --replicas=0
	wait_running ctl a 0
	[ "$(vm_count ctl a-b)" = 1 ]
	kubectl delete vg a a-b -n ctl --timeout=90s
}

@test "controller: a group in sync causes no API write and no vCenter request on resync" {
	apply_vg ctl quiet 1 1 vm-operator-template 2
	wait_running ctl quiet 2
	sleep 2
	rv=$(vg_field ctl quiet '{.metadata.resourceVersion}')
	before=$(metric 'vmgroup_vcenter_requests_total{method="WaitForUpdatesEx",result="success"}')
	all_before=$(curl -sf "$METRICS_URL" | awk '/^vmgroup_vcenter_requests_total/ && $1 !~ /WaitForUpdatesEx/ { s += $2 } END { print s + 0 }')
	writes_before=$(curl -sf "$METRICS_URL" | awk '/^rest_client_requests_total/ && $1 ~ /method="(PATCH|PUT|POST)"/ { s += $2 } END { print s + 0 }')
	sleep 10 # several resync periods (3 s)
	[ "$(vg_field ctl quiet '{.metadata.resourceVersion}')" = "$rv" ]
	all_after=$(curl -sf "$METRICS_URL" | awk '/^vmgroup_vcenter_requests_total/ && $1 !~ /WaitForUpdatesEx/ { s += $2 } END { print s + 0 }')
	writes_after=$(curl -sf "$METRICS_URL" | awk '/^rest_client_requests_total/ && $1 ~ /method="(PATCH|PUT|POST)"/ { s += $2 } END { print s + 0 }')
	echo "vCenter requests other than WaitForUpdatesEx: $all_before -> $all_after; API writes: $writes_before -> $writes_after"
	[ "$all_after" = "$all_before" ]
	[ "$writes_after" = "$writes_before" ]
	[ "$(metric 'controller_runtime_reconcile_total{controller="vmgroup",result="success"}')" != 0 ]
	kubectl delete vg quiet -n ctl --timeout=90s
}
