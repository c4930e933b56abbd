#!/usr/bin/env bats
# The probe and metrics servers under the attacks of issue 13, against the
# real manager started as config/manager/manager.yaml starts it: probes on
# all interfaces (":PORT", plain HTTP), metrics on all interfaces over HTTPS
# with TokenReview authentication, leader election on (free ports here
# instead of 8081 and 8443). Attackers are small python3 clients.

load helpers
load manager

NAME=limits-manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	new_namespace
	echo "$NS" >"$BATS_FILE_TMPDIR/ns"
	pick_port mport
	pick_port pport "$mport"
	echo "$mport" >"$ENV_DIR/run/$NAME.metrics-port"
	echo "$pport" >"$ENV_DIR/run/$NAME.probe-port"
	setsid "$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
		--leader-elect --leader-election-namespace "$NS" --watch-namespace "$NS" \
		--metrics-bind-address=":$mport" --health-probe-bind-address=":$pport" \
		</dev/null >>"$ENV_DIR/logs/$NAME.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/$NAME.pid"
	retry 20 curl -sf "http://127.0.0.1:$pport/healthz" >/dev/null
	write_attackers
}

teardown_file() {
	stop_manager "$NAME"
	kubectl delete namespace "$(cat "$BATS_FILE_TMPDIR/ns")" --wait=false >/dev/null 2>&1 || true
}

setup() {
	MPORT=$(cat "$ENV_DIR/run/$NAME.metrics-port")
	PPORT=$(cat "$ENV_DIR/run/$NAME.probe-port")
	PID=$(cat "$ENV_DIR/run/$NAME.pid")
}

teardown() {
	local f
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] || continue
		kill "$(cat "$f")" 2>/dev/null || true
	done
}

# write_attackers writes the attacking clients into $BATS_FILE_TMPDIR.
write_attackers() {
	# flood.py PORT SECONDS [tls]: pipelined GET /healthz requests, back to
	# back, on one connection whose answers are never read; a connection the
	# server closes is replaced. Prints the bytes sent.
	cat >"$BATS_FILE_TMPDIR/flood.py" <<'EOF'
import signal, socket, ssl, sys, time
port, secs, tls = int(sys.argv[1]), float(sys.argv[2]), len(sys.argv) > 3
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
def stop(*_):
    print(sent, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
end, sent = time.time() + secs, 0
s = None
while time.time() < end:
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
        if tls:
            s = ctx.wrap_socket(s)
        s.settimeout(0.2)
        while time.time() < end:
            try:
                sent += s.send(req)
            except socket.timeout:
                pass
    except (OSError, ssl.SSLError):
        time.sleep(0.05)
    finally:
        s.close()
print(sent)
EOF
	# hold.py PORT N READY [tls]: N keep-alive connections, each sends a
	# request and reads its answer, then stays idle (one request every
	# 50 s, as the attack had it). Writes READY once all are set up.
	cat >"$BATS_FILE_TMPDIR/hold.py" <<'EOF'
import socket, ssl, sys, time
port, n, ready, tls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], len(sys.argv) > 4
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    if tls:
        s = ctx.wrap_socket(s)
    s.sendall(req)
    s.recv(4096)
    return s
conns = []
for i in range(n):
    try:
        conns.append(one())
    except (OSError, ssl.SSLError):
        pass
with open(ready, "w") as f:
    f.write("%d\n" % len(conns))
while True:
    time.sleep(50)
    for s in conns:
        try:
            s.sendall(req)
            s.recv(4096)
        except OSError:
            pass
EOF
	# partial.py PORT READY: the start of a request, never finished, on 8
	# connections from each of 127.0.0.1 (the kubelet's address, on a node)
	# and 127.0.0.2-4 (32 in all, every slot of the probe server); each one
	# the server closes is replaced at once. Writes READY once all are up,
	# and on SIGTERM prints how many connections it made.
	cat >"$BATS_FILE_TMPDIR/partial.py" <<'EOF'
import select, signal, socket, sys, time
port, ready = int(sys.argv[1]), sys.argv[2]
head = b"GET /healthz HTTP/1.1\r\n"
made = 0
def stop(*_):
    print(made, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
def one(src):
    global made
    s = socket.socket()
    s.settimeout(2)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(head)
    made += 1
    return s
slots = [[src, None] for src in ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4") for _ in range(8)]
first = True
while True:
    for slot in slots:
        if slot[1] is None:
            try:
                slot[1] = one(slot[0])
            except OSError:
                slot[1] = None
    if first:
        with open(ready, "w") as f:
            f.write("%d\n" % sum(1 for s in slots if s[1]))
        first = False
    socks = [s[1] for s in slots if s[1]]
    r, _, _ = select.select(socks, [], [], 0.05)
    for slot in slots:
        if slot[1] in r:
            try:
                gone = slot[1].recv(4096) == b""
            except OSError:
                gone = True
            if gone:
                slot[1].close()
                slot[1] = None
EOF
}

# rss_kib PID: the process's resident memory, in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# probe_ok: /healthz answers 200 on a new connection within a second, as
# the kubelet's liveness probe needs.
probe_ok() { curl -sf --max-time 1 "http://127.0.0.1:$PPORT/healthz" >/dev/null; }

@test "limits: the probes are read only: another method is answered 405 with Allow" {
	run curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PPORT/healthz"
	[ "$output" = 405 ]
	run curl -s -D - -o /dev/null -X DELETE "http://127.0.0.1:$PPORT/readyz"
	[[ "$output" == *"HTTP/1.1 405"* ]]
	grep -qi '^allow: GET, HEAD' <<<"$output"
	probe_ok
}

@test "limits: pipelined requests never read do not grow memory, and probes still answer" {
	python3 "$BATS_FILE_TMPDIR/flood.py" "$PPORT" 10 >"$BATS_TEST_TMPDIR/probe.sent" 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/flood-probe.pid"
	python3 "$BATS_FILE_TMPDIR/flood.py" "$MPORT" 10 tls >"$BATS_TEST_TMPDIR/metrics.sent" 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/flood-metrics.pid"
	local max=0 rss fails=0 probes=0 end=$((SECONDS + 11))
	while [ "$SECONDS" -lt "$end" ]; do
		rss=$(rss_kib "$PID") || break
		[ "$rss" -le "$max" ] || max=$rss
		# Past the bound the test has failed: stop before the machine suffers.
		[ "$max" -lt $((64 * 1024)) ] || break
		probes=$((probes + 1))
		probe_ok || fails=$((fails + 1))
		sleep 0.3
	done
	local pids
	pids="$(cat "$BATS_TEST_TMPDIR/flood-probe.pid") $(cat "$BATS_TEST_TMPDIR/flood-metrics.pid")"
	# shellcheck disable=SC2086
	kill $pids 2>/dev/null || true
	# shellcheck disable=SC2086
	wait $pids || true
	echo "# peak VmRSS ${max} KiB; $fails of $probes probes failed; sent $(cat "$BATS_TEST_TMPDIR/probe.sent") bytes to probes, $(cat "$BATS_TEST_TMPDIR/metrics.sent") to metrics" >&3
	# The floods did send (hundreds of MB unbounded), and were held back.
	[ "$(cat "$BATS_TEST_TMPDIR/probe.sent")" -gt 1000000 ]
	kill -0 "$PID"
	[ "$max" -lt $((64 * 1024)) ]
	[ "$fails" -eq 0 ]
	probe_ok
}

@test "limits: idle keep-alive connections holding every slot do not lock out the probe" {
	python3 "$BATS_FILE_TMPDIR/hold.py" "$PPORT" 40 "$BATS_TEST_TMPDIR/ready" </dev/null >/dev/null 2>&1 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/hold.pid"
	retry 30 test -s "$BATS_TEST_TMPDIR/ready"
	echo "# $(cat "$BATS_TEST_TMPDIR/ready") idle connections set up" >&3
	local i t0 ms
	for i in 1 2 3 4 5; do
		t0=$(date +%s%N)
		probe_ok
		ms=$((($(date +%s%N) - t0) / 1000000))
		echo "# probe $i answered in $ms ms" >&3
		[ "$ms" -lt 1000 ]
	done
	# The metrics port is its own server: 70 idle connections there leave
	# the probe port alone.
	python3 "$BATS_FILE_TMPDIR/hold.py" "$MPORT" 70 "$BATS_TEST_TMPDIR/ready-metrics" tls </dev/null >/dev/null 2>&1 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/hold-metrics.pid"
	retry 30 test -s "$BATS_TEST_TMPDIR/ready-metrics"
	probe_ok
	kill -0 "$PID"
}

@test "limits: partial requests holding every slot do not lock out the probe" {
	python3 "$BATS_FILE_TMPDIR/partial.py" "$PPORT" "$BATS_TEST_TMPDIR/ready" </dev/null >"$BATS_TEST_TMPDIR/made" 2>&1 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/partial.pid"
	retry 30 test -s "$BATS_TEST_TMPDIR/ready"
	echo "# $(cat "$BATS_TEST_TMPDIR/ready") connections with a partial request set up" >&3
	[ "$(cat "$BATS_TEST_TMPDIR/ready")" -eq 32 ]
	# Probes from 127.0.0.1 (the attacked address, at its cap) for 6 s:
	# past the header timeout, while the attacker reconnects.
	local i t0 ms fails=0 out
	for i in $(seq 1 12); do
		t0=$(date +%s%N)
		out=$(curl -s --max-time 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PPORT/healthz") || true
		[ "$out" = 200 ] || fails=$((fails + 1))
		ms=$((($(date +%s%N) - t0) / 1000000))
		echo "# probe $i: $out in $ms ms" >&3
		sleep 0.5
	done
	local pid
	pid=$(cat "$BATS_TEST_TMPDIR/partial.pid")
	kill -0 "$pid"
	kill "$pid"
	wait "$pid" || true
	echo "# $fails of 12 probes failed; the attacker made $(cat "$BATS_TEST_TMPDIR/made") connections" >&3
	[ "$fails" -eq 0 ]
	# The attacker's connections were cut and replaced, not kept for 10 s.
	[ "$(cat "$BATS_TEST_TMPDIR/made")" -gt 32 ]
	kill -0 "$PID"
}

# new_cert DIR NAME: a self-signed certificate for localhost, DIR/NAME.crt
# and DIR/NAME.key.
new_cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
		-subj /CN=localhost -addext subjectAltName=DNS:localhost \
		-keyout "$1/$2.key" -out "$1/$2.crt" 2>/dev/null
}

# publish DIR VERSION CRT KEY: the kubelet's update of a Secret volume: a new
# ..VERSION directory, then the ..data symlink swapped at once.
publish() {
	mkdir "$1/..$2"
	cp "$3" "$1/..$2/tls.crt"
	cp "$4" "$1/..$2/tls.key"
	ln -s "..$2" "$1/..data_tmp"
	mv -T "$1/..data_tmp" "$1/..data"
}

# tls_with CA PORT: a TLS connection to the metrics port verifies with CA
# only (the answer is 401: no token).
tls_with() {
	[ "$(curl -s --max-time 2 --cacert "$1" -o /dev/null -w '%{http_code}' \
		--resolve "localhost:$2:127.0.0.1" "https://localhost:$2/metrics")" = 401 ]
}

@test "limits: a renewed metrics certificate is served without a restart; a bad one is refused" {
	local d=$BATS_TEST_TMPDIR/certs c=$BATS_TEST_TMPDIR mp pp
	mkdir "$d"
	new_cert "$c" one
	new_cert "$c" two
	new_cert "$c" three
	publish "$d" v1 "$c/one.crt" "$c/one.key"
	ln -s ..data/tls.crt "$d/tls.crt"
	ln -s ..data/tls.key "$d/tls.key"
	pick_port mp
	pick_port pp "$mp"
	setsid "$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
		--watch-namespace "$(cat "$BATS_FILE_TMPDIR/ns")" --metrics-cert-dir "$d" \
		--metrics-bind-address=":$mp" --health-probe-bind-address=":$pp" \
		</dev/null >>"$ENV_DIR/logs/limits-certs.log" 2>&1 3>&- 4>&- &
	echo $! >"$BATS_TEST_TMPDIR/certs-manager.pid"
	retry 20 curl -sf "http://127.0.0.1:$pp/healthz" >/dev/null
	tls_with "$c/one.crt" "$mp"
	refute tls_with "$c/two.crt" "$mp"

	publish "$d" v2 "$c/two.crt" "$c/two.key"
	retry 20 tls_with "$c/two.crt" "$mp"
	grep -q 'the metrics certificate in .* changed; new connections get it' "$ENV_DIR/logs/limits-certs.log"

	# A certificate with another's key: refused, logged, the last good one kept.
	publish "$d" v3 "$c/three.crt" "$c/two.key"
	retry 20 grep -q 'changed but .*; keeping the certificate in use' "$ENV_DIR/logs/limits-certs.log"
	tls_with "$c/two.crt" "$mp"
	refute tls_with "$c/three.crt" "$mp"
	kill -0 "$(cat "$BATS_TEST_TMPDIR/certs-manager.pid")"
}
