# tests/e2e/cluster/cluster.bash: what the cluster suites share, on top of
# tests/e2e/helpers.bash. The environment is hack/env/up --cluster's.
# shellcheck disable=SC1091
. "$BATS_TEST_DIRNAME/../helpers.bash"

# restricted_namespace NAME: a namespace that enforces the restricted pod
# security standard, in $NS.
restricted_namespace() {
	NS=$1
	kubectl create namespace "$NS" >/dev/null
	kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted >/dev/null
	export NS
}

# restricted_pod NAME IMAGE [ARG...]: the manifest of a pod that the
# restricted standard admits (non-root, read-only root, no capabilities),
# running IMAGE, never pulled, with ARGs.
restricted_pod() {
	local name=$1 image=$2 args='' a
	shift 2
	for a in "$@"; do args="$args\"$a\", "; done
	cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $name
spec:
  restartPolicy: Never
  dnsPolicy: Default
  securityContext:
    runAsNonRoot: true
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: main
    image: $image
    imagePullPolicy: ${PULL_POLICY:-Never}
    args: [${args%, }]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: [ALL]
YAML
}

# pod_phase NAME: the pod's phase in $NS.
pod_phase() { jsonpath "pod/$1" '{.status.phase}' 2>/dev/null; }

# phase_is NAME PHASE: whether the pod is in PHASE.
phase_is() { [ "$(pod_phase "$1")" = "$2" ]; }

# wait_phase NAME PHASE SECONDS: until the pod is in PHASE; on time out,
# shows the pod for the failure's message.
wait_phase() {
	if ! retry "$3" phase_is "$1" "$2"; then
		kubectl -n "$NS" describe pod "$1" | tail -n 20 >&2
		return 1
	fi
}
