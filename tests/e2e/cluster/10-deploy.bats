#!/usr/bin/env bats
# The operator deployed the way a platform engineer deploys it, with the
# README's own commands, in the one-node cluster: the image built and pushed
# with podman to the cluster's registry, the namespace and the vc-creds
# secret, make deploy; then VmGroups through the in-cluster manager, and
# make undeploy.

load cluster
load ../manager

# A first image build installs the build stage's packages and compiles.
BATS_TEST_TIMEOUT=1800

SYS=vmgroup-operator-system
DEPLOY=deployment/vmgroup-operator-controller-manager

setup_file() {
	echo "$REGISTRY/vmgroup-operator:e2e-$$-$RANDOM" >"$BATS_FILE_TMPDIR/img"
}

teardown_file() {
	podman rmi -f "$(cat "$BATS_FILE_TMPDIR/img")" >/dev/null 2>&1 || true
}

setup() {
	IMG=$(cat "$BATS_FILE_TMPDIR/img")
}

teardown() {
	# A test that stopped vcsim and failed must not leave it stopped for
	# the tests after it.
	[ -f "$ENV_DIR/run/vcsim.pid" ] || "$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
}

# leader_pod: the pod that holds the manager's Lease.
leader_pod() {
	local holder
	holder=$(kubectl -n "$SYS" get lease vmgroup-operator-leader -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null)
	[ -n "$holder" ] && echo "${holder%%_*}"
}

# leader_ready: the Lease's holder is a pod of the Deployment, Running and Ready.
leader_ready() {
	local pod
	pod=$(leader_pod) || return 1
	[ "$(kubectl -n "$SYS" get pod "$pod" -o 'jsonpath={.status.phase} {.status.containerStatuses[0].ready}' 2>/dev/null)" = "Running true" ]
}

# replicas_running N: N pods of the Deployment, all Running, none going.
replicas_running() {
	local out
	out=$(kubectl -n "$SYS" get pods -l control-plane=controller-manager \
		-o 'jsonpath={range .items[*]}{.status.phase}{.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null)
	[ "$(grep -cx Running <<<"$out")" = "$1" ] && [ "$(grep -c . <<<"$out")" = "$1" ]
}

@test "deploy: make image and make image-push with CONTAINER_TOOL=podman put the image in the cluster's registry" {
	run "$VMG_TOP/hack/image/base"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	t0=$SECONDS
	run make -C "$VMG_TOP" --no-print-directory image CONTAINER_TOOL=podman IMG="$IMG"
	[ "$status" -eq 0 ] || { echo "$output" | tail -n 30; return 1; }
	t1=$SECONDS
	run make -C "$VMG_TOP" --no-print-directory image-push CONTAINER_TOOL=podman IMG="$IMG"
	[ "$status" -eq 0 ] || { echo "$output" | tail -n 30; return 1; }
	echo "# make image took $((t1 - t0)) s, make image-push $((SECONDS - t1)) s" >&3
	repo=${IMG#*/}
	curl -sf -o /dev/null "http://$REGISTRY/v2/${repo%:*}/manifests/${IMG##*:}" \
		-H 'Accept: application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json'
}

@test "deploy: the README's steps run the manager; both replicas Running and the leader Ready within 180 s" {
	# As the README shows, with what pods dial for this vCenter.
	kubectl create namespace "$SYS"
	kubectl -n "$SYS" create secret generic vc-creds \
		--from-literal=VC_HOST="$VC_HOST_FROM_PODS" \
		--from-literal=VC_USER="$VC_USER" \
		--from-literal=VC_PASS="$VC_PASS"
	t0=$SECONDS
	make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	# vcsim's certificate is signed by the environment's own CA: pin it,
	# as the README's troubleshooting says (--vc-thumbprint).
	tp=$(govc about.cert -k -thumbprint | awk '{ print $2 }')
	[ -n "$tp" ]
	kubectl -n "$SYS" patch "$DEPLOY" --type=json \
		-p "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\"value\":\"--vc-thumbprint=$tp\"}]"
	kubectl -n "$SYS" rollout status "$DEPLOY" --timeout=180s
	retry $((180 - (SECONDS - t0))) replicas_running 2
	retry $((180 - (SECONDS - t0))) leader_ready
	echo "# deploy to both replicas Running and the leader Ready: $((SECONDS - t0)) s" >&3
	# The namespace enforces the restricted standard, and both pods were
	# admitted under it.
	[ "$(jsonpath "namespace/$SYS" '{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ]
	# The pods run the image from the cluster's registry.
	[ "$(kubectl -n "$SYS" get "$DEPLOY" -o 'jsonpath={.spec.template.spec.containers[0].image}')" = "$IMG" ]
}

@test "deploy: the in-cluster manager creates, scales and deletes a VmGroup's VMs, as govc shows" {
	kubectl create namespace apps
	apply_vg apps web 1 1 vm-operator-template 2
	wait_running apps web 2 120
	[ "$(vms apps web)" = "$(printf 'web-0\nweb-1')" ]
	kubectl scale vg web -n apps --replicas=4
	wait_running apps web 4 120
	[ "$(vms apps web)" = "$(printf 'web-0\nweb-1\nweb-2\nweb-3')" ]
	# The two the scale-up made hold the highest slots: they go first.
	kubectl scale vg web -n apps --replicas=2
	wait_running apps web 2 120
	[ "$(vms apps web)" = "$(printf 'web-0\nweb-1')" ]
	kubectl delete vg web -n apps --timeout=120s
	[ -z "$(vms apps web)" ]
	run govc find "$(folder_of apps web)"
	[ -z "$output" ] || [ "$status" -ne 0 ]
	# The leader reconciles; the other replica waits to lead.
	leader=$(leader_pod)
	kubectl -n "$SYS" logs "$leader" | grep -q '"msg":"reconciling VmGroups with'
	for pod in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name); do
		[ "$pod" = "pod/$leader" ] && continue
		run kubectl -n "$SYS" logs "$pod"
		[[ "$output" == *'"msg":"waiting to lead'* ]]
		[[ "$output" != *'"msg":"reconciling VmGroups with'* ]]
	done
}

# pod_ready POD: "true" or "false", the kubelet's view of its readiness.
pod_ready() {
	kubectl -n "$SYS" get pod "$1" -o 'jsonpath={.status.containerStatuses[0].ready}' 2>/dev/null
}

pod_not_ready() { [ "$(pod_ready "$1")" = false ]; }

@test "deploy: the kubelet's probes drive readiness: vcsim stopped, the leader goes NotReady and /readyz says why; started again, Ready" {
	leader=$(leader_pod)
	[ "$(pod_ready "$leader")" = true ]
	ip=$(kubectl -n "$SYS" get pod "$leader" -o 'jsonpath={.status.podIP}')
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim stop
	# Readiness every 10 s, three failures: NotReady within about 30 s.
	retry 120 pod_not_ready "$leader"
	run curl -s -w '\n%{http_code}' "http://$ip:8081/readyz"
	echo "$output"
	[ "${lines[-1]}" = 503 ]
	# It names the failing check, nothing of vCenter's URL or user.
	[[ "${lines[0]}" == "not ready: "*vcenter* ]]
	[[ "$output" != *"$VC_HOST_FROM_PODS"* ]]
	[[ "$output" != *"$VC_USER"* ]]
	# The kubelet's probe failing is what took it out, not a restart.
	[ "$(kubectl -n "$SYS" get pod "$leader" -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0 ]
	kubectl -n "$SYS" get events --field-selector "involvedObject.name=$leader" \
		-o 'jsonpath={range .items[*]}{.reason} {.message}{"\n"}{end}' | grep -q 'Readiness probe failed'
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
	retry 180 leader_ready
	[ "$(leader_pod)" = "$leader" ]
	run curl -s "http://$ip:8081/readyz"
	[ "$output" = ok ]
}

# holder_is_not POD: the Lease is held, by a pod other than POD.
holder_is_not() {
	local h
	h=$(leader_pod) && [ "$h" != "$1" ]
}

@test "deploy: the leader pod deleted, the other replica takes the Lease within lease duration + retry period (17 s) and goes on; no VM duplicated or lost" {
	apply_vg apps fo 1 1 vm-operator-template 3
	wait_running apps fo 3 120
	old=$(leader_pod)
	t0=$(date +%s%N)
	kubectl -n "$SYS" delete pod "$old" --wait=false
	retry 60 holder_is_not "$old"
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "# the other replica took the Lease $ms ms after the leader pod was deleted" >&3
	[ "$ms" -le 17000 ]
	# It goes on: a scale-up is done by the new leader, with exactly the
	# VMs there should be.
	kubectl scale vg fo -n apps --replicas=5
	wait_running apps fo 5 120
	[ "$(vms apps fo)" = "$(printf 'fo-0\nfo-1\nfo-2\nfo-3\nfo-4')" ]
	kubectl -n "$SYS" rollout status "$DEPLOY" --timeout=180s
	retry 120 replicas_running 2
	kubectl delete vg fo -n apps --timeout=120s
	[ -z "$(vms apps fo)" ]
}

@test "deploy: kubectl logs shows JSON lines and no secret" {
	for pod in $(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name); do
		run kubectl -n "$SYS" logs "$pod"
		[ "$status" -eq 0 ]
		[ "${#lines[@]}" -gt 0 ]
		# Every line is one JSON object.
		jq -e -s 'all(type == "object")' <<<"$output" >/dev/null
		[ "$(jq -c . <<<"$output" | wc -l)" = "${#lines[@]}" ]
		run grep -cF -- "$VC_PASS" <<<"$output"
		[ "$output" = 0 ]
	done
}

@test "deploy: Prometheus scrapes the metrics Service's address with a service-account token and reports it up; without a token, 401" {
	kubectl create namespace monitoring
	kubectl -n monitoring create serviceaccount prometheus
	# As the README shows.
	kubectl create clusterrolebinding prometheus-vmgroup-metrics \
		--clusterrole=vmgroup-operator-metrics-reader \
		--serviceaccount=monitoring:prometheus
	kubectl -n monitoring create token prometheus >"$BATS_TEST_TMPDIR/token"
	svc=$(kubectl -n "$SYS" get service vmgroup-operator-controller-manager-metrics-service \
		-o 'jsonpath={.spec.clusterIP}')
	[ -n "$svc" ]
	# The Service's address, through kube-proxy: no token, no metrics.
	run curl -sk -o /dev/null -w '%{http_code}' "https://$svc:8443/metrics"
	[ "$output" = 401 ]
	pick_port pport
	cat >"$BATS_TEST_TMPDIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: vmgroup-operator
    scheme: https
    authorization:
      credentials_file: $BATS_TEST_TMPDIR/token
    tls_config:
      insecure_skip_verify: true
    static_configs:
      - targets: ["$svc:8443"]
EOF
	setsid prometheus --config.file="$BATS_TEST_TMPDIR/prometheus.yml" \
		--storage.tsdb.path="$BATS_TEST_TMPDIR/tsdb" --web.listen-address="127.0.0.1:$pport" \
		</dev/null >>"$ENV_DIR/logs/prometheus-cluster.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/prometheus-cluster.pid"
	run retry 60 bash -c "[ \"\$(curl -sfG --data-urlencode 'query=up{job=\"vmgroup-operator\"}' http://127.0.0.1:$pport/api/v1/query | jq -r '.data.result[0].value[1]')\" = 1 ]"
	curl -sf "http://127.0.0.1:$pport/api/v1/targets" | jq -c '.data.activeTargets[] | {scrapeUrl, health, lastError}'
	kill "$(cat "$ENV_DIR/run/prometheus-cluster.pid")"
	rm -f "$ENV_DIR/run/prometheus-cluster.pid"
	kubectl delete clusterrolebinding prometheus-vmgroup-metrics
	[ "$status" -eq 0 ]
}

@test "deploy: VC_PASS rotated in the Secret with vCenter's password: the running pods log in with it, by the kubelet's update of the mounted file, with no restart" {
	pods=$(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name | sort)
	old=$VC_PASS
	new=$(openssl rand -hex 12)
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim stop
	(umask 077 && echo "$new" >"$ENV_DIR/vcsim/password")
	sed -i "s/^export VC_PASS=.*/export VC_PASS='$new'/" "$ENV_DIR/env"
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
	export VC_PASS=$new GOVC_PASSWORD=$new
	kubectl -n "$SYS" create secret generic vc-creds \
		--from-literal=VC_HOST="$VC_HOST_FROM_PODS" \
		--from-literal=VC_USER="$VC_USER" \
		--from-literal=VC_PASS="$new" --dry-run=client -o yaml | kubectl apply -f -
	t0=$SECONDS
	leader=$(leader_pod)
	retry 240 bash -c "kubectl -n $SYS logs $leader | grep -q 'the vCenter password in .* changed'"
	retry 120 leader_ready
	echo "# the leader logged in with the new password $((SECONDS - t0)) s after the Secret changed" >&3
	apply_vg apps rot 1 1 vm-operator-template 1
	wait_running apps rot 1 120
	# The same pods, never restarted.
	[ "$(kubectl -n "$SYS" get pods -l control-plane=controller-manager -o name | sort)" = "$pods" ]
	for pod in $pods; do
		[ "$(kubectl -n "$SYS" get "$pod" -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0 ]
		run kubectl -n "$SYS" logs "$pod"
		refute grep -qF -- "$old" <<<"$output"
		refute grep -qF -- "$new" <<<"$output"
	done
	kubectl delete vg rot -n apps --timeout=120s
}

@test "deploy: kubectl rollout restart in the middle of a scale-up from 0 to 10: exactly 10 VMs at the end, never more" {
	apply_vg apps burst 1 1 vm-operator-template 0
	wait_running apps burst 0 120
	# How many VMs vCenter shows, sampled all along.
	echo 0 >"$BATS_TEST_TMPDIR/max"
	(
		max=0
		while [ ! -e "$BATS_TEST_TMPDIR/stop" ]; do
			n=$(vm_count apps burst)
			if [ "$n" -gt "$max" ]; then
				max=$n
				echo "$max" >"$BATS_TEST_TMPDIR/max"
			fi
			sleep 0.3
		done
	) 3>&- &
	sampler=$!
	kubectl scale vg burst -n apps --replicas=10
	retry 120 bash -c "[ \"\$(cat '$BATS_TEST_TMPDIR/max')\" -ge 2 ]"
	kubectl -n "$SYS" rollout restart "$DEPLOY"
	kubectl -n "$SYS" rollout status "$DEPLOY" --timeout=240s
	wait_running apps burst 10 240
	touch "$BATS_TEST_TMPDIR/stop"
	wait "$sampler"
	echo "# at most $(cat "$BATS_TEST_TMPDIR/max") VMs were seen during the restart" >&3
	[ "$(cat "$BATS_TEST_TMPDIR/max")" -le 10 ]
	[ "$(vms apps burst)" = "$(printf 'burst-%s\n' 0 1 2 3 4 5 6 7 8 9)" ]
	retry 120 replicas_running 2
	retry 120 leader_ready
	kubectl delete vg burst -n apps --timeout=180s
	[ -z "$(vms apps burst)" ]
}

@test "deploy: make undeploy with VmGroups still there removes their VMs from vCenter, then the operator" {
	apply_vg apps db 1 1 vm-operator-template 2
	kubectl create namespace apps2
	apply_vg apps2 cache 1 1 vm-operator-template 1
	wait_running apps db 2 120
	wait_running apps2 cache 1 120
	make -C "$VMG_TOP" --no-print-directory undeploy
	# vCenter holds no VM of the operator's and no group folder.
	[ -z "$(vms apps db)$(vms apps2 cache)" ]
	run govc find /DC0/vm/vm-operator -type m
	[ -z "$output" ]
	run govc find /DC0/vm/vm-operator -type f -name '*_*'
	[ -z "$output" ]
	# The cluster holds nothing of the operator's.
	retry 120 refute kubectl get namespace "$SYS"
	run kubectl get crd vmgroups.vm.codeconnect.vmworld.com
	[ "$status" -ne 0 ]
	run bash -c "kubectl get clusterrole,clusterrolebinding -o name | grep vmgroup-operator"
	[ -z "$output" ]
}

# pods_say TEXT: an Event of the manager's pods or one's waiting container
# says TEXT.
pods_say() {
	{
		kubectl -n "$SYS" get events -o 'jsonpath={range .items[*]}{.message}{"\n"}{end}'
		kubectl -n "$SYS" get pods -l control-plane=controller-manager \
			-o 'jsonpath={range .items[*]}{.status.containerStatuses[0].state.waiting.message}{"\n"}{end}'
	} 2>/dev/null | grep -qF -- "$1"
}

@test "deploy: without vc-creds, or with vc-creds lacking VC_HOST, the pods say what is missing" {
	# Past make deploy's own check of the secret, to see what the pods say.
	DEPLOY_CHECK=0 make -C "$VMG_TOP" --no-print-directory deploy IMG="$IMG"
	retry 120 pods_say 'secret "vc-creds" not found'
	kubectl -n "$SYS" create secret generic vc-creds \
		--from-literal=VC_USER="$VC_USER" --from-literal=VC_PASS="$VC_PASS"
	retry 120 pods_say "couldn't find key VC_HOST in Secret $SYS/vc-creds"
	# No container ran: nothing could have started with half a configuration.
	[ -z "$(kubectl -n "$SYS" get pods -l control-plane=controller-manager \
		-o 'jsonpath={.items[*].status.containerStatuses[*].state.running}')" ]
	make -C "$VMG_TOP" --no-print-directory undeploy
	retry 120 refute kubectl get namespace "$SYS"
}
