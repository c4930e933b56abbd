#!/usr/bin/env bats
# A HorizontalPodAutoscaler against a VmGroup, in the one-node cluster
# whose kube-controller-manager runs the HPA controller (issue 16): the
# operator deployed as 10-deploy does, an HPA made with kubectl autoscale
# reads the group's scale (AbleToScale True), accepts its selector, and
# drives spec.replicas through the scale subresource; the operator
# follows, keeping the lowest slots. After 10-deploy and 30-bad-input
# (which start and end with the operator undeployed), before 99-down; the
# file undeploys, and removes its namespace, whatever happened.

load cluster
load ../manager

SYS=vmgroup-operator-system
DEPLOY=deployment/vmgroup-operator-controller-manager
APPS=hpa-e2e

# The image: the one 10-deploy pushed to the cluster's registry (its tags
# begin with e2e-), or one built and pushed here when this file runs alone.
setup_file() {
	local tag
	tag=$(curl -sf "http://$REGISTRY/v2/vmgroup-operator/tags/list" |
		jq -r '[.tags[]? | select(startswith("e2e-"))][0] // empty' 2>/dev/null || true)
	if [ -z "$tag" ]; then
		tag=hpa-$$
		"$VMG_TOP/hack/image/base" >&2
		make -C "$VMG_TOP" --no-print-directory image CONTAINER_TOOL=podman \
			IMG="$REGISTRY/vmgroup-operator:$tag" >&2
		make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman \
			IMG="$REGISTRY/vmgroup-operator:$tag" >&2
		podman rmi -f "$REGISTRY/vmgroup-operator:$tag" >/dev/null 2>&1 || true
	fi
	echo "$REGISTRY/vmgroup-operator:$tag" >"$BATS_FILE_TMPDIR/img"
}

# Nothing stays: the HPAs and groups (their VMs removed by the manager
# while it still runs), the operator, the namespaces.
teardown_file() {
	kubectl delete hpa --all -n "$APPS" --ignore-not-found >&2 || true
	if kubectl get namespace "$SYS" >/dev/null 2>&1; then
		UNDEPLOY_TIMEOUT=120s make -C "$VMG_TOP" --no-print-directory undeploy >&2 || true
		kubectl delete namespace "$SYS" --ignore-not-found --timeout=120s >&2 || true
	fi
	kubectl delete namespace "$APPS" --ignore-not-found --timeout=120s >&2 || true
}

setup() {
	IMG=$(cat "$BATS_FILE_TMPDIR/img")
}

# hpa_cond TYPE FIELD: a field (status, reason) of the HPA's condition TYPE.
hpa_cond() {
	kubectl get hpa web -n "$APPS" -o "jsonpath={.status.conditions[?(@.type==\"$1\")].$2}" 2>/dev/null
}

cond_is() { [ "$(hpa_cond "$1" "$2")" = "$3" ]; }

# has_reason TYPE: the HPA's condition TYPE is there, with a reason.
has_reason() { [ -n "$(hpa_cond "$1" reason)" ]; }

# replicas_is N: the VmGroup's spec.replicas is N.
replicas_is() { [ "$(vg_field "$APPS" web '{.spec.replicas}')" = "$1" ]; }

# show_hpa: the HPA and its events, for a failure's message.
show_hpa() {
	kubectl describe hpa web -n "$APPS" >&2 || true
}

@test "hpa: the operator deployed with make deploy, the leader Ready" {
	kubectl create namespace "$SYS"
	kubectl -n "$SYS" create secret generic vc-creds \
		--from-literal=VC_HOST="$VC_HOST_FROM_PODS" \
		--from-literal=VC_USER="$VC_USER" \
		--from-literal=VC_PASS="$VC_PASS"
	# The node may still be coming back from 30-bad-input's stopped kubelet.
	DEPLOY_NODE_TIMEOUT=120 make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	tp=$(govc about.cert -k -thumbprint | awk '{ print $2 }')
	[ -n "$tp" ]
	kubectl -n "$SYS" patch "$DEPLOY" --type=json \
		-p "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\"value\":\"--vc-thumbprint=$tp\"}]"
	kubectl -n "$SYS" rollout status "$DEPLOY" --timeout=240s
	kubectl create namespace "$APPS"
	apply_vg "$APPS" web 1 1 vm-operator-template 2
	wait_running "$APPS" web 2 180
	[ "$(vms "$APPS" web)" = "$(printf 'web-0\nweb-1')" ]
	uid=$(vg_field "$APPS" web '{.metadata.uid}')
	[ "$(vg_field "$APPS" web '{.status.selector}')" = "vm.codeconnect.vmworld.com/vmgroup-uid=$uid" ]
}

@test "hpa: kubectl autoscale vg: the HPA controller reads the VmGroup's scale (AbleToScale True) and accepts its selector" {
	kubectl autoscale vg web -n "$APPS" --min=1 --max=3
	[ "$(kubectl get hpa web -n "$APPS" -o 'jsonpath={.spec.scaleTargetRef.kind}')" = VmGroup ]
	# The HPA controller syncs every 15 s; its REST mapper learns a new CRD
	# within 30 s.
	run retry 120 cond_is AbleToScale status True
	[ "$status" -eq 0 ] || { show_hpa; return 1; }
	# 2 replicas lie within 1..3, so the controller went on to the metrics:
	# with no selector it would stop there (InvalidSelector, event
	# SelectorRequired). It reads the default CPU metric of the pods the
	# selector matches, of which there are none (and no metrics API here):
	# ScalingActive is False for that reason, not for the selector.
	run retry 120 has_reason ScalingActive
	[ "$status" -eq 0 ] || { show_hpa; return 1; }
	reason=$(hpa_cond ScalingActive reason)
	echo "ScalingActive: $reason"
	[ "$reason" != InvalidSelector ] || { show_hpa; return 1; }
	[ "$reason" != AmbiguousSelector ] || { show_hpa; return 1; }
	run kubectl get events -n "$APPS" --field-selector involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=web \
		-o 'jsonpath={range .items[*]}{.reason}{"\n"}{end}'
	[[ "$output" != *SelectorRequired* ]]
	[[ "$output" != *InvalidSelector* ]]
	# The HPA left the group alone.
	replicas_is 2
}

@test "hpa: the HPA scales the VmGroup into its bounds through the scale subresource; the operator follows, keeping the lowest slots" {
	# Above maxReplicas: the HPA scales down to it at its next sync, with
	# no metric needed.
	kubectl patch hpa web -n "$APPS" --type=merge -p '{"spec":{"minReplicas":1,"maxReplicas":1}}'
	run retry 120 replicas_is 1
	[ "$status" -eq 0 ] || { show_hpa; return 1; }
	wait_running "$APPS" web 1 180
	[ "$(vms "$APPS" web)" = web-0 ]
	# Below minReplicas: up to it.
	kubectl patch hpa web -n "$APPS" --type=merge -p '{"spec":{"minReplicas":3,"maxReplicas":4}}'
	run retry 120 replicas_is 3
	[ "$status" -eq 0 ] || { show_hpa; return 1; }
	wait_running "$APPS" web 3 180
	[ "$(vms "$APPS" web)" = "$(printf 'web-0\nweb-1\nweb-2')" ]
	run retry 60 cond_is AbleToScale status True
	[ "$status" -eq 0 ] || { show_hpa; return 1; }
	run kubectl get events -n "$APPS" --field-selector involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=web \
		-o 'jsonpath={range .items[*]}{.reason} {.message}{"\n"}{end}'
	echo "$output"
	[[ "$output" == *"SuccessfulRescale New size: 1"* ]]
	[[ "$output" == *"SuccessfulRescale New size: 3"* ]]
}

@test "hpa: the HPA and the group deleted, make undeploy leaves no VM, folder or operator" {
	kubectl delete hpa web -n "$APPS"
	kubectl delete vg web -n "$APPS" --timeout=120s
	[ -z "$(vms "$APPS" web)" ]
	UNDEPLOY_TIMEOUT=120s make -C "$VMG_TOP" --no-print-directory undeploy
	retry 120 refute kubectl get namespace "$SYS"
	run govc find /DC0/vm/vm-operator -type m
	[ -z "$output" ]
	run kubectl get crd vmgroups.vm.codeconnect.vmworld.com
	[ "$status" -ne 0 ]
	kubectl delete namespace "$APPS" --timeout=120s
}
