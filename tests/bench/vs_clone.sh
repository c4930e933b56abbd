#!/usr/bin/env bash
# tests/bench/vs_clone.sh: clones per second against vcsim through the
# operator's vCenter client (vsphere/ops, N operations in flight on one
# session) beside govc driving the same vcsim (N `govc vm.clone` processes
# at a time, with a persisted session); vCenter requests per VM created,
# counted by the session's request hook; and the requests made while the
# inventory watch sits idle for 10 s (the target: only the outstanding
# WaitForUpdatesEx long poll, so none completes in that time).
#
#   tests/bench/vs_clone.sh            (uses $ENV_DIR when it holds a running
#                                       environment, else starts its own)
#   VS_BENCH_CLONES=64 VS_BENCH_N="1 8 32" VS_BENCH_IDLE=10   (the defaults)
#
# The driver is tests/e2e/drivers/vsdrv.c, built without sanitizers
# against build/libvmgroup.a (build/bench/vsdrv).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"

clones=${VS_BENCH_CLONES:-64}
ns=${VS_BENCH_N:-1 8 32}
idle=${VS_BENCH_IDLE:-10}

say() { printf 'vs_clone: %s\n' "$*" >&2; }

# The driver, optimized and without sanitizers (the Makefile's rule).
make --no-print-directory build/bench/vsdrv >&2
drv=$top/build/bench/vsdrv

# An environment: the caller's, or one of our own.
own_env=
if [ -n "${ENV_DIR:-}" ] && [ -f "$ENV_DIR/env" ] && [ -f "$ENV_DIR/run/vcsim.pid" ] &&
	kill -0 "$(cat "$ENV_DIR/run/vcsim.pid")" 2>/dev/null; then
	:
else
	ENV_DIR=$(mktemp -d /tmp/vs-bench.XXXXXX)
	own_env=$ENV_DIR
	say "starting an environment in $ENV_DIR"
	hack/env/up "$ENV_DIR" >"$ENV_DIR.log" 2>&1 || {
		cat "$ENV_DIR.log" >&2
		exit 1
	}
fi
# shellcheck disable=SC1091
. "$ENV_DIR/env"
export GOVC_PERSIST_SESSION=true
export GOVMOMI_HOME
GOVMOMI_HOME=$(mktemp -d /tmp/vs-bench-govmomi.XXXXXX)

prefix=bench-$$
root=/DC0/vm/vm-operator
cleanup() {
	govc object.destroy "$root/$prefix"-* >/dev/null 2>&1 || true
	rm -rf "$GOVMOMI_HOME"
	if [ -n "$own_env" ]; then
		hack/env/down "$own_env" >/dev/null 2>&1 || true
		rm -rf "$own_env" "$own_env.log"
	fi
}
trap cleanup EXIT

now() { date +%s.%N; }
# json_num LINE KEY: a number field of a JSON line.
json_num() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<<"$1"; }

# The client: N in flight, $clones clones, timed from the first submission
# to the last completion (login and placement excluded, as a running
# operator has them done).
client_run() {
	local n=$1 folder=$prefix-client-$1 line
	govc folder.create "$root/$folder" >/dev/null
	line=$("$drv" --ca-file "$VC_CA_FILE" --max-tasks "$n" --cpu 1 --mem 1024 --uid bench \
		clones "$folder" "$clones" | grep '"event":"clones"')
	[ "$(json_num "$line" ok)" = "$clones" ] || {
		say "client run N=$n failed: $line"
		return 1
	}
	govc object.destroy "$root/$folder" >/dev/null
	echo "$(json_num "$line" seconds) $(json_num "$line" requests)"
}

# govc: N processes at a time, each one `govc vm.clone`, on a session
# persisted across them.
govc_run() {
	local n=$1 folder=$prefix-govc-$1 t0 t1
	govc folder.create "$root/$folder" >/dev/null
	govc about >/dev/null # log in once; the session is kept
	t0=$(now)
	seq 1 "$clones" | xargs -P "$n" -I{} govc vm.clone -vm /DC0/vm/vm-operator-template \
		-folder "$root/$folder" -pool /DC0/host/DC0_C0/Resources -c 1 -m 1024 -on=true \
		"$folder-{}" >/dev/null
	t1=$(now)
	[ "$(govc ls "$root/$folder" | wc -l)" -eq "$clones" ] || {
		say "govc run N=$n did not make $clones VMs"
		return 1
	}
	govc object.destroy "$root/$folder" >/dev/null
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

say "$clones clones per run, N in: $ns"
printf '%-4s %14s %12s %8s %16s\n' N "client clones/s" "govc clones/s" ratio "client req/VM"
for n in $ns; do
	read -r csec creq < <(client_run "$n")
	gsec=$(govc_run "$n")
	awk -v n="$n" -v c="$clones" -v cs="$csec" -v gs="$gsec" -v r="$creq" 'BEGIN {
		cr = c / cs; gr = c / gs
		printf "%-4s %14.1f %12.1f %8.1f %16.2f\n", n, cr, gr, cr / gr, r / c }'
done

line=$("$drv" --ca-file "$VC_CA_FILE" idle "$idle" | grep '"event":"idle"')
printf 'idle inventory watch for %s s: %s requests completed (%s)\n' "$idle" \
	"$(json_num "$line" requests)" "$(sed -n 's/.*"methods":\({[^}]*}\).*/\1/p' <<<"$line")"
echo "(one WaitForUpdatesEx long poll stays outstanding; it completes every 60 s when nothing changes)"
