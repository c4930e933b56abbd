#!/usr/bin/env bats
# Bad input and failure, in the one-node cluster: a missing vc-creds secret,
# a secret without VC_HOST (or with it empty), a wrong password, a registry
# that is down and a node that is not Ready each end with a message that
# says what is wrong, from make deploy / make image-push or in the pods'
# status and logs, within a bound; never a hang. The file undeploys and
# brings back what it stopped (registry, kubelet) before the next one.

load cluster

SYS=vmgroup-operator-system
DEPLOY=deployment/vmgroup-operator-controller-manager

# envctl CMD...: runs CMD with hack/env's own functions (stop, start_kubelet,
# start_registry, wait_node_ready ...) for this environment.
envctl() {
	D=$ENV_DIR bash -c ". '$VMG_TOP/hack/env/lib.sh'; . '$VMG_TOP/hack/env/cluster.sh'; $*"
}

alive_in_env() { envctl "alive $1"; }

# The image: the one 10-deploy pushed to the cluster's registry, or one
# built and pushed here when this file runs alone.
setup_file() {
	local tag
	tag=$(curl -sf "http://$REGISTRY/v2/vmgroup-operator/tags/list" | jq -r '.tags[0] // empty' 2>/dev/null || true)
	if [ -z "$tag" ]; then
		tag=bad-input-$$
		"$VMG_TOP/hack/image/base" >&2
		make -C "$VMG_TOP" --no-print-directory image CONTAINER_TOOL=podman \
			IMG="$REGISTRY/vmgroup-operator:$tag" >&2
		make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman \
			IMG="$REGISTRY/vmgroup-operator:$tag" >&2
		podman rmi -f "$REGISTRY/vmgroup-operator:$tag" >/dev/null 2>&1 || true
	fi
	echo "$REGISTRY/vmgroup-operator:$tag" >"$BATS_FILE_TMPDIR/img"
}

# What a failed test may have left: the registry and the kubelet stopped,
# the operator deployed.
teardown_file() {
	alive_in_env registry || envctl start_registry
	if ! alive_in_env kubelet; then
		envctl "start_kubelet && wait_node_ready 120"
	fi
	if kubectl get namespace "$SYS" >/dev/null 2>&1; then
		UNDEPLOY_TIMEOUT=60s make -C "$VMG_TOP" --no-print-directory undeploy >&2 || true
		kubectl delete namespace "$SYS" --ignore-not-found --timeout=120s >&2 || true
	fi
}

setup() {
	IMG=$(cat "$BATS_FILE_TMPDIR/img")
}

# create_secret KEY=VALUE...: vc-creds with these keys, as the README does.
create_secret() {
	local args=() kv
	for kv in "$@"; do args+=(--from-literal="$kv"); done
	kubectl -n "$SYS" delete secret vc-creds --ignore-not-found >/dev/null
	kubectl -n "$SYS" create secret generic vc-creds "${args[@]}" >/dev/null
}

# new_pods: the Deployment's pods made again, from the current Secret.
new_pods() {
	kubectl -n "$SYS" delete pods -l control-plane=controller-manager --wait=false >/dev/null
}

# pods_say TEXT: some pod of the Deployment says TEXT in its container's
# status (waiting or last terminated) or in its events.
pods_say() {
	local pod
	for pod in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name 2>/dev/null); do
		kubectl -n "$SYS" get "$pod" -o 'jsonpath={.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}{"\n"}{.status.containerStatuses[0].lastState.terminated.message}' 2>/dev/null |
			grep -qF -- "$1" && return 0
		kubectl -n "$SYS" get events --field-selector "involvedObject.name=${pod#pod/}" \
			-o 'jsonpath={range .items[*]}{.message}{"\n"}{end}' 2>/dev/null | grep -qF -- "$1" && return 0
	done
	return 1
}

# logs_say TEXT: some pod of the Deployment logged TEXT.
logs_say() {
	local pod
	for pod in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name 2>/dev/null); do
		kubectl -n "$SYS" logs "$pod" 2>/dev/null | grep -qF -- "$1" && return 0
	done
	return 1
}

show_pods() {
	kubectl -n "$SYS" get pods -o wide >&2 || true
	kubectl -n "$SYS" get events -o 'jsonpath={range .items[*]}{.involvedObject.name} {.reason} {.message}{"\n"}{end}' | tail -n 20 >&2 || true
}

@test "bad input: make deploy with no secret vc-creds stops at once, saying so and how to make it, and applies nothing" {
	run kubectl get namespace "$SYS"
	[ "$status" -ne 0 ]
	crds=$(kubectl get crd -o name)
	t0=$SECONDS
	run make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"the secret vc-creds is not in namespace $SYS: create it as the README shows: kubectl create namespace $SYS; kubectl -n $SYS create secret generic vc-creds"* ]]
	[ $((SECONDS - t0)) -le 20 ]
	run kubectl get namespace "$SYS"
	[ "$status" -ne 0 ]
	[ "$(kubectl get crd -o name)" = "$crds" ]
	# The namespace there, the secret not: the same message.
	kubectl create namespace "$SYS"
	run make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	[ "$status" -ne 0 ]
	[[ "$output" == *"the secret vc-creds is not in namespace $SYS"* ]]
	run kubectl -n "$SYS" get "$DEPLOY"
	[ "$status" -ne 0 ]
}

@test "bad input: deployed anyway (DEPLOY_CHECK=0) with no secret, the pods' events say the secret vc-creds is not found" {
	DEPLOY_CHECK=0 make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	run retry 90 pods_say 'secret "vc-creds" not found'
	[ "$status" -eq 0 ] || { show_pods; return 1; }
}

@test "bad input: a secret without VC_HOST: make deploy names the missing key; the pods' status says the key is not in the Secret" {
	create_secret VC_USER="$VC_USER" VC_PASS="$VC_PASS"
	run make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"the secret vc-creds in namespace $SYS has no (or an empty) VC_HOST: the manager needs VC_HOST, VC_USER and VC_PASS"* ]]
	[[ "$output" != *"$VC_PASS"* ]]
	# What the kubelet says of the pods deployed without the check.
	new_pods
	run retry 90 pods_say "couldn't find key VC_HOST in Secret $SYS/vc-creds"
	[ "$status" -eq 0 ] || { show_pods; return 1; }
	run retry 30 pods_say CreateContainerConfigError
	[ "$status" -eq 0 ] || { show_pods; return 1; }
}

@test "bad input: an empty VC_HOST: make deploy refuses; the manager deployed anyway exits saying VC_HOST is not set, in its log and its pod's status" {
	create_secret VC_HOST= VC_USER="$VC_USER" VC_PASS="$VC_PASS"
	run make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	[ "$status" -ne 0 ]
	[[ "$output" == *"has no (or an empty) VC_HOST"* ]]
	new_pods
	msg='VC_HOST is not set: the manager needs VC_HOST, VC_USER and VC_PASS or VC_PASS_FILE (in a cluster, from the secret vc-creds)'
	run retry 120 logs_say "$msg"
	[ "$status" -eq 0 ] || { show_pods; return 1; }
	# The pod's status carries it too (its last state's message), for
	# kubectl describe and kubectl get pod -o yaml.
	run retry 60 pods_say "$msg"
	[ "$status" -eq 0 ] || { show_pods; return 1; }
}

@test "bad input: a wrong password: the manager logs that vCenter refused the login, the pods stay NotReady and /readyz names the vcenter check; no password in the log" {
	wrong=wrong-$(openssl rand -hex 6)
	create_secret VC_HOST="$VC_HOST_FROM_PODS" VC_USER="$VC_USER" VC_PASS="$wrong"
	# The check cannot know the password is wrong: it passes.
	make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	tp=$(govc about.cert -k -thumbprint | awk '{ print $2 }')
	kubectl -n "$SYS" patch "$DEPLOY" --type=json \
		-p "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\"value\":\"--vc-thumbprint=$tp\"}]"
	new_pods
	run retry 120 logs_say "vCenter refused the login for user $VC_USER: incorrect user name or password"
	[ "$status" -eq 0 ] || { show_pods; return 1; }
	for pod in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name); do
		run kubectl -n "$SYS" logs "$pod"
		[[ "$output" != *"$wrong"* ]]
		[[ "$output" != *"$VC_PASS"* ]]
	done
	# A pod that logged it: Running, not Ready, and its /readyz says why.
	pod=
	for p in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name); do
		if kubectl -n "$SYS" logs "$p" | grep -qF 'incorrect user name or password'; then
			pod=${p#pod/}
			break
		fi
	done
	[ -n "$pod" ]
	[ "$(kubectl -n "$SYS" get pod "$pod" -o 'jsonpath={.status.phase}')" = Running ]
	ip=$(kubectl -n "$SYS" get pod "$pod" -o 'jsonpath={.status.podIP}')
	run curl -s -w '\n%{http_code}' "http://$ip:8081/readyz"
	echo "$output"
	[ "${lines[-1]}" = 503 ]
	# /readyz names the failing check; why (and who) is in the log above.
	[[ "${lines[0]}" == "not ready: "*vcenter* ]]
	[[ "$output" != *incorrect* ]]
	[[ "$output" != *"$VC_USER"* ]]
	sleep 12 # past the readiness probe's first period
	[ "$(kubectl -n "$SYS" get pod "$pod" -o 'jsonpath={.status.containerStatuses[0].ready}')" = false ]
}

@test "bad input: a registry that is down: make image-push fails within 30 s naming it; a pod's image from it ends in ErrImagePull / ImagePullBackOff naming it" {
	envctl "stop registry"
	run curl -sf "http://$REGISTRY/v2/"
	[ "$status" -ne 0 ]
	# Something to push: the base image the Dockerfile starts from.
	"$VMG_TOP/hack/image/base" >&2
	podman tag docker.io/library/debian:bookworm-slim "$REGISTRY/vmgroup-operator:down-$$"
	t0=$SECONDS
	run timeout 120 make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman \
		IMG="$REGISTRY/vmgroup-operator:down-$$"
	echo "$output"
	podman rmi "$REGISTRY/vmgroup-operator:down-$$" >/dev/null 2>&1 || true
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ]
	[ $((SECONDS - t0)) -le 30 ]
	[[ "$output" == *"$REGISTRY"* ]]
	# A pod of an image the node does not hold yet: the kubelet's pull fails,
	# naming the registry, and says why.
	kubectl -n "$SYS" set image "$DEPLOY" manager="$REGISTRY/vmgroup-operator:absent-$$"
	run retry 90 pods_say "dial tcp $REGISTRY: connect: connection refused"
	[ "$status" -eq 0 ] || { show_pods; return 1; }
	run retry 60 pods_say "Back-off pulling image \"$REGISTRY/vmgroup-operator:absent-$$\""
	[ "$status" -eq 0 ] || { show_pods; return 1; }
	envctl start_registry
	curl -sf "http://$REGISTRY/v2/" >/dev/null
}

@test "bad input: make undeploy removes what the tests above deployed" {
	UNDEPLOY_TIMEOUT=60s make -C "$VMG_TOP" --no-print-directory undeploy
	retry 120 refute kubectl get namespace "$SYS"
}

@test "bad input: a node not Ready: make deploy stops within DEPLOY_NODE_TIMEOUT naming the node and why, and applies nothing" {
	kubectl create namespace "$SYS"
	create_secret VC_HOST="$VC_HOST_FROM_PODS" VC_USER="$VC_USER" VC_PASS="$VC_PASS"
	envctl "stop kubelet"
	t0=$SECONDS
	# kube-controller-manager marks it Unknown once the kubelet's status
	# is older than the node monitor's grace period.
	run retry 150 bash -c "[ \"\$(kubectl get node '$NODE_NAME' -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].status}')\" != True ]"
	[ "$status" -eq 0 ]
	echo "# the node was not Ready $((SECONDS - t0)) s after its kubelet stopped" >&3
	t0=$SECONDS
	run env DEPLOY_NODE_TIMEOUT=10 timeout 120 make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	echo "$output"
	[ "$status" -ne 0 ]
	echo "# make deploy stopped after $((SECONDS - t0)) s (DEPLOY_NODE_TIMEOUT=10)" >&3
	[ $((SECONDS - t0)) -le 40 ]
	[[ "$output" == *"no node of the cluster is Ready after 10s, so the manager's pods could not start"* ]]
	[[ "$output" == *"$NODE_NAME: Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"* ]]
	run kubectl -n "$SYS" get "$DEPLOY"
	[ "$status" -ne 0 ]
	envctl "start_kubelet && wait_node_ready 120"
	# Ready again: the same command goes through.
	make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	kubectl -n "$SYS" get "$DEPLOY"
	UNDEPLOY_TIMEOUT=60s make -C "$VMG_TOP" --no-print-directory undeploy
	retry 120 refute kubectl get namespace "$SYS"
}
