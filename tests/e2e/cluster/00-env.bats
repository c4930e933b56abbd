#!/usr/bin/env bats
# The one-node cluster of hack/env/up --cluster: what the cluster suites and
# a platform engineer's steps rely on.

load cluster

events_say() {
	kubectl -n "$NS" get events -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q "$1"
}

@test "cluster: DIR/env exports the cluster's addresses, and the node is Ready on containerd" {
	for v in VC_HOST_FROM_PODS REGISTRY NODE_NAME POD_CIDR PAUSE_IMAGE INCLUSTER_IMAGE; do
		[ -n "${!v}" ] || { echo "$v is empty"; return 1; }
	done
	[ "$(jsonpath "node/$NODE_NAME" '{.status.conditions[?(@.type=="Ready")].status}')" = True ]
	[ -z "$(jsonpath "node/$NODE_NAME" '{.spec.taints}')" ]
	jsonpath "node/$NODE_NAME" '{.status.nodeInfo.containerRuntimeVersion}' | grep -q '^containerd://1\.'
	[ "$(jsonpath "node/$NODE_NAME" '{.status.nodeInfo.kubeletVersion}')" = v1.32.13 ]
	# The registry answers the registry API on loopback.
	curl -sf "http://$REGISTRY/v2/" >/dev/null
}

@test "cluster: a restricted pod runs the project's own sandbox image, which was never pulled" {
	restricted_namespace cl-restricted
	restricted_pod sleeper "$PAUSE_IMAGE" | kubectl -n "$NS" apply -f -
	wait_phase sleeper Running 90
	[ "$(jsonpath pod/sleeper '{.status.containerStatuses[0].ready}')" = true ]
	# The container's process, as runc started it: the image's non-root
	# user, no capability, a read-only root.
	cid=$(jsonpath pod/sleeper '{.status.containerStatuses[0].containerID}')
	pid=$(ctr --address "$CONTAINERD_ADDRESS" -n k8s.io tasks ls | awk -v c="${cid#containerd://}" '$1 == c { print $2 }')
	[ -n "$pid" ]
	grep -E '^Uid:\s+65532\s+65532\s+65532\s+65532$' "/proc/$pid/status"
	grep -E '^CapEff:\s+0+$' "/proc/$pid/status"
	awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | grep -E '^ro(,|$)'
	# A privileged pod is refused in that namespace.
	run kubectl -n "$NS" run root --image="$PAUSE_IMAGE" --image-pull-policy=Never --privileged
	[ "$status" -ne 0 ]
	[[ "$output" == *"violates PodSecurity"* ]]
	# No image came from outside: the container's was already present (and
	# the sandbox's: containerd would have pulled it first), and containerd
	# has no image of registry.k8s.io.
	retry 30 events_say "already present on machine"
	run events_say "Pulling image"
	[ "$status" -ne 0 ]
	run ctr --address "$CONTAINERD_ADDRESS" -n k8s.io images ls -q
	[[ "$output" == *"$PAUSE_IMAGE"* ]]
	[[ "$output" != *registry.k8s.io* ]]
}

@test "cluster: from a pod, the API server answers through the kubernetes Service with the pod's token" {
	restricted_namespace cl-incluster
	kubectl -n "$NS" create serviceaccount reader
	kubectl -n "$NS" create role read-configmaps --verb=get,list --resource=configmaps
	kubectl -n "$NS" create rolebinding reader --role=read-configmaps --serviceaccount="$NS:reader"
	restricted_pod probe "$INCLUSTER_IMAGE" "/api/v1/namespaces/$NS/configmaps" |
		sed 's/^spec:/spec:\n  serviceAccountName: reader/' | kubectl -n "$NS" apply -f -
	wait_phase probe Succeeded 90
	run kubectl -n "$NS" logs probe
	echo "$output"
	# The Service's address, kube-proxy's DNAT to the API server, the
	# API server's certificate for it, the token accepted, RBAC applied.
	[[ "${lines[0]}" == "GET https://10.96.0.1:443/api/v1/namespaces/$NS/configmaps" ]]
	[ "${lines[1]}" = "200 OK" ]
	[[ "$output" == *kube-root-ca.crt* ]]
	# The same pod's token is refused what its role does not grant.
	restricted_pod probe2 "$INCLUSTER_IMAGE" "/api/v1/namespaces/$NS/secrets" |
		sed 's/^spec:/spec:\n  serviceAccountName: reader/' | kubectl -n "$NS" apply -f -
	wait_phase probe2 Failed 90
	run kubectl -n "$NS" logs probe2
	[ "${lines[1]}" = "403 Forbidden" ]
}

@test "cluster: from a pod, vcsim answers at VC_HOST_FROM_PODS with a certificate for that address" {
	restricted_namespace cl-vcsim
	kubectl -n "$NS" create configmap vc-ca --from-file=ca.crt="$VC_CA_FILE"
	restricted_pod vc "$INCLUSTER_IMAGE" "https://$VC_HOST_FROM_PODS/about" |
		sed 's|^    args:|    env: [{name: CA_FILE, value: /vc-ca/ca.crt}]\n    volumeMounts: [{name: vc-ca, mountPath: /vc-ca}]\n    args:|' |
		sed 's/^spec:/spec:\n  volumes: [{name: vc-ca, configMap: {name: vc-ca}}]/' | kubectl -n "$NS" apply -f -
	wait_phase vc Succeeded 90
	run kubectl -n "$NS" logs vc
	echo "$output"
	[ "${lines[1]}" = "200 OK" ]
}

@test "cluster: an image pushed to the local registry is pulled by the node from REGISTRY" {
	restricted_namespace cl-registry
	tag=t$RANDOM
	"$VMG_TOP/hack/env/images/build" push incluster "$REGISTRY/e2e/incluster:$tag"
	PULL_POLICY=Always restricted_pod pulled "$REGISTRY/e2e/incluster:$tag" /version |
		kubectl -n "$NS" apply -f -
	wait_phase pulled Succeeded 90
	run kubectl -n "$NS" get events --field-selector involvedObject.name=pulled \
		-o jsonpath='{range .items[*]}{.message}{"\n"}{end}'
	[[ "$output" == *"Successfully pulled image \"$REGISTRY/e2e/incluster:$tag\""* ]]
}

@test "cluster: a second cluster environment refuses, naming this one; a plain one runs beside it" {
	other=$(mktemp -d /tmp/vmgroup-e2e-other.XXXXXX)
	CLUSTER_LOCK_WAIT=0 run "$VMG_TOP/hack/env/up" --cluster "$other"
	[ "$status" -ne 0 ]
	[[ "$output" == *"already up in $ENV_DIR"* ]]
	# Nothing of the refused one was started.
	[ ! -e "$other/run/kube-apiserver.pid" ]
	"$VMG_TOP/hack/env/up" "$other" >/dev/null 2>&1 || {
		"$VMG_TOP/hack/env/down" "$other"
		rm -rf "$other"
		return 1
	}
	KUBECONFIG=$other/kubeconfig kubectl get --raw /readyz
	"$VMG_TOP/hack/env/down" "$other"
	rm -rf "$other"
	# This cluster is still up.
	[ "$(jsonpath "node/$NODE_NAME" '{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
