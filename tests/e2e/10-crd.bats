#!/usr/bin/env bats
# The VmGroup CRD in a real kube-apiserver: what kubectl users see, and the
# validation that keeps bad specs out before the operator sees them.

load helpers

setup_file() {
	. "$ENV_DIR/env"
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace crd-e2e >/dev/null
}

teardown_file() {
	# No manager runs here, so there are no finalizers: the groups go at once.
	kubectl delete vg --all -n crd-e2e >/dev/null
}

# vg_yaml NAME CPU MEMORY TEMPLATE REPLICAS: a VmGroup manifest; a value of
# "-" leaves the field out, anything else is written as is (so types can be
# wrong on purpose).
vg_yaml() {
	printf 'apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: %s\n  namespace: crd-e2e\nspec:\n' "$1"
	[ "$2" = - ] || printf '  cpu: %s\n' "$2"
	[ "$3" = - ] || printf '  memory: %s\n' "$3"
	[ "$4" = - ] || printf '  template: %s\n' "$4"
	[ "$5" = - ] || printf '  replicas: %s\n' "$5"
}

# rejected FIELD NAME CPU MEMORY TEMPLATE REPLICAS: the API server refuses
# the manifest with a message naming FIELD.
rejected() {
	local field=$1
	shift
	run kubectl apply -f - <<<"$(vg_yaml "$@")"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"$field"* ]]
	run kubectl get vg "$1" -n crd-e2e
	[ "$status" -ne 0 ]
}

@test "crd: is established with kind VmGroup, plural vmgroups, short name vg" {
	run kubectl get crd vmgroups.vm.codeconnect.vmworld.com -o jsonpath='{.spec.names.kind} {.spec.names.plural} {.spec.names.shortNames[0]} {.spec.scope}'
	[ "$output" = "VmGroup vmgroups vg Namespaced" ]
	kubectl api-resources --api-group=vm.codeconnect.vmworld.com | grep -E '^vmgroups +vg +vm.codeconnect.vmworld.com/v1alpha1 +true +VmGroup'
}

@test "crd: kubectl explain describes every field" {
	# The API server publishes a new CRD's OpenAPI schema a moment after
	# the CRD is established; explain reads that schema.
	retry 30 bash -c 'kubectl explain vg.spec.cpu | grep -qF "Number of virtual CPUs of each VM, from 1 to 4."'
	for f in spec.memory spec.template spec.replicas status.phase status.currentReplicas \
		status.desiredReplicas status.lastMessage status.observedGeneration status.conditions \
		status.selector status.vms status.vms.name status.vms.instanceUUID \
		status.vms.powerState status.vms.ipAddresses status.vms.cpu status.vms.memoryMB \
		status.vms.template status.vms.state status.vmsOmitted; do
		run kubectl explain "vg.$f"
		[ "$status" -eq 0 ]
		[[ "$output" == *DESCRIPTION* ]]
		[[ "$output" != *"<empty>"* ]]
	done
}

@test "crd: the samples apply" {
	kubectl apply -n crd-e2e -k "$VMG_TOP/config/samples"
	run kubectl get vg -n crd-e2e -o name
	[[ "$output" == *vmgroup.vm.codeconnect.vmworld.com/vmgroup-sample* ]]
	[[ "$output" == *vmgroup.vm.codeconnect.vmworld.com/vmgroup-small* ]]
}

@test "crd: kubectl get vg shows the printer columns" {
	run kubectl get vg -n crd-e2e
	[ "$status" -eq 0 ]
	header=$(echo "$output" | head -1)
	for col in NAME PHASE CURRENT DESIRED CPU MEMORY TEMPLATE LAST_MESSAGE AGE; do
		[[ "$header" == *"$col"* ]] || { echo "missing column $col"; return 1; }
	done
	# No status yet: Phase and Current are blank; Desired, CPU, Memory, Template shown.
	echo "$output" | grep -E '^vmgroup-sample +3 +2 +2 +vm-operator-template'
}

@test "crd: cpu out of range is rejected, naming spec.cpu" {
	rejected spec.cpu bad-cpu0 0 1 t 1
	rejected spec.cpu bad-cpu5 5 1 t 1
	rejected spec.cpu bad-cpuneg -1 1 t 1
}

@test "crd: memory out of range is rejected, naming spec.memory" {
	rejected spec.memory bad-mem0 1 0 t 1
	rejected spec.memory bad-mem9 1 9 t 1
}

@test "crd: a missing, empty or blank template is rejected, naming spec.template" {
	rejected spec.template bad-tmpl-missing 1 1 - 1
	rejected spec.template bad-tmpl-empty 1 1 '""' 1
	rejected spec.template bad-tmpl-blank 1 1 '"   "' 1
}

@test "crd: negative or missing replicas are rejected, naming spec.replicas" {
	rejected spec.replicas bad-rep-neg 1 1 t -1
	rejected spec.replicas bad-rep-missing 1 1 t -
	rejected spec.replicas bad-rep-big 1 1 t 2147483648
}

@test "crd: wrong types are rejected, naming the field" {
	rejected spec.cpu bad-type-cpu '"two"' 1 t 1
	rejected spec.memory bad-type-mem 1.5 1 t 1 || rejected spec.cpu bad-type-mem 1.5 1 t 1
	rejected spec.replicas bad-type-rep 1 1 t '"3"'
	rejected spec.template bad-type-tmpl 1 1 '[a, b]' 1
	rejected spec.memory bad-type-mem2 1 true t 1
}

@test "crd: a VmGroup without spec is rejected" {
	run kubectl apply -f - <<<"$(printf 'apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: bad-nospec\n  namespace: crd-e2e\n')"
	[ "$status" -ne 0 ]
	[[ "$output" == *spec* ]]
}

@test "crd: an unknown field is refused by kubectl's strict validation" {
	run kubectl apply -f - <<<"$(vg_yaml bad-unknown 1 1 t 1; echo '  disks: 3')"
	[ "$status" -ne 0 ]
	[[ "$output" == *"disks"* ]]
}

@test "crd: kubectl scale vg changes spec.replicas" {
	kubectl apply -f - <<<"$(vg_yaml scale-me 1 1 t 1)"
	kubectl scale vg scale-me -n crd-e2e --replicas=4
	run kubectl get vg scale-me -n crd-e2e -o jsonpath='{.spec.replicas}'
	[ "$output" = 4 ]
	kubectl scale vg scale-me -n crd-e2e --replicas=0
	run kubectl get vg scale-me -n crd-e2e -o jsonpath='{.spec.replicas}'
	[ "$output" = 0 ]
}

@test "crd: the scale subresource reports status.currentReplicas" {
	kubectl apply -f - <<<"$(vg_yaml scale-status 1 1 t 2)"
	kubectl patch vg scale-status -n crd-e2e --subresource=status --type=merge \
		-p '{"status":{"currentReplicas":1,"phase":"PENDING"}}'
	run kubectl get --raw /apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/crd-e2e/vmgroups/scale-status/scale
	[[ "$output" == *'"spec":{"replicas":2}'* ]]
	[[ "$output" == *'"status":{"replicas":1'* ]]
}

@test "crd: the scale subresource reports status.selector (an autoscaler's labelSelectorPath)" {
	run kubectl get crd vmgroups.vm.codeconnect.vmworld.com -o jsonpath='{.spec.versions[0].subresources.scale.labelSelectorPath}'
	[ "$output" = .status.selector ]
	kubectl apply -f - <<<"$(vg_yaml scale-selector 1 1 t 2)"
	kubectl patch vg scale-selector -n crd-e2e --subresource=status --type=merge \
		-p '{"status":{"selector":"vm.codeconnect.vmworld.com/vmgroup-uid=x"}}'
	run kubectl get --raw /apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/crd-e2e/vmgroups/scale-selector/scale
	[[ "$output" == *'"selector":"vm.codeconnect.vmworld.com/vmgroup-uid=x"'* ]]
}

@test "crd: status written through the main resource is ignored" {
	kubectl apply -f - <<<"$(vg_yaml status-guard 1 1 t 1)"
	kubectl patch vg status-guard -n crd-e2e --type=merge -p '{"status":{"phase":"RUNNING","currentReplicas":7}}'
	run kubectl get vg status-guard -n crd-e2e -o jsonpath='{.status.phase}{.status.currentReplicas}'
	[ "$output" = "" ]
	kubectl patch vg status-guard -n crd-e2e --subresource=status --type=merge -p '{"status":{"phase":"RUNNING"}}'
	run kubectl get vg status-guard -n crd-e2e -o jsonpath='{.status.phase}'
	[ "$output" = RUNNING ]
	# The status schema holds too: an unknown phase is refused.
	run kubectl patch vg status-guard -n crd-e2e --subresource=status --type=merge -p '{"status":{"phase":"DONE"}}'
	[ "$status" -ne 0 ]
	[[ "$output" == *status.phase* ]]
}
