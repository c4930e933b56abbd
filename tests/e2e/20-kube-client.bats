#!/usr/bin/env bats
# kube/kube and kube/informer against the real kube-apiserver,
# through the kubewatch driver (tests/e2e/drivers/kubewatch.c): every kind
# of kubeconfig credential connects; creates, updates and deletes made with
# kubectl arrive; the cache converges after kube-apiserver restarts and
# after a compacted resourceVersion (410); a list without RBAC is reported
# as forbidden.

load helpers

KW_ROLE=vmg-e2e-kube-watch

setup_file() {
	. "$ENV_DIR/env"
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s \
		crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	new_namespace
	local d=$BATS_FILE_TMPDIR ca_data token nobody
	# A ServiceAccount that may list and watch VmGroups, and one that may not.
	kubectl create serviceaccount watcher -n "$NS" >/dev/null
	kubectl create serviceaccount nobody -n "$NS" >/dev/null
	kubectl create clusterrole "$KW_ROLE-$NS" --verb=get,list,watch \
		--resource=vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create clusterrolebinding "$KW_ROLE-$NS" --clusterrole="$KW_ROLE-$NS" \
		--serviceaccount="$NS:watcher" >/dev/null
	token=$(kubectl create token watcher -n "$NS" --duration=2h)
	nobody=$(kubectl create token nobody -n "$NS" --duration=2h)
	ca_data=$(base64 -w0 <"$ENV_DIR/pki/ca.crt")
	printf '%s\n' "$token" >"$d/token"
	cat >"$d/plugin.sh" <<EOF
#!/bin/sh
echo run >>"$d/plugin.runs"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "\$(cat "$d/token")"
EOF
	chmod 755 "$d/plugin.sh"
	# kubeconfig NAME CLUSTER-LINE USER-LINES...
	kubeconfig() {
		local name=$1 cluster=$2
		shift 2
		{
			printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n'
			printf '    server: %s\n    %s\n' "$KUBE_APISERVER_URL" "$cluster"
			printf 'users:\n- name: u\n  user:\n'
			printf '    %s\n' "$@"
			printf 'contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n'
			printf 'current-context: x\n'
		} >"$d/$name.kubeconfig"
	}
	kubeconfig token "certificate-authority: $ENV_DIR/pki/ca.crt" "token: $token"
	kubeconfig tokenfile "certificate-authority-data: $ca_data" "tokenFile: $d/token"
	kubeconfig exec "certificate-authority-data: $ca_data" "exec:" \
		"  apiVersion: client.authentication.k8s.io/v1" "  command: $d/plugin.sh" \
		"  interactiveMode: Never"
	kubeconfig nobody "certificate-authority: $ENV_DIR/pki/ca.crt" "token: $nobody"
	kubeconfig wrongca "certificate-authority: $ENV_DIR/pki/vc-ca.crt" "token: $token"
	echo "$NS" >"$d/ns"
}

teardown_file() {
	. "$ENV_DIR/env"
	local ns
	ns=$(cat "$BATS_FILE_TMPDIR/ns")
	kubectl delete clusterrolebinding "$KW_ROLE-$ns" --ignore-not-found >/dev/null
	kubectl delete clusterrole "$KW_ROLE-$ns" --ignore-not-found >/dev/null
	kubectl delete namespace "$ns" --wait=false --ignore-not-found >/dev/null
}

setup() {
	NS=$(cat "$BATS_FILE_TMPDIR/ns")
	KW_PID=
	OUT=$BATS_TEST_TMPDIR/out
}

teardown() {
	kw_stop || true
	# Whatever happened, leave kube-apiserver running for the next test.
	if ! curl -sf --cacert "$ENV_DIR/pki/ca.crt" "$KUBE_APISERVER_URL/readyz" >/dev/null 2>&1; then
		curl -s --cacert "$ENV_DIR/pki/ca.crt" "$KUBE_APISERVER_URL/livez" >/dev/null 2>&1 ||
			"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver start >/dev/null 2>&1 || true
	fi
}

# kw_start ARGS...: runs the driver in the background, output in $OUT.
kw_start() {
	"$VMG_DRIVERS/kubewatch" "$@" >"$OUT" 2>"$OUT.err" &
	KW_PID=$!
}

# kw_stop: SIGTERM, and the driver must exit 0 (ASan checks leaks there).
kw_stop() {
	[ -n "$KW_PID" ] || return 0
	local rc=0
	kill -TERM "$KW_PID" 2>/dev/null || true
	wait "$KW_PID" || rc=$?
	KW_PID=
	if [ "$rc" -ne 0 ]; then
		echo "kubewatch exited $rc"
		tail -n 30 "$OUT.err"
		return 1
	fi
}

# seen TEXT: a line of the driver's output holds TEXT (fixed string).
seen() {
	grep -qF -- "$1" "$OUT"
}

# none TEXT: no line holds TEXT.
none() {
	if seen "$1"; then
		echo "unexpected: $1"
		grep -F -- "$1" "$OUT" | head -n 5
		return 1
	fi
}

# count TEXT: how many lines hold TEXT.
count() {
	grep -cF -- "$1" "$OUT" || true
}

# wait_count SECONDS TEXT N: until at least N lines hold TEXT.
wait_count() {
	if ! retry "$1" test "$(count "$2")" -ge "$3"; then
		echo "saw $(count "$2") lines with $2, want $3"
		cat "$OUT"
		return 1
	fi
}

# wait_seen SECONDS TEXT
wait_seen() {
	if ! retry "$1" seen "$2"; then
		echo "never saw: $2"
		echo "--- output:"
		cat "$OUT"
		echo "--- stderr:"
		tail -n 20 "$OUT.err"
		return 1
	fi
}

vg_apply() { # NAME REPLICAS
	kubectl apply -f - >/dev/null <<EOF
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: $1
  namespace: $NS
spec:
  cpu: 1
  memory: 1
  template: vm-operator-template
  replicas: $2
EOF
}

# server_state: "ns/name@rv" of every VmGroup in $NS, sorted, one a line.
server_state() {
	kubectl get vg -n "$NS" -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}@{.metadata.resourceVersion}{"\n"}{end}' |
		sort
}

# cache_state: the same from the driver's last dump (asks for one first).
cache_state() {
	local before
	before=$(grep -c '"event":"dump"' "$OUT" || true)
	kill -USR1 "$KW_PID"
	retry 5 test "$(grep -c '"event":"dump"' "$OUT")" -gt "$before" || return 1
	grep '"event":"dump"' "$OUT" | tail -n 1 | jq -r '.items[]'
}

converged() {
	[ "$(cache_state)" = "$(server_state)" ]
}

wait_converged() {
	if ! retry "$1" converged; then
		echo "cache:"
		cache_state
		echo "server:"
		server_state
		echo "--- output:"
		tail -n 40 "$OUT"
		return 1
	fi
}

apiserver_ready() {
	curl -sf --cacert "$ENV_DIR/pki/ca.crt" --cert "$ENV_DIR/pki/admin.crt" \
		--key "$ENV_DIR/pki/admin.key" "$KUBE_APISERVER_URL/readyz" >/dev/null
}

@test "kube: every kind of kubeconfig lists and watches" {
	local d=$BATS_FILE_TMPDIR v
	for v in admin token tokenfile exec; do
		local cfg=$d/$v.kubeconfig
		[ "$v" = admin ] && cfg=$KUBECONFIG
		kw_start --kubeconfig "$cfg" --namespace "$NS"
		wait_seen 20 '"event":"synced"'
		wait_seen 10 '"event":"watching"'
		vg_apply "cfg-$v" 2
		wait_seen 20 "\"event\":\"add\",\"key\":\"$NS/cfg-$v\""
		grep -F "\"key\":\"$NS/cfg-$v\"" "$OUT" | grep -qF '"replicas":2'
		kw_stop
		none '"event":"error"'
	done
	# The exec plugin ran (at least once; once per process here).
	[ "$(wc -l <"$d/plugin.runs")" -ge 1 ]
	kubectl delete vg -n "$NS" cfg-admin cfg-token cfg-tokenfile cfg-exec >/dev/null
}

# lifecycle MODE: creates, updates, status updates and deletes arrive.
lifecycle() {
	vg_apply before 1
	kw_start --kubeconfig "$KUBECONFIG" --namespace "$NS" --list-mode "$1"
	wait_seen 20 "\"event\":\"add\",\"key\":\"$NS/before\""
	wait_seen 10 '"event":"watching"'
	vg_apply life 1
	wait_seen 10 "\"event\":\"add\",\"key\":\"$NS/life\""
	kubectl scale vg life -n "$NS" --replicas=3 >/dev/null
	wait_seen 10 "\"event\":\"update\",\"key\":\"$NS/life\""
	retry 10 bash -c "grep -F '\"key\":\"$NS/life\"' '$OUT' | grep -qF '\"replicas\":3'"
	rv=$(kubectl get vg life -n "$NS" -o jsonpath='{.metadata.resourceVersion}')
	kubectl patch vg life -n "$NS" --subresource=status --type=merge \
		-p '{"status":{"phase":"PENDING","lastMessage":"from e2e"}}' >/dev/null
	rv2=$(kubectl get vg life -n "$NS" -o jsonpath='{.metadata.resourceVersion}')
	wait_seen 10 "\"old_rv\":\"$rv\",\"rv\":\"$rv2\""
	kubectl delete vg life -n "$NS" >/dev/null
	wait_seen 10 "\"event\":\"delete\",\"key\":\"$NS/life\""
	wait_converged 10
	kw_stop
	kubectl delete vg before -n "$NS" >/dev/null
}

@test "kube: creates, updates, status updates and deletes made with kubectl arrive (streaming list)" {
	lifecycle auto
	# kube-apiserver 1.32 streams the list: no page was asked for.
	grep -F '"event":"listed"' "$OUT" | head -n 1 | grep -qF '"op":"stream"'
}

@test "kube: creates, updates, status updates and deletes made with kubectl arrive (paged list)" {
	lifecycle paged
	grep -F '"event":"listed"' "$OUT" | head -n 1 | grep -qF '"op":"list"'
}

@test "kube: resync re-delivers every cached object" {
	vg_apply resync-a 1
	vg_apply resync-b 1
	kw_start --kubeconfig "$KUBECONFIG" --namespace "$NS" --resync-ms 300
	wait_seen 20 "\"event\":\"resync\",\"key\":\"$NS/resync-a\""
	wait_seen 5 "\"event\":\"resync\",\"key\":\"$NS/resync-b\""
	kw_stop
	kubectl delete vg resync-a resync-b -n "$NS" >/dev/null
}

@test "kube: the cache converges after kube-apiserver restarts, changes before and after" {
	for i in 1 2 3; do vg_apply "restart-$i" 1; done
	kw_start --kubeconfig "$KUBECONFIG" --namespace "$NS"
	wait_seen 20 '"event":"watching"'
	wait_converged 10
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver stop
	# Down: the driver retries with backoff and reports it.
	wait_seen 20 '"event":"error","op":"watch"'
	sleep 2
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver start
	retry 30 apiserver_ready
	# Made after it came back: nothing may be lost.
	vg_apply restart-4 2
	kubectl scale vg restart-1 -n "$NS" --replicas=5 >/dev/null
	kubectl delete vg restart-2 -n "$NS" >/dev/null
	wait_converged 60
	retry 10 bash -c "grep -F '\"key\":\"$NS/restart-1\"' '$OUT' | grep -qF '\"replicas\":5'"
	wait_seen 5 "\"event\":\"delete\",\"key\":\"$NS/restart-2\""
	kw_stop
	kubectl delete vg -n "$NS" restart-1 restart-3 restart-4 >/dev/null
}

# etcd_revision: the current revision of etcd, through its HTTP gateway.
etcd_revision() {
	curl -sf -X POST "$ETCD_ENDPOINT/v3/kv/range" -d '{"key":"AA=="}' | jq -r .header.revision
}

# gone MODE: a 410 is recovered from by a relist that notifies the differences.
gone() {
	for i in 1 2 3; do vg_apply "gone-$i" 1; done
	kw_start --kubeconfig "$KUBECONFIG" --namespace "$NS" --list-mode "$1"
	wait_seen 20 '"event":"watching"'
	wait_converged 10
	# Freeze the driver, and restart kube-apiserver under it: its watch is
	# dead (it does not know yet), and the new kube-apiserver's watch cache
	# begins after the driver's resourceVersion (a write in between makes
	# sure), so what changes now the driver can only learn by listing.
	kill -STOP "$KW_PID"
	kubectl create configmap kw-filler-0 -n "$NS" >/dev/null
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver
	retry 30 apiserver_ready
	for i in 1 2 3 4 5 6 7 8; do
		kubectl scale vg gone-1 -n "$NS" --replicas="$i" >/dev/null
	done
	kubectl delete vg gone-2 -n "$NS" >/dev/null
	vg_apply gone-4 1
	for i in 1 2 3; do kubectl create configmap "kw-filler-$i" -n "$NS" >/dev/null; done
	# Compact etcd up to now, as a long-running cluster would have.
	rev=$(etcd_revision)
	[ -n "$rev" ]
	curl -sf -X POST "$ETCD_ENDPOINT/v3/kv/compaction" \
		-d "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null
	kill -CONT "$KW_PID"
	wait_seen 60 '"event":"gone"'
	grep -F '"event":"gone"' "$OUT" | grep -qF '"code":410'
	wait_count 30 '"event":"listed"' 2
	grep -F '"event":"listed"' "$OUT" | tail -n 1 | grep -qF '"added":1,"updated":1,"deleted":1'
	wait_seen 5 "\"event\":\"delete\",\"key\":\"$NS/gone-2\""
	wait_seen 5 "\"event\":\"add\",\"key\":\"$NS/gone-4\""
	wait_converged 30
	# And it watches again: a change after the relist arrives.
	wait_count 10 '"event":"watching","op":"watch","rv":"'"$(grep -F '"event":"listed"' "$OUT" | tail -n 1 | jq -r .rv)"'"' 1
	kubectl delete vg gone-3 -n "$NS" >/dev/null
	wait_seen 20 "\"event\":\"delete\",\"key\":\"$NS/gone-3\""
	kw_stop
	kubectl delete vg -n "$NS" gone-1 gone-4 >/dev/null
	kubectl delete configmap -n "$NS" kw-filler-0 kw-filler-1 kw-filler-2 kw-filler-3 >/dev/null
}

@test "kube: a compacted resourceVersion (410) is recovered by a streaming relist that notifies the differences" {
	gone stream
}

@test "kube: a compacted resourceVersion (410) is recovered by a paged relist that notifies the differences" {
	gone paged
}

@test "kube: a list without RBAC is reported as forbidden, not retried" {
	local d=$BATS_FILE_TMPDIR
	run "$VMG_DRIVERS/kubewatch" --kubeconfig "$d/nobody.kubeconfig" --namespace "$NS" --list-once
	echo "$output"
	[ "$status" -eq 3 ]
	line=$(echo "$output" | grep '"event":"list"')
	[ "$(jq -r .err <<<"$line")" = forbidden ]
	[ "$(jq -r .code <<<"$line")" = 403 ]
	[ "$(jq -r .reason <<<"$line")" = Forbidden ]
	[ "$(jq -r .attempts <<<"$line")" = 1 ]
	[[ "$(jq -r .message <<<"$line")" == *"cannot list resource \"vmgroups\""* ]]
	# The informer reports each failure and backs off (0.8 s, 1.6 s, ...).
	kw_start --kubeconfig "$d/nobody.kubeconfig" --namespace "$NS"
	wait_seen 10 '"event":"error"'
	sleep 2
	n=$(count '"event":"error"')
	[ "$n" -ge 2 ]
	[ "$n" -le 4 ]
	grep '"event":"error"' "$OUT" | head -n 1 | grep -qF '"reason":"Forbidden"'
	none '"event":"synced"'
	kw_stop
}

@test "kube: a server certificate from the wrong CA fails at once" {
	local d=$BATS_FILE_TMPDIR
	run "$VMG_DRIVERS/kubewatch" --kubeconfig "$d/wrongca.kubeconfig" --namespace "$NS" --list-once
	echo "$output"
	[ "$status" -eq 3 ]
	line=$(echo "$output" | grep '"event":"list"')
	[ "$(jq -r .status <<<"$line")" = 0 ]
	[ "$(jq -r .attempts <<<"$line")" = 1 ]
	[[ "$(jq -r .message <<<"$line")" == *certificate* ]]
}

@test "kube: list-once pages through many groups with a small page size" {
	pids=()
	for i in $(seq 1 12); do
		vg_apply "page-$i" 1 &
		pids+=($!)
	done
	# Not a bare wait: it would also wait for bats' own test-timeout job.
	wait "${pids[@]}"
	run "$VMG_DRIVERS/kubewatch" --kubeconfig "$KUBECONFIG" --namespace "$NS" --list-once \
		--page-size 5
	echo "$output"
	[ "$status" -eq 0 ]
	line=$(echo "$output" | grep '"event":"list"')
	[ "$(jq -r .count <<<"$line")" = "$(kubectl get vg -n "$NS" -o name | wc -l)" ]
	[ "$(jq -r .attempts <<<"$line")" -ge 3 ]
	kubectl delete vg -n "$NS" $(seq -f 'page-%g' 1 12) >/dev/null
}
