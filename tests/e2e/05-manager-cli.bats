#!/usr/bin/env bats
# The manager's command line, as a user or a Deployment drives it.

load helpers

@test "manager: --help lists the flags and exits 0" {
	run "$VMG_BIN" --help
	[ "$status" -eq 0 ]
	for f in --kubeconfig --metrics-bind-address --health-probe-bind-address --leader-elect \
		--leader-election-namespace --insecure --datacenter --root-folder --resource-pool; do
		[[ "$output" == *"$f"* ]] || { echo "missing $f"; return 1; }
	done
	[[ "$output" == *VC_HOST* ]]
}

@test "manager: an unknown flag exits 2 naming it" {
	run "$VMG_BIN" --frobnicate
	[ "$status" -eq 2 ]
	[[ "$output" == *"--frobnicate"* ]]
}

@test "manager: a bad value exits 2 naming the flag and the value" {
	run "$VMG_BIN" --max-vcenter-tasks=lots
	[ "$status" -eq 2 ]
	[[ "$output" == *"--max-vcenter-tasks"* ]]
	[[ "$output" == *lots* ]]
	run "$VMG_BIN" --leader-elect=perhaps
	[ "$status" -eq 2 ]
	[[ "$output" == *"--leader-elect"* ]]
}

@test "manager: leader-election timings must decrease" {
	run "$VMG_BIN" --leader-elect --leader-election-lease-duration=5s --leader-election-renew-deadline=10s
	[ "$status" -eq 2 ]
	[[ "$output" == *"lease duration > renew deadline > retry period"* ]]
}

@test "manager: missing vCenter credentials are named, and the password is never printed" {
	run env -u VC_HOST VC_PASS=pa55word-not-shown "$VMG_BIN"
	[ "$status" -eq 2 ]
	[[ "$output" == *VC_HOST* ]]
	[[ "$output" != *pa55word-not-shown* ]]
}

@test "manager: SIGTERM stops it with status 0" {
	"$VMG_BIN" --kubeconfig "$KUBECONFIG" --insecure --metrics-bind-address=0 \
		--health-probe-bind-address=0 2>"$BATS_TEST_TMPDIR/log" &
	pid=$!
	sleep 1
	kill -0 "$pid"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	refute grep -qF "$VC_PASS" "$BATS_TEST_TMPDIR/log"
}
