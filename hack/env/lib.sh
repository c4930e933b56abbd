# hack/env/lib.sh: what up, down and restart share: where things live in
# DIR, how each component is started and stopped, and how to wait for it.
# Sourced, not run.

envlib_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { printf 'env: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# fail NAME MSG: a component failed; say which and where its log is.
fail() {
	local name=$1
	shift
	say "$name failed: $*"
	if [ -f "$D/logs/$name.log" ]; then
		say "last lines of $D/logs/$name.log:"
		tail -n 15 "$D/logs/$name.log" | sed 's/^/    /' >&2
	fi
	exit 1
}

tool() { "$envlib_here/tools" path "$1"; }

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000)) # below the ephemeral range
		if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
			if ! grep -qx "$p" "$D/ports.used" 2>/dev/null; then
				echo "$p" >>"$D/ports.used"
				echo "$p"
				return 0
			fi
		fi
	done
	die "no free port found on 127.0.0.1"
}

# Ports are chosen once, at up, and kept in DIR/ports so that a restart
# comes back on the same port.
# APISERVER_HOST and VCSIM_HOST are where those listen: 127.0.0.1, or in a
# cluster environment the pod bridge's address (cluster.sh).
load_ports() {
	APISERVER_HOST=127.0.0.1 VCSIM_HOST=127.0.0.1 CLUSTER=0
	# shellcheck disable=SC1091
	. "$D/ports"
}

pid_of() { cat "$D/run/$1.pid" 2>/dev/null || true; }

alive() {
	local pid
	pid=$(pid_of "$1")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# launch NAME CMD...: starts CMD in its own session, logging to
# DIR/logs/NAME.log, and records its pid.
launch() {
	local name=$1
	shift
	mkdir -p "$D/logs" "$D/run"
	# Not inheriting the caller's other descriptors (bats holds fds 3 and 4 open).
	setsid "$@" </dev/null >>"$D/logs/$name.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	echo $! >"$D/run/$name.pid"
}

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (10).
stop() {
	local name=$1 secs=${2:-10} pid i
	pid=$(pid_of "$name")
	[ -n "$pid" ] || return 0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 $((secs * 10))); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
	fi
	rm -f "$D/run/$name.pid"
}

# wait_for NAME SECONDS CMD...: until CMD succeeds, or the component died,
# or the time is up.
wait_for() {
	local name=$1 secs=$2 i
	shift 2
	for i in $(seq 1 $((secs * 10))); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		alive "$name" || fail "$name" "exited while starting"
		sleep 0.1
	done
	fail "$name" "not ready after ${secs}s"
}

start_etcd() {
	load_ports
	mkdir -p "$D/etcd"
	launch etcd "$(tool etcd)" --name default --data-dir "$D/etcd/data" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" \
		--listen-metrics-urls "" --log-level warn --unsafe-no-fsync \
		--quota-backend-bytes 4294967296
	wait_for etcd 20 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
}

start_kube_apiserver() {
	local cluster=(--authorization-mode RBAC)
	load_ports
	# A node's kubelet: the Node authorizer and NodeRestriction for it, and
	# a client certificate to reach it (logs, exec).
	[ "$CLUSTER" = 1 ] && cluster=(--authorization-mode Node,RBAC
		--enable-admission-plugins NodeRestriction
		--kubelet-preferred-address-types InternalIP
		--kubelet-client-certificate "$D/pki/apiserver-kubelet-client.crt"
		--kubelet-client-key "$D/pki/apiserver-kubelet-client.key")
	launch kube-apiserver "$(tool kube-apiserver)" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address "$APISERVER_HOST" --advertise-address "$APISERVER_HOST" \
		--secure-port "$APISERVER_PORT" \
		--cert-dir "$D/apiserver" \
		--tls-cert-file "$D/pki/apiserver.crt" --tls-private-key-file "$D/pki/apiserver.key" \
		--client-ca-file "$D/pki/ca.crt" \
		"${cluster[@]}" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$D/pki/sa.pub" \
		--service-account-signing-key-file "$D/pki/sa.key" \
		--api-audiences https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range 10.96.0.0/16 \
		--allow-privileged --profiling=false --watch-cache=true \
		--v 1
	wait_for kube-apiserver 60 curl -sf --cacert "$D/pki/ca.crt" \
		--cert "$D/pki/admin.crt" --key "$D/pki/admin.key" \
		"https://$APISERVER_HOST:$APISERVER_PORT/readyz"
}

# The benchmarks' settings, from the environment of up or restart:
# VCSIM_TASK_DELAYS and VCSIM_METHOD_DELAYS ("CloneVM_Task=5000,..."
# milliseconds per task or per call), VCSIM_DELAY_JITTER (stddev/mean).
# VCSIM_DEBUG_PORT (chosen at up) serves pprof and the count of requests by
# method on 127.0.0.1 (hack/env/go/vcsim/main.go). While the file
# DIR/vcsim/login-fault exists, the operator's Logins are answered with the
# SOAP fault it names (tests/e2e/55-faults.bats); while DIR/vcsim/method-delays
# exists, the calls it names take that long ("WaitForUpdatesEx=3000":
# tests/e2e/30-vsphere.bats).
start_vcsim() {
	local load=() opt=()
	load_ports
	mkdir -p "$D/vcsim"
	[ -d "$D/vcsim/state" ] && load=(-load "$D/vcsim/state")
	[ -z "${VCSIM_DEBUG_PORT:-}" ] || opt+=(-debug-addr "127.0.0.1:$VCSIM_DEBUG_PORT")
	[ -z "${VCSIM_TASK_DELAYS:-}" ] || opt+=(-task-delays "$VCSIM_TASK_DELAYS")
	[ -z "${VCSIM_METHOD_DELAYS:-}" ] || opt+=(-method-delays "$VCSIM_METHOD_DELAYS")
	[ -z "${VCSIM_DELAY_JITTER:-}" ] || opt+=(-delay-jitter "$VCSIM_DELAY_JITTER")
	rm -f "$D/vcsim/url"
	# vcsim's datastores live in a temporary directory, which a vcsim killed
	# before its cleanup leaves behind: in DIR, not in /tmp.
	mkdir -p "$D/vcsim/tmp"
	launch vcsim env TMPDIR="$D/vcsim/tmp" "$(tool vcsim)" -l "$VCSIM_HOST:$VCSIM_PORT" \
		-username "$(cat "$D/vcsim/user")" -password-file "$D/vcsim/password" \
		-tlscert "$D/pki/vcsim.crt" -tlskey "$D/pki/vcsim.key" \
		-url-file "$D/vcsim/url" -login-fault-file "$D/vcsim/login-fault" \
		-method-delays-file "$D/vcsim/method-delays" -method-faults-file "$D/vcsim/method-faults" \
		"${load[@]}" "${opt[@]}"
	wait_for vcsim 30 test -s "$D/vcsim/url"
}

# govc_env: runs govc against the environment's vcsim with the admin user.
govc_env() {
	load_ports
	GOVC_URL="https://$VCSIM_HOST:$VCSIM_PORT/sdk" GOVC_USERNAME="$(cat "$D/vcsim/user")" \
		GOVC_PASSWORD="$(cat "$D/vcsim/password")" GOVC_INSECURE=1 \
		GOVC_PERSIST_SESSION=false "$(tool govc)" "$@"
}

# save_vcsim: saves vcsim's inventory so that a restart keeps it.
save_vcsim() {
	rm -rf "$D/vcsim/state.new"
	govc_env object.save -d "$D/vcsim/state.new" >>"$D/logs/vcsim.log" 2>&1 ||
		fail vcsim "saving the inventory before restart"
	rm -rf "$D/vcsim/state"
	mv "$D/vcsim/state.new" "$D/vcsim/state"
}
