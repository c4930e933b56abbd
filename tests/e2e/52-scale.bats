#!/usr/bin/env bats
# Scaling as autoscalers and users see it (issue 16): scale-down keeps the
# lowest slots, as a StatefulSet does; the scale subresource carries
# status.selector, so that kubectl autoscale (and a HorizontalPodAutoscaler)
# accepts a VmGroup as its target. No kube-controller-manager runs here:
# tests/e2e/cluster/40-hpa.bats has an HPA act on a VmGroup.

load helpers
load manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace scale --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	start_manager scale-manager --sync-period=3s --watch-namespace scale
}

teardown_file() {
	kubectl delete hpa --all -n scale --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete vg --all -n scale --timeout=90s >/dev/null 2>&1 || true
	stop_manager scale-manager
	kubectl delete namespace scale --wait=false >/dev/null 2>&1 || true
}

setup() {
	manager_urls scale-manager
}

SCALE_URL=/apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/scale/vmgroups/web/scale

@test "scale: 5 -> 2 leaves web-0 and web-1, though web-0 is the newest" {
	apply_vg scale web 1 1 vm-operator-template 5
	wait_running scale web 5
	# web-0 destroyed out of band comes back as the newest VM: by creation
	# order it would be the first to go.
	retry 20 bash -c "GOVC_PERSIST_SESSION=false govc vm.power -off $(folder_of scale web)/web-0 >/dev/null 2>&1; GOVC_PERSIST_SESSION=false govc vm.destroy $(folder_of scale web)/web-0"
	retry 30 bash -c "[ \"\$(GOVC_PERSIST_SESSION=false govc object.collect -s $(folder_of scale web)/web-0 runtime.powerState 2>/dev/null)\" = poweredOn ]"
	wait_running scale web 5
	kubectl scale vg web -n scale --replicas=2
	wait_running scale web 2
	run vms scale web
	[ "$output" = "$(printf 'web-0\nweb-1')" ]
}

@test "scale: the scale subresource returns status.selector, the group's UID" {
	uid=$(vg_field scale web '{.metadata.uid}')
	want="vm.codeconnect.vmworld.com/vmgroup-uid=$uid"
	[ "$(vg_field scale web '{.status.selector}')" = "$want" ]
	run kubectl get --raw "$SCALE_URL"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r .status.selector <<<"$output")" = "$want" ]
	[ "$(jq -r .status.replicas <<<"$output")" = 2 ]
	[ "$(jq -r .spec.replicas <<<"$output")" = 2 ]
}

@test "scale: an in-sync group is not written again (the selector included)" {
	rv=$(vg_field scale web '{.metadata.resourceVersion}')
	# Three sync periods.
	sleep 10
	[ "$(vg_field scale web '{.metadata.resourceVersion}')" = "$rv" ]
}

@test "scale: kubectl autoscale creates an HPA that targets the VmGroup" {
	kubectl autoscale vg web -n scale --min=1 --max=5
	run kubectl get hpa web -n scale -o jsonpath='{.spec.scaleTargetRef.apiVersion} {.spec.scaleTargetRef.kind} {.spec.scaleTargetRef.name} {.spec.minReplicas} {.spec.maxReplicas}'
	[ "$output" = "vm.codeconnect.vmworld.com/v1alpha1 VmGroup web 1 5" ]
	kubectl delete hpa web -n scale
}

@test "scale: to 0 and back through the scale subresource; the selector stays" {
	kubectl scale vg web -n scale --replicas=0
	wait_running scale web 0
	run kubectl get --raw "$SCALE_URL"
	[ "$(jq -r .status.selector <<<"$output")" = "vm.codeconnect.vmworld.com/vmgroup-uid=$(vg_field scale web '{.metadata.uid}')" ]
	[ "$(jq -r .status.replicas <<<"$output")" = 0 ]
	kubectl scale vg web -n scale --replicas=1
	wait_running scale web 1
	run vms scale web
	[ "$output" = web-0 ]
}

@test "scale: deleting the group removes its VMs and folder" {
	kubectl delete vg web -n scale --timeout=90s
	[ "$(vm_count scale web)" = 0 ]
	run env GOVC_PERSIST_SESSION=false govc find /DC0/vm/vm-operator -type f -name scale_web
	[ -z "$output" ]
}
