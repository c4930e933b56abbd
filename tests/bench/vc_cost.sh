#!/usr/bin/env bash
# tests/bench/vc_cost.sh: where vcsim's CPU goes when VMs are made, by the
# kind of request the operator makes (issue 15). VC_COST_VMS (150) VMs are
# cloned, VC_COST_INFLIGHT (8) at a time, and destroyed, five ways, each
# measured by vcsim's CPU seconds (/proc/PID/stat) and its count of SOAP
# requests by method:
#   govc           `govc vm.clone -on` processes, one filter per task (the
#                  simulator's ceiling);
#   tracker        the operator's vCenter client (vsphere/ops through
#                  tests/e2e/drivers/vsdrv.c): one collector with one
#                  filter over a ListView of the running tasks, its long
#                  poll; no inventory watch;
#   govc + watch   govc as above while the operator's inventory watch
#                  (vsdrv idle: the filter over the root folder) follows;
#   tracker + watch  both parts of the operator's vCenter client at once;
#   govc + watch over M   govc + watch with VC_COST_EXTRA (150) powered-off
#                  VMs already in the watched tree.
# It prints vcsim CPU seconds and milliseconds per VM created for each,
# and the difference each part adds to the ceiling. Informational: it does
# not fail on figures.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
. "$ENV_DIR/env"
export GOVC_PERSIST_SESSION=true GOVMOMI_HOME
GOVMOMI_HOME=$(mktemp -d /tmp/vc-cost-govmomi.XXXXXX)
vms=${VC_COST_VMS:-150}
inflight=${VC_COST_INFLIGHT:-8}
extra=${VC_COST_EXTRA:-150}
root=/DC0/vm/vm-operator
hz=$(getconf CLK_TCK)
watcher=

drv=${VSDRV:-$top/build/bench/vsdrv}
[ -x "$drv" ] || {
	echo "vc_cost: $drv is missing: run it through tests/bench/run" >&2
	exit 1
}

cleanup() {
	[ -z "$watcher" ] || kill -TERM "$watcher" 2>/dev/null || true
	rm -rf "$GOVMOMI_HOME"
}
trap cleanup EXIT

ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$ENV_DIR/run/vcsim.pid")/stat"; }
methods() { curl -sf "$VCSIM_DEBUG_URL/debug/soap-methods"; }
per_vm() { # BEFORE AFTER: requests between two counts, per VM
	awk -v n="$vms" 'FNR == NR { a[$1] = $2; next } { d = $2 - a[$1]; if (d > 0) s[$1] = d }
		END { for (k in s) { printf "%s=%.2f ", k, s[k] / n; t += s[k] } printf "(all %.1f)", t / n }' \
		<(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

govc_clones() { # FOLDER COUNT POWER
	seq 1 "$2" | xargs -P "$inflight" -I{} govc vm.clone -vm /DC0/vm/vm-operator-template \
		-folder "$root/$1" -pool /DC0/host/DC0_C0/Resources -c 1 -m 1024 -on="$3" "$1-{}" >/dev/null
}
govc_destroy() { # FOLDER
	govc ls "$root/$1" | xargs -P "$inflight" -n 1 govc vm.destroy >/dev/null
	govc object.destroy "$root/$1" >/dev/null
}

rows=
# measure NAME CMD...: vcsim's CPU while CMD makes the VMs.
measure() {
	local name=$1 k0 k1 m0 m1
	shift
	m0=$(methods)
	k0=$(ticks)
	"$@"
	k1=$(ticks)
	m1=$(methods)
	cpu=$(awk -v a="$k0" -v b="$k1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
	rows="$rows$(printf '%-28s %9s %10.1f' "$name" "$cpu" "$(awk -v c="$cpu" -v n="$vms" 'BEGIN { print 1000 * c / n }')")
"
	echo "  $name: $(per_vm "$m0" "$m1")" >>"$ENV_DIR/vc_cost.methods"
}

start_watch() {
	"$drv" --ca-file "$VC_CA_FILE" idle 3600 >/dev/null 2>&1 &
	watcher=$!
	sleep 2
}
stop_watch() {
	kill -TERM "$watcher" 2>/dev/null || true
	wait "$watcher" 2>/dev/null || true
	watcher=
}
tracker_clones() { # FOLDER
	"$drv" --ca-file "$VC_CA_FILE" --max-tasks "$inflight" --cpu 1 --mem 1024 --uid bench \
		clones "$1" "$vms" | grep -q '"event":"clones"'
}

: >"$ENV_DIR/vc_cost.methods"
govc about >/dev/null
p=cost-$$
govc folder.create "$root/$p-govc" "$root/$p-tracker" "$root/$p-watch" "$root/$p-watch2" "$root/$p-extra" \
	"$root/$p-both" >/dev/null

measure "govc" govc_clones "$p-govc" "$vms" true
govc_destroy "$p-govc"
measure "tracker (vsphere/ops)" tracker_clones "$p-tracker"
govc_destroy "$p-tracker"
start_watch
measure "govc + watch" govc_clones "$p-watch" "$vms" true
stop_watch
govc_destroy "$p-watch"
start_watch
measure "tracker + watch" tracker_clones "$p-both"
stop_watch
govc_destroy "$p-both"
govc_clones "$p-extra" "$extra" false
start_watch
measure "govc + watch over $extra more" govc_clones "$p-watch2" "$vms" true
stop_watch
govc_destroy "$p-watch2"
govc_destroy "$p-extra"
rm -rf "$GOVMOMI_HOME"

printf '%s VMs made, %s at a time\n%-28s %9s %10s\n%s' "$vms" "$inflight" "" "vcsim CPU" "ms per VM" "$rows"
echo "SOAP requests per VM created, by method (vcsim's count; watch: the watcher's included):"
cat "$ENV_DIR/vc_cost.methods"
