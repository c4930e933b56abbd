#!/usr/bin/env bats
# Leader election on a coordination.k8s.io/v1 Lease in the real API server:
# candidates are the driver program build/e2e/leader (kube/leader.c
# over kube/kube.c) with short timings: lease 3 s, renew deadline 2 s,
# retry period 0.5 s. Each driver prints one JSON line per event, with the
# wall-clock time in ms ("ts_ms"), so hand-over times are measured from the
# drivers' own clocks.

load helpers

LEASE_MS=3000
RETRY_MS=500

setup_file() {
	[ -x "$VMG_DRIVERS/leader" ] || {
		echo "missing $VMG_DRIVERS/leader: run make build/e2e/leader" >&2
		return 1
	}
	new_namespace
	echo "$NS" >"$BATS_FILE_TMPDIR/ns"
}

teardown_file() {
	kubectl delete namespace "$(cat "$BATS_FILE_TMPDIR/ns")" --wait=false >/dev/null 2>&1 || true
}

setup() {
	NS=$(cat "$BATS_FILE_TMPDIR/ns")
	export NS
	D=$BATS_TEST_TMPDIR
}

teardown() {
	local f
	for f in "$D"/*.pid; do
		[ -e "$f" ] || continue
		kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	# A test that stopped the API server starts it again, whatever happened.
	if [ -e "$D/apiserver-stopped" ]; then
		apiserver start >/dev/null 2>&1 || true
		retry 30 kubectl get --raw /readyz >/dev/null 2>&1 || true
	fi
}

# apiserver stop|start: stops or starts the environment's kube-apiserver.
# The descriptors bats keeps open above 2 are closed, or the new server
# would inherit them and bats would wait for it at the end.
apiserver() {
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver "$1" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}

# cand NAME LEASE: starts a candidate with identity NAME for the Lease LEASE
# in the background; its output goes to $D/NAME.out, its pid to $D/NAME.pid
# and, when it ends, its exit status to $D/NAME.rc.
cand() {
	(
		"$VMG_DRIVERS/leader" --namespace "$NS" --name "$2" --identity "$1" \
			--lease-duration 3s --renew-deadline 2s --retry-period 500ms \
			>"$D/$1.out" 2>"$D/$1.err" &
		echo $! >"$D/$1.pid"
		status=0
		wait $! || status=$? # (errexit is on in tests)
		echo "$status" >"$D/$1.rc"
	) 2>/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	retry 5 test -s "$D/$1.pid"
}

holder() {
	kubectl get lease -n "$NS" "$1" -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null
}

# holder_is LEASE ID: the Lease names ID as its holder.
holder_is() {
	[ "$(holder "$1")" = "$2" ]
}

# has NAME EVENT [KEY VALUE]: the candidate printed a line of EVENT (whose
# KEY is VALUE).
has() {
	local n
	n=$(jq -r --arg e "$2" --arg k "${3:-event}" --arg v "${4:-$2}" \
		'select(.event == $e and (.[$k] | tostring) == $v) | 1' "$D/$1.out" 2>/dev/null | wc -l)
	[ "$n" -gt 0 ]
}

# leads NAME: the candidate printed "started leading".
leads() {
	has "$1" "started leading"
}

# event_ts NAME EVENT: the ts_ms of the candidate's first line of EVENT.
event_ts() {
	jq -r --arg e "$2" 'select(.event == $e) | .ts_ms' "$D/$1.out" | head -1
}

# clean NAME: the candidate's stderr holds no sanitizer report.
clean() {
	if grep -E 'Sanitizer|runtime error' "$D/$1.err"; then
		return 1
	fi
}

now_ms() {
	date +%s%3N
}

# exited NAME SECONDS: waits for the candidate to exit and sets $rc to its
# status; fails when it is still running after SECONDS.
exited() {
	retry "$2" test -s "$D/$1.rc"
	rc=$(cat "$D/$1.rc")
}

# note TEXT: shows TEXT in the TAP output.
note() {
	echo "# $*" >&3
}

# two_candidates LEASE: starts a and b, waits for one of them to lead and
# sets $leader and $other.
two_candidates() {
	cand a "$1"
	cand b "$1"
	retry 15 eval 'leads a || leads b'
	if leads a; then leader=a other=b; else leader=b other=a; fi
	retry 5 holder_is "$1" "$leader"
}

@test "leader: one of two candidates leads, the other does not" {
	two_candidates lock1
	# Both keep running for several lease durations; leadership stays put.
	sleep 4
	holder_is lock1 "$leader"
	leads "$leader"
	run leads "$other"
	[ "$status" -ne 0 ]
	has "$other" "new leader" identity "$leader"
	[ "$(kubectl get lease -n "$NS" lock1 -o 'jsonpath={.spec.leaseDurationSeconds} {.spec.leaseTransitions}')" = "3 0" ]
	# renewTime moves on (the leader renews every retry period).
	r1=$(kubectl get lease -n "$NS" lock1 -o 'jsonpath={.spec.renewTime}')
	sleep 1.2
	r2=$(kubectl get lease -n "$NS" lock1 -o 'jsonpath={.spec.renewTime}')
	[ "$r1" != "$r2" ]
	[[ "$r2" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$ ]]
}

@test "leader: SIGKILL of the leader hands the Lease over after it expires, within LeaseDuration + a jittered RetryPeriod" {
	two_candidates lock2
	sleep 1
	t0=$(now_ms)
	kill -9 "$(cat "$D/$leader.pid")"
	retry 10 leads "$other"
	t1=$(event_ts "$other" "started leading")
	took=$((t1 - t0))
	note "SIGKILL hand-over took ${took} ms"
	# Not before the lease expired (3 s after the other last saw it change,
	# which was at most one jittered retry period, 1.1 s, before the kill)...
	[ "$took" -ge $((LEASE_MS - 1100 - 100)) ]
	# ...and within LeaseDuration + one jittered RetryPeriod: the other
	# counts the 3 s from when it saw the leader's last renewal, which it
	# reads at most RetryPeriod * (1 + 1.2) after it was written (client-go's
	# semantics; LeaseDuration + RetryPeriod alone holds only on average),
	# plus 200 ms for the requests.
	[ "$took" -le $((LEASE_MS + RETRY_MS * 22 / 10 + 200)) ]
	holder_is lock2 "$other"
	[ "$(kubectl get lease -n "$NS" lock2 -o 'jsonpath={.spec.leaseTransitions}')" = 1 ]
}

@test "leader: SIGTERM of the leader releases the Lease and the other takes over at once" {
	two_candidates lock3
	sleep 1
	t0=$(now_ms)
	kill -TERM "$(cat "$D/$leader.pid")"
	exited "$leader" 10
	echo "leader exited with $rc"
	[ "$rc" -eq 0 ]
	clean "$leader"
	has "$leader" released err 0
	retry 5 leads "$other"
	t1=$(event_ts "$other" "started leading")
	took=$((t1 - t0))
	note "SIGTERM hand-over took ${took} ms"
	# Well under the 3 s lease: the next try of the other (<= 1.1 s).
	[ "$took" -lt 1500 ]
	holder_is lock3 "$other"
	[ "$(kubectl get lease -n "$NS" lock3 -o 'jsonpath={.spec.leaseTransitions}')" = 1 ]
}

@test "leader: a leader whose API server goes away stops leading and exits non-zero" {
	cand solo lock4
	retry 15 leads solo
	holder_is lock4 solo
	touch "$D/apiserver-stopped"
	t0=$(now_ms)
	apiserver stop
	t_stopped=$(now_ms)
	# Past the 2 s renew deadline (from the last renewal, <= 0.5 s before).
	sleep 3
	exited solo 5
	apiserver start
	rm -f "$D/apiserver-stopped"
	retry 30 kubectl get --raw /readyz >/dev/null
	cat "$D/solo.out"
	[ "$rc" -eq 1 ]
	clean solo
	has solo "stopped leading" reason "renew deadline"
	t1=$(event_ts solo "stopped leading")
	note "stopped $((t1 - t0)) ms after the API server began to stop, $((t1 - t_stopped)) ms after it was down"
	# The renew deadline counts from the last renewal sent, at most one
	# retry period (and a request) before the API server went away.
	[ $((t1 - t0)) -ge 1400 ]
	[ $((t1 - t_stopped)) -le 2200 ]
}
