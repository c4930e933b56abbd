#!/usr/bin/env bats
# status.vms (issue 16): every VM of a group, by name, as vCenter shows it
# (names, instance UUIDs, power states, the guest's addresses), at each step
# of a group's life; VMs of others in its folder stay out; the wide column
# shows the first VM's address; an in-sync group is not written.

load helpers
load manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace vms --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	start_manager vms-manager --sync-period=3s --watch-namespace vms
}

teardown_file() {
	GOVC_PERSIST_SESSION=false govc vm.destroy "$(folder_of vms web)/stray" >/dev/null 2>&1 || true
	GOVC_PERSIST_SESSION=false govc vm.destroy "$(folder_of vms web)/stray2" >/dev/null 2>&1 || true
	kubectl delete vg --all -n vms --timeout=90s >/dev/null 2>&1 || true
	stop_manager vms-manager
	kubectl delete namespace vms --wait=false >/dev/null 2>&1 || true
}

setup() {
	manager_urls vms-manager
}

# from_govc: "name instanceUuid powerState" of each VM the group marked,
# as govc reads them, sorted by name.
from_govc() {
	local vm
	for vm in $(vms vms web); do
		[ "$(vm_mark vms web "$vm")" = "$(vg_field vms web '{.metadata.uid}')" ] || continue
		echo "$vm $(vm_prop vms web "$vm" config.instanceUuid) $(vm_prop vms web "$vm" runtime.powerState)"
	done | LC_ALL=C sort
}

# from_status: the same of status.vms, in its order.
from_status() {
	vg_field vms web '{range .status.vms[*]}{.name} {.instanceUUID} {.powerState}{"\n"}{end}'
}

# states: the state of every entry, one line.
states() {
	vg_field vms web '{range .status.vms[*]}{.state} {end}'
}

# in_sync N: status.vms lists the N VMs govc shows, each Ready, sorted by
# name, with nothing omitted.
in_sync() {
	local want got
	want=$(from_govc)
	got=$(from_status)
	[ "$(grep -c . <<<"$want")" = "$1" ] || return 1
	[ "$got" = "$want" ] || return 1
	[ "$(states)" = "$(printf 'Ready %.0s' $(seq "$1"))" ] || return 1
	[ "$(vg_field vms web '{.status.vmsOmitted}')" = 0 ]
}

# ips VM: the guest addresses status.vms shows for VM, space-separated.
ips() {
	vg_field vms web "{.status.vms[?(@.name==\"$1\")].ipAddresses[*]}"
}

# set_ip VM ADDRESS: the guest of VM reports ADDRESS as its IP address
# (vcsim sets guest.ipAddress, and guest.net's first NIC, from an
# extraConfig key prefixed SET.).
set_ip() {
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$(folder_of vms web)/$1" -e "SET.guest.ipAddress=$2"
}

@test "vms: created, every VM listed as govc shows it, sorted, Ready" {
	apply_vg vms web 1 1 vm-operator-template 2
	wait_running vms web 2
	retry 30 in_sync 2
	run from_status
	[ "$(cut -d' ' -f1 <<<"$output" | tr '\n' ' ')" = "web-0 web-1 " ]
	# Each entry's size and template, from vCenter.
	[ "$(vg_field vms web '{.status.vms[0].cpu} {.status.vms[0].memoryMB} {.status.vms[0].template}')" = "1 1024 vm-operator-template" ]
	# No guest reported an address yet.
	[ -z "$(vg_field vms web '{.status.vms[*].ipAddresses}')" ]
}

@test "vms: scaled up, the new VM is listed" {
	kubectl scale vg web -n vms --replicas=3
	wait_running vms web 3
	retry 30 in_sync 3
}

@test "vms: a VM of someone else in the folder is not listed, unmarked or marked by another group" {
	GOVC_PERSIST_SESSION=false govc vm.create -on=false -net "VM Network" -folder "$(folder_of vms web)" stray
	GOVC_PERSIST_SESSION=false govc vm.create -on=false -net "VM Network" -folder "$(folder_of vms web)" stray2
	GOVC_PERSIST_SESSION=false govc vm.change -vm "$(folder_of vms web)/stray2" -e vmgroup.codeconnect.vmworld.com.uid=00000000-0000-0000-0000-0000000000aa
	[ "$(vm_mark vms web stray2)" = 00000000-0000-0000-0000-0000000000aa ]
	# The manager sees them (Degraded), and status.vms still lists its own.
	retry 30 bash -c "kubectl get vg web -n vms -o jsonpath='{.status.conditions[?(@.type==\"Degraded\")].reason}' | grep -qx ForeignVMs"
	retry 30 in_sync 3
	[[ "$(from_status)" != *stray* ]]
	GOVC_PERSIST_SESSION=false govc vm.destroy "$(folder_of vms web)/stray" "$(folder_of vms web)/stray2"
}

@test "vms: powered off out of band, the same VM is back on in the list" {
	before=$(from_status)
	GOVC_PERSIST_SESSION=false govc vm.power -off "$(folder_of vms web)/web-1"
	retry 30 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $(folder_of vms web)/web-1 runtime.powerState)\" = poweredOn ]"
	retry 30 in_sync 3
	# Powered on again, not replaced: the same instance UUIDs.
	[ "$(from_status)" = "$before" ]
}

@test "vms: a guest's address reported through vCenter is listed, and changes with it" {
	set_ip web-0 10.0.0.5
	retry 30 bash -c "[ \"\$(kubectl get vg web -n vms -o jsonpath='{.status.vms[0].ipAddresses[0]}')\" = 10.0.0.5 ]"
	[ "$(vg_field vms web '{.status.vms[0].name}')" = web-0 ]
	[ -z "$(ips web-1)" ]
	# kubectl get -o wide shows it in the IP column.
	run kubectl get vg web -n vms -o wide
	echo "$output"
	[[ "$(head -1 <<<"$output")" == *" IP "* ]]
	[[ "$(tail -1 <<<"$output")" == *" 10.0.0.5 "* ]]
	# Not without -o wide.
	run kubectl get vg web -n vms
	[[ "$output" != *10.0.0.5* ]]
	# Changed in vCenter, changed in the status; the others unchanged.
	set_ip web-0 10.0.0.6
	retry 30 bash -c "[ \"\$(kubectl get vg web -n vms -o jsonpath='{.status.vms[0].ipAddresses[0]}')\" = 10.0.0.6 ]"
	set_ip web-2 192.168.7.9
	retry 30 bash -c "[ \"\$(kubectl get vg web -n vms -o jsonpath='{.status.vms[2].ipAddresses[*]}')\" = 192.168.7.9 ]"
	[ "$(ips web-0)" = 10.0.0.6 ]
	[ -z "$(ips web-1)" ]
	retry 30 in_sync 3
}

# writes: the API writes the manager has sent (a PATCH that changes nothing
# moves no resourceVersion, so count the requests).
writes() {
	curl -sf "$METRICS_URL" | awk '/^rest_client_requests_total/ && $1 ~ /method="(PATCH|PUT|POST)"/ { s += $2 } END { print s + 0 }'
}

@test "vms: an in-sync group is not written again" {
	retry 30 in_sync 3
	sleep 2 # the write of the last change has been seen
	rv=$(vg_field vms web '{.metadata.resourceVersion}')
	before=$(writes)
	# Three sync periods.
	sleep 10
	after=$(writes)
	echo "API writes: $before -> $after"
	[ "$after" = "$before" ]
	[ "$(vg_field vms web '{.metadata.resourceVersion}')" = "$rv" ]
}

@test "vms: scaled down, the removed VM leaves the list; the rest keep their addresses" {
	kubectl scale vg web -n vms --replicas=1
	wait_running vms web 1
	retry 30 in_sync 1
	[ "$(ips web-0)" = 10.0.0.6 ]
}

@test "vms: deleted, the VMs go and so does the group" {
	kubectl scale vg web -n vms --replicas=2
	wait_running vms web 2
	retry 30 in_sync 2
	kubectl delete vg web -n vms --wait=false
	# Until the group is gone, what its list shows: its own VMs, fewer as
	# they are destroyed (never more), and none only when vCenter shows none
	# of them either.
	local last=2 n i s e
	for i in $(seq 180); do
		s=$(kubectl get vg web -n vms -o jsonpath='{.metadata.deletionTimestamp}|{range .status.vms[*]}{.name}:{.state} {end}' 2>/dev/null) || break
		echo "$s"
		s=${s#*|}
		n=$(wc -w <<<"$s")
		[ "$n" -le "$last" ]
		last=$n
		for e in $s; do [[ "$e" == web-[01]:* ]]; done
		[ "$n" != 0 ] || [ "$(vm_count vms web)" = 0 ]
		sleep 0.5
	done
	! kubectl get vg web -n vms >/dev/null 2>&1
	[ "$(vm_count vms web)" = 0 ]
	[ -z "$(vms vms web)" ]
}
