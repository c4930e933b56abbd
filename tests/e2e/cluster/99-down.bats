#!/usr/bin/env bats
# hack/env/down on a cluster environment with a pod running: nothing of it
# stays on the machine. Last, since it takes the environment down (the
# runner's own down then has nothing left to do).

load cluster

@test "cluster: down leaves no process, mount, veth, bridge, iptables chain, cgroup or lock behind" {
	. "$ENV_DIR/cluster"
	restricted_namespace cl-down
	restricted_pod sleeper "$PAUSE_IMAGE" | kubectl -n "$NS" apply -f -
	wait_phase sleeper Running 90
	# What there is to clean: the pod's veth on the bridge, its mounts,
	# kube-proxy's chains, the kubepods cgroups.
	veth=$(ip -o link show master "$BRIDGE" | awk -F': ' '/veth/ { print $2 }' | cut -d@ -f1)
	[ -n "$veth" ]
	grep -q " $ENV_DIR/" /proc/self/mountinfo
	iptables-save -t nat | grep -q '^:KUBE-SERVICES'
	ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null | grep -q .

	"$VMG_TOP/hack/env/down" "$ENV_DIR"

	run grep " $ENV_DIR/" /proc/self/mountinfo
	[ "$status" -ne 0 ] || { echo "mounts left: $output"; return 1; }
	run ip link show "$BRIDGE"
	[ "$status" -ne 0 ]
	run ip link show "$veth"
	[ "$status" -ne 0 ]
	for ipt in iptables-save ip6tables-save; do
		run bash -c "$ipt | grep -E 'KUBE-|$CNI_NETWORK'"
		[ -z "$output" ] || { echo "$ipt left: $output"; return 1; }
	done
	run bash -c 'ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods* 2>/dev/null'
	[ -z "$output" ] || { echo "cgroups left: $output"; return 1; }
	run pgrep -f "$ENV_DIR/"
	[ "$status" -ne 0 ] || { echo "processes left: $output"; return 1; }
	[ ! -e /run/lock/vmgroup-operator-cluster ]
	run bash -c "ls /var/lib/cni/results | grep -f <(ls '$ENV_DIR/containerd/root/io.containerd.grpc.v1.cri/sandboxes' 2>/dev/null) -"
	[ -z "$output" ] || { echo "CNI results left: $output"; return 1; }
}
