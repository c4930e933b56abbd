# hack/env/cluster.sh: the one-node cluster that `hack/env/up --cluster`
# adds to the servers of lib.sh, the same components as Kubernetes'
# hack/local-up-cluster.sh runs as local processes: containerd (Debian's,
# with runc), kube-controller-manager, kube-scheduler, kubelet, kube-proxy
# (iptables mode), pod networking with Debian's CNI plugins (bridge,
# host-local, loopback, portmap) and a local image registry (Debian's
# docker-registry). Sourced after lib.sh, not run.
#
# Where things are, all under DIR unless said otherwise:
#   DIR/containerd/   containerd's config, root, state (the pods' network
#                     namespaces included) and socket
#   DIR/kubelet/      the kubelet's root dir; DIR/pod-logs its pod logs
#   DIR/cni/          the CNI configuration and host-local's leases
#   DIR/registry/     the registry's storage (fresh at every up)
#   DIR/cluster       CLUSTER_ID, NODE_NAME, BRIDGE, POD_CIDR, GATEWAY
# Outside DIR, and removed by down: the bridge BRIDGE and the pods' veths,
# the cgroups /sys/fs/cgroup/[*/]kubepods, kube-proxy's and the kubelet's
# iptables chains, /var/log/containers links into DIR, and the lock below.
#
# One cluster environment per machine: kube-proxy's and the kubelet's
# iptables chains (KUBE-SERVICES, ...) and the kubepods cgroups have fixed,
# machine-wide names. A second `up --cluster` refuses while the first is up
# (the lock names its DIR); plain environments run beside it.

cluster_lock=${VMGROUP_CLUSTER_LOCK:-/run/lock/vmgroup-operator-cluster}

kctl() { "$(tool kubectl)" --kubeconfig "$D/kubeconfig" "$@"; }

# cluster_lock_take: the machine's one cluster environment is this one.
# With CLUSTER_LOCK_WAIT=SECONDS, waits that long for another one to go
# first (the test runner does, so that two runs on one machine queue).
cluster_lock_take() {
	local owner end=$((SECONDS + ${CLUSTER_LOCK_WAIT:-0})) said=0
	mkdir -p "$(dirname "$cluster_lock")"
	while ! mkdir "$cluster_lock" 2>/dev/null; do
		owner=$(cat "$cluster_lock/dir" 2>/dev/null || true)
		if [ -n "$owner" ] && [ "$owner" != "$D" ] && cluster_owner_alive "$owner"; then
			if [ "$SECONDS" -lt "$end" ]; then
				[ "$said" = 1 ] || say "waiting up to ${CLUSTER_LOCK_WAIT}s for the cluster environment in $owner to go"
				said=1
				sleep 2
				continue
			fi
			die "a cluster environment is already up in $owner, and only one can run on a" \
				"machine (kube-proxy's iptables chains and the kubepods cgroups are" \
				"machine-wide): hack/env/down $owner first"
		fi
		# The owner went without down, or it is this DIR again (or the lock
		# is being made right now: its dir is written next).
		[ -n "$owner" ] || { sleep 1; owner=$(cat "$cluster_lock/dir" 2>/dev/null || true); }
		if [ -z "$owner" ] || [ "$owner" = "$D" ] || ! cluster_owner_alive "$owner"; then
			rm -rf "$cluster_lock"
		fi
	done
	echo "$$" >"$cluster_lock/pid"
	echo "$D" >"$cluster_lock/dir"
}

# cluster_owner_alive DIR: the lock's owner is starting (its up runs) or up.
cluster_owner_alive() {
	local f pid
	for f in "$cluster_lock/pid" "$1/run/kubelet.pid" "$1/run/containerd.pid" "$1/run/kube-apiserver.pid"; do
		pid=$(cat "$f" 2>/dev/null || true)
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && return 0
	done
	return 1
}

cluster_lock_release() {
	[ "$(cat "$cluster_lock/dir" 2>/dev/null)" = "$D" ] && rm -rf "$cluster_lock"
	return 0
}

# cluster_plan: names and addresses of this environment, kept in
# DIR/cluster so that down and restart find them. The pod network is a /24
# of 10.244.0.0/16 that no route of the machine covers; its first address
# is the bridge's, the node's and the one the API server and vcsim listen
# on, so that pods reach them.
cluster_plan() {
	local id n i
	id=$(printf '%s' "$D" | sha256sum | cut -c1-6)
	n=$((16#${id:0:2}))
	for i in $(seq 0 255); do
		if ! ip -4 route show | grep -q "^10\.244\.$(((n + i) % 256))\."; then
			n=$(((n + i) % 256))
			break
		fi
		[ "$i" -lt 255 ] || die "no free /24 in 10.244.0.0/16 for the pod network"
	done
	cat >"$D/cluster" <<EOF
CLUSTER_ID=$id
NODE_NAME=vmgroup-node-$id
BRIDGE=vmgbr-$id
CNI_NETWORK=vmgroup-$id
POD_CIDR=10.244.$n.0/24
GATEWAY=10.244.$n.1
EOF
}

load_cluster() {
	# shellcheck disable=SC1091
	. "$D/cluster"
}

# cluster_bridge: the pods' bridge, made here rather than by the CNI plugin,
# so that the servers can listen on its address before any pod exists.
cluster_bridge() {
	load_cluster
	ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge ||
		die "cannot create the bridge $BRIDGE"
	ip addr replace "$GATEWAY/24" dev "$BRIDGE" || die "cannot address the bridge $BRIDGE"
	ip link set "$BRIDGE" up
}

# cluster_certs: a client certificate for each component, named as RBAC's
# default bindings expect, and the kubeconfigs that use them.
cluster_certs() {
	load_cluster
	make_cert kubelet ca "/O=system:nodes/CN=system:node:$NODE_NAME" -
	make_cert kube-proxy ca /CN=system:kube-proxy -
	make_cert kube-scheduler ca /CN=system:kube-scheduler -
	make_cert kube-controller-manager ca /CN=system:kube-controller-manager -
	make_cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" -
	chmod 600 "$pki"/*.key
	local c
	for c in kubelet kube-proxy kube-scheduler kube-controller-manager; do
		write_kubeconfig "$D/$c.kubeconfig" "$c"
	done
}

# write_kubeconfig FILE CERT: a kubeconfig for the client certificate CERT.
write_kubeconfig() {
	local b64ca b64crt b64key
	b64ca=$(base64 -w0 <"$D/pki/ca.crt")
	b64crt=$(base64 -w0 <"$D/pki/$2.crt")
	b64key=$(base64 -w0 <"$D/pki/$2.key")
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vmgroup-test
  cluster:
    server: https://$APISERVER_HOST:$APISERVER_PORT
    certificate-authority-data: $b64ca
users:
- name: $2
  user:
    client-certificate-data: $b64crt
    client-key-data: $b64key
contexts:
- name: vmgroup-test
  context:
    cluster: vmgroup-test
    user: $2
current-context: vmgroup-test
EOF
	chmod 600 "$1"
}

start_registry() {
	load_ports
	mkdir -p "$D/registry/data"
	cat >"$D/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $D/registry/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REGISTRY_PORT
EOF
	launch registry /usr/bin/docker-registry serve "$D/registry/config.yml"
	wait_for registry 20 curl -sf "http://127.0.0.1:$REGISTRY_PORT/v2/"
}

ctr_env() { ctr --address "$D/containerd/containerd.sock" --namespace k8s.io "$@"; }

start_containerd() {
	load_ports
	load_cluster
	local c=$D/containerd pause
	pause=$("$envlib_here/images/build" ref pause)
	mkdir -p "$c/root" "$c/state" "$c/opt" "$c/certs.d/127.0.0.1:$REGISTRY_PORT" \
		"$D/cni/net.d" "$D/cni/ipam"
	cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
oom_score = 0

[grpc]
  address = "$c/containerd.sock"

[ttrpc]
  address = "$c/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause"
  # Root here lacks CAP_SYS_RESOURCE: runc may not raise oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$c/certs.d"
EOF
	# Images named 127.0.0.1:PORT/... come from the local registry, over HTTP.
	cat >"$c/certs.d/127.0.0.1:$REGISTRY_PORT/hosts.toml" <<EOF
server = "http://127.0.0.1:$REGISTRY_PORT"

[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
EOF
	# No masquerading: pods talk to this machine's servers only.
	cat >"$D/cni/net.d/10-vmgroup.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$GATEWAY" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$D/cni/ipam"
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
	launch containerd /usr/bin/containerd --config "$c/config.toml"
	wait_for containerd 30 ctr_env version
	# The sandbox image and the tests' probe: never pulled, imported.
	local img
	for img in pause incluster; do
		ctr_env images import "$("$envlib_here/images/build" "$img")" >>"$D/logs/containerd.log" 2>&1 ||
			fail containerd "importing the $img image"
	done
}

start_kube_controller_manager() {
	load_ports
	launch kube-controller-manager "$(tool kube-controller-manager)" \
		--kubeconfig "$D/kube-controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
		--leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$D/pki/sa.key" \
		--root-ca-file "$D/pki/ca.crt" \
		--cluster-signing-cert-file "$D/pki/ca.crt" --cluster-signing-key-file "$D/pki/ca.key" \
		--controllers serviceaccount-token-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,namespace-controller,deployment-controller,replicaset-controller,node-lifecycle-controller,clusterrole-aggregation-controller,garbage-collector-controller,endpoints-controller,endpointslice-controller,pod-garbage-collector-controller,horizontal-pod-autoscaler-controller \
		--concurrent-gc-syncs 5 --v 1
	wait_for kube-controller-manager 60 curl -sk "https://127.0.0.1:$KCM_PORT/healthz"
}

start_kube_scheduler() {
	load_ports
	launch kube-scheduler "$(tool kube-scheduler)" \
		--kubeconfig "$D/kube-scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" \
		--leader-elect=false --v 1
	wait_for kube-scheduler 60 curl -sk "https://127.0.0.1:$SCHEDULER_PORT/healthz"
}

start_kubelet() {
	load_ports
	load_cluster
	mkdir -p "$D/kubelet" "$D/pod-logs"
	cat >"$D/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $GATEWAY
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $D/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$D/containerd/containerd.sock
podLogsDir: $D/pod-logs
resolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "2%"
  imagefs.available: "2%"
imageGCHighThresholdPercent: 100
protectKernelDefaults: false
registerNode: true
maxPods: 60
EOF
	launch kubelet "$(tool kubelet)" --config "$D/kubelet.yaml" \
		--kubeconfig "$D/kubelet.kubeconfig" \
		--root-dir "$D/kubelet" --cert-dir "$D/kubelet/pki" \
		--hostname-override "$NODE_NAME" --node-ip "$GATEWAY" \
		--pod-infra-container-image "$("$envlib_here/images/build" ref pause)" \
		--v 1
	wait_for kubelet 60 curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
}

start_kube_proxy() {
	load_ports
	load_cluster
	cat >"$D/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $D/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: ["$GATEWAY/32"]
iptables:
  localhostNodePorts: false
  syncPeriod: 10s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
	launch kube-proxy "$(tool kube-proxy)" --config "$D/kube-proxy.yaml" --v 1
	wait_for kube-proxy 60 curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/livez"
}

# node_ready: the node's Ready condition, "True" when ready.
node_ready() {
	kctl get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null
}

# node_taints: the node's taints (the kubelet registers it with not-ready,
# which kube-controller-manager's node lifecycle controller lifts).
node_taints() {
	kctl get node "$NODE_NAME" -o jsonpath='{.spec.taints}' 2>/dev/null
}

# wait_node_ready SECONDS: the node registers, is Ready and untainted, and namespace
# default has what pods need (its service account, kube-root-ca.crt).
wait_node_ready() {
	local secs=$1 i c why
	load_cluster
	for i in $(seq 1 "$secs"); do
		for c in containerd kubelet kube-proxy kube-scheduler kube-controller-manager; do
			alive "$c" || fail "$c" "exited while the node was coming up"
		done
		if [ "$(node_ready)" = True ] && [ -z "$(node_taints)" ] &&
			kctl -n default get serviceaccount default >/dev/null 2>&1 &&
			kctl -n default get configmap kube-root-ca.crt >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	why=$(kctl get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].message}' 2>&1 || true)
	if [ "$(node_ready)" != True ]; then
		fail kubelet "node $NODE_NAME not Ready after ${secs}s: ${why:-not registered}"
	fi
	[ -z "$(node_taints)" ] ||
		fail kube-controller-manager "node $NODE_NAME still tainted after ${secs}s: $(node_taints)"
	fail kube-controller-manager "namespace default has no service account or kube-root-ca.crt after ${secs}s"
}

start_cluster() {
	start_registry
	start_containerd
	start_kube_controller_manager
	start_kube_scheduler
	start_kubelet
	start_kube_proxy
	wait_node_ready 120
}

# cluster_down: stops the node's components and removes what they left
# outside DIR. Safe to run more than once and on a half-started cluster.
cluster_down() {
	[ -f "$D/cluster" ] || return 0
	load_cluster
	local c id pid f ids=()
	# The node's components (the kubelet, so that it restarts nothing), all
	# at once; then every container.
	for c in kubelet kube-proxy kube-scheduler kube-controller-manager registry; do
		stop "$c" &
	done
	wait
	if alive containerd; then
		mapfile -t ids < <(ctr_env containers ls -q 2>/dev/null)
		for id in $(ctr_env tasks ls -q 2>/dev/null); do
			ctr_env tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_env tasks ls -q 2>/dev/null); do
			for f in $(seq 1 50); do
				ctr_env tasks delete "$id" >/dev/null 2>&1 && break
				sleep 0.1
			done
		done
	fi
	# containerd takes seconds to close its connections; nothing of it is
	# kept once its containers are gone.
	stop containerd 2
	# Whatever outlived that: container processes in the pods' cgroups, and
	# shims of this containerd.
	for f in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$f" ] || continue
		find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
	for f in /proc/[0-9]*/cmdline; do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		if { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q "^/usr/bin/containerd-shim.* -address $D/containerd/containerd.sock"; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	# Mounts under DIR (rootfs, shm, projected volumes, network namespaces),
	# the deepest first.
	for f in $(seq 1 5); do
		mapfile -t mounts < <(awk -v d="$D/" 'index($5, d) == 1 { print length($5), $5 }' /proc/self/mountinfo |
			sort -rn | cut -d' ' -f2-)
		[ ${#mounts[@]} -eq 0 ] && break
		for m in "${mounts[@]}"; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
	done
	# The network: the pods' veths go with their namespaces; any left on the
	# bridge, and the bridge.
	for f in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
		ip link del "$f" 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	# libcni's cache of results, for the sandboxes that had no CNI DEL.
	for id in "${ids[@]}"; do
		rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null || true
	done
	find /var/log/containers -maxdepth 1 -lname "$D/*" -delete 2>/dev/null || true
	# kube-proxy removes its own chains; the kubelet's are removed here.
	"$(tool kube-proxy)" --cleanup >>"$D/logs/kube-proxy.log" 2>&1 || true
	cluster_iptables_clean
	# The pods' cgroups, the deepest first (cgroup v1's hierarchies, or v2's).
	for f in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods*; do
		[ -d "$f" ] || continue
		find "$f" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	cluster_lock_release
}

# cluster_iptables_clean: the kubelet's and kube-proxy's chains, in every
# table, for IPv4 and IPv6; nothing else of the machine's rules.
cluster_iptables_clean() {
	local ipt table chain rule
	for ipt in iptables ip6tables; do
		command -v "$ipt" >/dev/null 2>&1 || continue
		for table in filter nat mangle; do
			# Rules in the built-in chains that jump to a KUBE- chain.
			"$ipt-save" -t "$table" 2>/dev/null | { grep -E '^-A [A-Z]+ .*-j KUBE-' || true; } |
				{ grep -vE '^-A KUBE-' || true; } | while read -r rule; do
				eval "\"\$ipt\" -t \"\$table\" ${rule/-A/-D}" 2>/dev/null || true
			done
			for chain in $("$ipt-save" -t "$table" 2>/dev/null | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p'); do
				"$ipt" -t "$table" -F "$chain" 2>/dev/null || true
			done
			for chain in $("$ipt-save" -t "$table" 2>/dev/null | sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p'); do
				"$ipt" -t "$table" -X "$chain" 2>/dev/null || true
			done
		done
	done
}
