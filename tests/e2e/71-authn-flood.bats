#!/usr/bin/env bats
# What an unauthenticated caller can do to the manager, tried against the
# real binary with its metrics served as the Deployment serves them (HTTPS
# on every interface, TokenReview and SubjectAccessReview): a flood of
# scrapes with made-up bearer tokens does not slow the controller nor push
# a real scraper out; /readyz and a failed review tell nothing of vCenter's
# user and URL or of what the API server said; groups' status neither.

load helpers
load manager

FLOOD_NS=authn-flood
NS_OP=vmgroup-operator-system

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	for ns in "$FLOOD_NS" authn-badpass authn-novc authn-asan "$NS_OP"; do
		kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	done
	# The shipped RBAC (its metrics-reader ClusterRole among it).
	kubectl kustomize "$VMG_TOP/config/default" |
		awk 'BEGIN { RS = "\n---\n" } /\nkind: (ServiceAccount|Role|ClusterRole|RoleBinding|ClusterRoleBinding)\n/ { print; print "---" }' |
		kubectl apply -f - >/dev/null
	kubectl create serviceaccount authn-scraper -n "$NS_OP" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl create clusterrolebinding authn-scraper-metrics --clusterrole=vmgroup-operator-metrics-reader \
		--serviceaccount="$NS_OP:authn-scraper" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl create token authn-scraper -n "$NS_OP" --duration=2h >"$BATS_FILE_TMPDIR/scraper.token"
	write_flood "$BATS_FILE_TMPDIR/flood.py"
}

teardown_file() {
	touch "$BATS_FILE_TMPDIR/stop-flood"
	for n in authn-flood authn-hs authn-badpass authn-novc authn-noreview authn-asan; do
		stop_manager "$n"
	done
	kubectl delete vg --all -n "$FLOOD_NS" --timeout=90s >/dev/null 2>&1 || true
	kubectl delete vg --all -n authn-badpass --wait=false >/dev/null 2>&1 || true
	kubectl delete vg --all -n authn-novc --timeout=90s >/dev/null 2>&1 || true
}

teardown() {
	# A test that stopped vcsim and failed must not leave it stopped.
	[ -f "$ENV_DIR/run/vcsim.pid" ] || "$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
}

# start_secure NAME [FLAGS...]: the manager with HTTPS metrics on every
# interface (":PORT", as config/manager sets ":8443") and probes on
# loopback; sets MPORT and PROBE_URL. KUBECONFIG and VC_* from the caller.
start_secure() {
	local name=$1 pport
	shift
	pick_port MPORT
	pick_port pport "$MPORT"
	export PROBE_URL="http://127.0.0.1:$pport"
	setsid "$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
		--metrics-bind-address ":$MPORT" --health-probe-bind-address "127.0.0.1:$pport" "$@" \
		</dev/null >>"$ENV_DIR/logs/$name.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/$name.pid"
	retry 20 curl -sf "$PROBE_URL/healthz" >/dev/null
	retry 20 bash -c "curl -sk -o /dev/null 'https://127.0.0.1:$MPORT/metrics'"
}

# scrape TOKEN: the HTTP status of one scrape of the metrics port.
scrape() {
	curl -sk -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $1" \
		"https://127.0.0.1:$MPORT/metrics"
}

scrape_ok() { [ "$(scrape "$1")" = 200 ]; }

# write_flood FILE: a scanner that sends scrapes with random bearer tokens
# on many connections at once, from many loopback addresses, until FILE's directory holds stop-flood or
# the time is up, giving up an answer that takes more than 0.3 s (and its
# connection: the client went away). It prints what it got.
write_flood() {
	cat >"$1" <<'EOF'
import asyncio, collections, os, random, ssl, string, sys, time

host, port, workers, seconds, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
counts = collections.Counter()
end = time.monotonic() + seconds

async def one(r, w):
    tok = ''.join(random.choices(string.ascii_letters + string.digits, k=48))
    w.write(("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % tok).encode())
    counts['sent'] += 1
    line = await asyncio.wait_for(r.readline(), 0.3)
    if not line:
        return 'closed'
    n = 0
    while True:
        h = await asyncio.wait_for(r.readline(), 1)
        if h in (b'\r\n', b''):
            break
        if h.lower().startswith(b'content-length:'):
            n = int(h.split(b':')[1])
    if n:
        await asyncio.wait_for(r.readexactly(n), 1)
    return line.split()[1].decode()

async def worker(k):
    # Each connection from a loopback address of its own, as from many
    # hosts: the server's cap of connections per address stops one.
    src = ('127.0.0.%d' % (2 + k % 250), 0)
    r = w = None
    while time.monotonic() < end and not os.path.exists(stop):
        if w is None:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ctx, local_addr=src), 2)
            except Exception:
                counts['refused'] += 1
                await asyncio.sleep(0.05)
                continue
        try:
            code = await one(r, w)
        except Exception:
            code = 'gave-up'
        counts[code] += 1
        if code in ('closed', 'gave-up'):
            w.close()
            r = w = None

async def main():
    await asyncio.gather(*[worker(k) for k in range(workers)])

asyncio.run(main())
print(' '.join('%s=%d' % kv for kv in sorted(counts.items())))
EOF
}

@test "authn: a flood of made-up bearer tokens slows neither the controller nor a real scraper" {
	local token quiet took first flood_pid sent
	token=$(cat "$BATS_FILE_TMPDIR/scraper.token")
	start_secure authn-flood --watch-namespace "$FLOOD_NS"
	scrape_ok "$token"

	# Without a flood.
	SECONDS=0
	apply_vg "$FLOOD_NS" quiet 1 1 vm-operator-template 2
	wait_running "$FLOOD_NS" quiet 2 180
	quiet=$SECONDS

	# With one: scrapes with random tokens on 32 connections, as fast as
	# they are answered, the whole time the next group is made.
	rm -f "$BATS_FILE_TMPDIR/stop-flood"
	python3 "$BATS_FILE_TMPDIR/flood.py" 127.0.0.1 "$MPORT" 32 240 "$BATS_FILE_TMPDIR/stop-flood" \
		>"$BATS_FILE_TMPDIR/flood.out" 2>&1 3>&- &
	flood_pid=$!
	sleep 3
	SECONDS=0
	apply_vg "$FLOOD_NS" flood 1 1 vm-operator-template 2
	# The first status write is not held up behind reviews.
	retry 60 bash -c "[ -n \"\$(kubectl get vg flood -n $FLOOD_NS -o jsonpath='{.status.phase}')\" ]"
	first=$SECONDS
	# A real scraper's answer is still cached: it is not queued behind the flood.
	retry 10 scrape_ok "$token"
	wait_running "$FLOOD_NS" flood 2 300
	took=$SECONDS
	retry 10 scrape_ok "$token"
	touch "$BATS_FILE_TMPDIR/stop-flood"
	wait "$flood_pid"
	echo "quiet: ${quiet}s; under the flood: first status ${first}s, RUNNING ${took}s" >&3
	echo "flood: $(cat "$BATS_FILE_TMPDIR/flood.out")" >&3
	# A few thousand scrapes were made and answered at once (401 or 503).
	sent=$(grep -o 'sent=[0-9]*' "$BATS_FILE_TMPDIR/flood.out" | cut -d= -f2)
	[ "${sent:-0}" -ge 2000 ]
	grep -qE '(^| )(401|503)=' "$BATS_FILE_TMPDIR/flood.out"
	# The controller did not wait for them (a flood that queued its reviews
	# on the controller's API client delayed it by minutes).
	[ "$first" -le 20 ]
	[ "$took" -le $((quiet * 2 + 30)) ]
	# After it, the metrics are served with a valid token.
	retry 20 scrape_ok "$token"
	kubectl delete vg quiet flood -n "$FLOOD_NS" --timeout=90s
}

# write_handshakes FILE: a client that makes TLS handshakes to a port, one
# after the other from 127.0.0.9, for some seconds, and prints how many
# went through, how many the server cut, and how many failed to connect.
write_handshakes() {
	cat >"$1" <<'EOF'
import socket, ssl, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ok = cut = failed = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=("127.0.0.9", 0))
    except OSError:
        failed += 1
        continue
    try:
        ctx.wrap_socket(s).close()
        ok += 1
    except (OSError, ssl.SSLError):
        cut += 1
    finally:
        s.close()
print(ok, cut, failed)
EOF
}

@test "authn: a flood of TLS handshakes from one address is cut at its rate; a scraper goes on, and the metrics count it" {
	local token out ok cut failed
	token=$(cat "$BATS_FILE_TMPDIR/scraper.token")
	start_secure authn-hs --watch-namespace "$FLOOD_NS"
	scrape_ok "$token"
	write_handshakes "$BATS_TEST_TMPDIR/hs.py"
	python3 "$BATS_TEST_TMPDIR/hs.py" "$MPORT" 5 >"$BATS_TEST_TMPDIR/hs.out" 3>&- &
	# A scraper from another address is served meanwhile.
	sleep 2
	scrape_ok "$token"
	wait $!
	read -r ok cut failed <"$BATS_TEST_TMPDIR/hs.out"
	echo "# handshakes from one address in 5 s: $ok went through, $cut were cut, $failed failed to connect" >&3
	# 20 a second, with a burst of 40 (and a second's slack for timing).
	[ "$ok" -ge 40 ]
	[ "$ok" -le $((40 + 20 * 6)) ]
	[ "$cut" -gt "$ok" ]
	out=$(curl -sk -H "Authorization: Bearer $token" "https://127.0.0.1:$MPORT/metrics")
	grep -E '^vmgroup_http_connections_closed_total\{server="metrics",reason="throttled"\} ' <<<"$out"
	[ "$(awk '/^vmgroup_http_connections_closed_total\{server="metrics",reason="throttled"\} / { print $2 }' <<<"$out")" -ge "$cut" ]
	# The handshakes that waited for the server's rate are counted too.
	grep -E '^vmgroup_http_tls_handshakes_delayed_total\{server="metrics"\} [0-9]+$' <<<"$out"
	stop_manager authn-hs
}

@test "authn: /readyz with a wrong vCenter password says vcenter and nothing of the user, URL or error" {
	VC_PASS="not-$VC_PASS" start_secure authn-badpass --watch-namespace authn-badpass
	# Unready once the login was refused (the log says so).
	retry 30 grep -q "vCenter refused the login for user $VC_USER" "$ENV_DIR/logs/authn-badpass.log"
	run curl -s -w '\n%{http_code}' "$PROBE_URL/readyz"
	echo "$output"
	[ "$(tail -1 <<<"$output")" = 503 ]
	[[ "$output" != *"$VC_USER"* ]]
	[[ "$output" != *"$VC_HOST"* ]]
	[[ "$output" != *incorrect* ]]
	[[ "$output" != *refused* ]]
	[[ "$output" == *"not ready"*vcenter* ]]
	# A group's status says what kind of failure it is, not who or where.
	apply_vg authn-badpass bp 1 1 vm-operator-template 1
	retry 60 bash -c "[[ \"\$(kubectl get vg bp -n authn-badpass -o jsonpath='{.status.lastMessage}')\" == *\"see the operator's log\"* ]]"
	kubectl get vg,events -n authn-badpass -o yaml >"$BATS_TEST_TMPDIR/objects.yaml"
	refute grep -qF "$VC_USER" "$BATS_TEST_TMPDIR/objects.yaml"
	refute grep -qF "$VC_HOST" "$BATS_TEST_TMPDIR/objects.yaml"
	stop_manager authn-badpass
	kubectl delete vg bp -n authn-badpass --wait=false >/dev/null
	kubectl patch vg bp -n authn-badpass --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
}

@test "authn: /readyz with vCenter stopped says vcenter and nothing of its URL or the error" {
	start_secure authn-novc --watch-namespace authn-novc
	apply_vg authn-novc nv 1 1 vm-operator-template 1
	wait_running authn-novc nv 1 120
	retry 10 curl -sf "$PROBE_URL/readyz"
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim stop
	kubectl scale vg nv -n authn-novc --replicas=2
	# Unready once the operator finds vCenter gone (the log says so).
	retry 60 bash -c "! curl -sf '$PROBE_URL/readyz' >/dev/null"
	retry 60 grep -q 'vCenter .* failed: connection failed' "$ENV_DIR/logs/authn-novc.log"
	run curl -s "$PROBE_URL/readyz"
	echo "$output"
	[[ "$output" != *"$VC_HOST"* ]]
	[[ "$output" != *127.0.0.1* ]]
	[[ "$output" != *onnect* ]]
	[[ "$output" != *"$VC_USER"* ]]
	[[ "$output" == *"not ready"*vcenter* ]]
	# The group says vCenter is not reachable, not where it is.
	retry 90 bash -c "[[ \"\$(kubectl get vg nv -n authn-novc -o jsonpath='{.status.lastMessage}')\" == *\"see the operator's log\"* ]]"
	run kubectl get vg nv -n authn-novc -o jsonpath='{.status.lastMessage}'
	echo "$output"
	[[ "$output" != *"$VC_HOST"* ]]
	[[ "$output" != *"$VC_USER"* ]]
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim start
	retry 60 curl -sf "$PROBE_URL/readyz"
	wait_running authn-novc nv 2 120
	kubectl delete vg nv -n authn-novc --timeout=90s
	stop_manager authn-novc
}

@test "authn: a TokenReview the API server refuses is logged, and the scraper reads a bare 500" {
	local token
	# An operator whose account may not create TokenReviews.
	kubectl create serviceaccount authn-noreview -n "$NS_OP" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	token=$(kubectl create token authn-noreview -n "$NS_OP" --duration=1h)
	cat >"$BATS_TEST_TMPDIR/noreview.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: $KUBE_APISERVER_URL
    certificate-authority: $ENV_DIR/pki/ca.crt
users:
- name: sa
  user:
    token: $token
contexts:
- name: e2e
  context: {cluster: e2e, user: sa, namespace: $NS_OP}
current-context: e2e
EOF
	KUBECONFIG="$BATS_TEST_TMPDIR/noreview.kubeconfig" start_secure authn-noreview --watch-namespace authn-novc
	run curl -sk -w '\n%{http_code}' -H 'Authorization: Bearer some-made-up-token' "https://127.0.0.1:$MPORT/metrics"
	echo "$output"
	[ "$(tail -1 <<<"$output")" = 500 ]
	[ "$(head -1 <<<"$output")" = "Internal Server Error" ]
	[[ "$output" != *forbidden* ]]
	[[ "$output" != *tokenreviews* ]]
	[[ "$output" != *authn-noreview* ]]
	[[ "$output" != *serviceaccount* ]]
	# The log has it.
	retry 10 grep -q 'TokenReview failed: .*forbidden' "$ENV_DIR/logs/authn-noreview.log"
	stop_manager authn-noreview
}

@test "authn: scrapes answered at once, reviewed or cached leave no memory error (the manager under ASan)" {
	local token
	token=$(cat "$BATS_FILE_TMPDIR/scraper.token")
	# Every answer path of /metrics: no header and a malformed one (answered
	# at once), a made-up token (reviewed, then a cached denial), a real one
	# (reviewed, then a cached allow). The handler's state was written after
	# an answer given at once had freed it.
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		VMG_BIN="$VMG_DRIVERS/vmgroup-operator-san" start_secure authn-asan --watch-namespace authn-asan
	[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 "https://127.0.0.1:$MPORT/metrics")" = 401 ]
	[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 5 -H 'Authorization: Basic eDp5' "https://127.0.0.1:$MPORT/metrics")" = 401 ]
	[ "$(scrape made-up-token)" = 401 ]
	[ "$(scrape made-up-token)" = 401 ]
	[ "$(scrape "$token")" = 200 ]
	[ "$(scrape "$token")" = 200 ]
	kill -0 "$(cat "$ENV_DIR/run/authn-asan.pid")"
	stop_manager authn-asan
	refute grep -E 'AddressSanitizer|runtime error' "$ENV_DIR/logs/authn-asan.log"
}
