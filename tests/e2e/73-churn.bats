#!/usr/bin/env bats
# What the manager keeps: the vCenter password nowhere in its environment
# once read, and nothing left behind by groups that come and go.

load helpers
load manager

NS=churn-e2e

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

teardown() {
	stop_manager churn-env-manager
}

@test "secrets: the vCenter password is not in the manager's /proc/PID/environ while it is logged in" {
	# Started as a Deployment starts it: VC_HOST, VC_USER, VC_PASS, and not
	# govc's copy of the password that the test environment exports.
	(
		unset GOVC_PASSWORD
		start_manager churn-env-manager --watch-namespace "$NS"
	)
	manager_urls churn-env-manager
	pid=$(cat "$ENV_DIR/run/churn-env-manager.pid")
	[ -n "$VC_PASS" ]
	# Ready means logged in to vCenter: it did read the password.
	retry 30 curl -sf "$PROBE_URL/readyz" >/dev/null
	run grep -a -c -F -e "$VC_PASS" "/proc/$pid/environ"
	[ "$status" -eq 1 ]
	[ "$output" = 0 ]
	# Not the password; the rest of the environment is still there.
	grep -a -q -F -e "VC_HOST=$VC_HOST" "/proc/$pid/environ"
}

# Rounds of create (5 groups of 2 VMs), scale (to 3), resize (2 CPUs, 2 GiB)
# and delete, through tests/bench/churn.sh (the soak `make bench` runs
# longer; about 20 s a round). The event recorder's cache entries (a gauge)
# must be above 0 while groups exist and back to 0 after each round's
# delete; the median resident memory of rounds 8..10 may exceed that of
# rounds 2..4 by at most 768 KiB, and no round that base by more than
# 1536 KiB. Measured on 2 cores: this code stayed within 60 KiB of round 4
# over 12 rounds in one run, and in another one round was 564 KiB up and
# the next 324 (the medians: +324); the code before it (no such gauge)
# grew about 110 KiB a round, 928 KiB from round 3 to round 10. The gauge
# is what fails that code for sure; the memory rule catches a leak of the
# 200 KiB a round that issue 13 measured, and `make bench` runs 30 rounds
# with a 1 MiB rule.
@test "churn: rounds of create, scale, resize and delete leave nothing behind" {
	run env CHURN_ROUNDS="${CHURN_E2E_ROUNDS:-10}" CHURN_GROUPS=5 CHURN_BASE=3 \
		CHURN_TOLERANCE_KIB=768 CHURN_NS="$NS" CHURN_LOG="$ENV_DIR/logs/churn-e2e-manager.log" \
		bash "$VMG_TOP/tests/bench/churn.sh"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"churn: ok"* ]]
}
