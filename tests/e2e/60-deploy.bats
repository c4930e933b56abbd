#!/usr/bin/env bats
# Shipping it: the kustomize deploy renders and the API server accepts it;
# the manager runs with nothing but the rendered RBAC; /metrics answers
# 401, 403 and 200 the kube-rbac-proxy way and passes promtool; a real
# Prometheus scrapes it and evaluates the shipped alerts, which pass
# promtool's unit tests; secrets stay out of logs and metrics.

load helpers
load manager

NS=vmgroup-operator-system
SA=vmgroup-operator-controller-manager

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl create namespace vmgroup-operator-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl create namespace deploy-e2e --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

teardown_file() {
	stop_manager deploy-manager
	[ -f "$ENV_DIR/run/prometheus.pid" ] && kill "$(cat "$ENV_DIR/run/prometheus.pid")" 2>/dev/null || true
}

# kubeconfig_for TOKEN FILE: a kubeconfig that authenticates with TOKEN only.
kubeconfig_for() {
	cat >"$2" <<EOF
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
    token: $1
contexts:
- name: e2e
  context: {cluster: e2e, user: sa, namespace: $NS}
current-context: e2e
EOF
}

@test "deploy: kubectl kustomize config/default renders and the API server accepts every object" {
	run kubectl kustomize "$VMG_TOP/config/default"
	[ "$status" -eq 0 ]
	echo "$output" >"$BATS_FILE_TMPDIR/rendered.yaml"
	for kind in Namespace CustomResourceDefinition ServiceAccount Role ClusterRole RoleBinding ClusterRoleBinding Service Deployment; do
		grep -q "^kind: $kind\$" "$BATS_FILE_TMPDIR/rendered.yaml" || { echo "no $kind"; return 1; }
	done
	run kubectl apply --dry-run=server -f "$BATS_FILE_TMPDIR/rendered.yaml"
	echo "$output"
	[ "$status" -eq 0 ]
	# The Deployment reads vc-creds and runs hardened.
	grep -q 'name: vc-creds' "$BATS_FILE_TMPDIR/rendered.yaml"
	grep -q 'readOnlyRootFilesystem: true' "$BATS_FILE_TMPDIR/rendered.yaml"
	grep -q 'runAsNonRoot: true' "$BATS_FILE_TMPDIR/rendered.yaml"
	grep -q -- '- --leader-elect' "$BATS_FILE_TMPDIR/rendered.yaml"
	kubectl kustomize "$VMG_TOP/config/prometheus" | grep -q 'kind: ServiceMonitor'
}

# alert_rules FILE: the spec of config/prometheus's PrometheusRule, as
# kustomize renders it, written to FILE as the Prometheus rule file it is.
alert_rules() {
	kubectl kustomize "$VMG_TOP/config/prometheus" |
		awk '/^kind: PrometheusRule$/ { r = 1 } /^---$/ { r = 0; s = 0 } r && s { print } r && /^spec:$/ { s = 1 }' |
		sed 's/^  //' >"$1"
}

@test "deploy: the shipped alerts are valid rules and fire as their unit tests say (promtool)" {
	alert_rules "$BATS_TEST_TMPDIR/alerts.rules.yml"
	run promtool check rules "$BATS_TEST_TMPDIR/alerts.rules.yml"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"SUCCESS: 2 rules found"* ]]
	cp "$VMG_TOP/tests/e2e/alerts_test.yml" "$BATS_TEST_TMPDIR/"
	run promtool test rules "$BATS_TEST_TMPDIR/alerts_test.yml"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "deploy: with only the rendered RBAC, the manager runs a create/scale/delete lifecycle without a forbidden request" {
	kubectl kustomize "$VMG_TOP/config/default" |
		awk 'BEGIN { RS = "\n---\n" } /\nkind: (ServiceAccount|Role|ClusterRole|RoleBinding|ClusterRoleBinding)\n/ { print; print "---" }' |
		kubectl apply -f - >/dev/null
	token=$(kubectl create token "$SA" -n "$NS" --duration=2h)
	kubeconfig_for "$token" "$BATS_FILE_TMPDIR/sa.kubeconfig"
	echo "$token" >"$BATS_FILE_TMPDIR/sa.token"
	KUBECONFIG="$BATS_FILE_TMPDIR/sa.kubeconfig" start_manager deploy-manager \
		--watch-namespace deploy-e2e --leader-elect --leader-election-namespace "$NS" \
		--leader-election-lease-duration=4s --leader-election-renew-deadline=3s \
		--leader-election-retry-period=1s
	apply_vg deploy-e2e life 1 1 vm-operator-template 2
	wait_running deploy-e2e life 2
	kubectl scale vg life -n deploy-e2e --replicas=3
	wait_running deploy-e2e life 3
	kubectl delete vg life -n deploy-e2e --timeout=90s
	run kubectl get lease -n "$NS" vmgroup-operator-leader -o jsonpath='{.spec.holderIdentity}'
	[ -n "$output" ]
	forbidden=$(curl -sf "$METRICS_URL" | awk '/^rest_client_requests_total/ && /code="403"/ { s += $2 } END { print s + 0 }')
	[ "$forbidden" = 0 ]
	refute grep -qi forbidden "$ENV_DIR/logs/deploy-manager.log"
	run kubectl get events -n deploy-e2e --field-selector involvedObject.name=life -o name
	[ -n "$output" ]
}

@test "deploy: secure metrics answer 401 without a token, 403 without permission, 200 with it, and pass promtool" {
	pick_port sport
	KUBECONFIG="$BATS_FILE_TMPDIR/sa.kubeconfig" start_manager deploy-secure \
		--watch-namespace deploy-e2e --leader-elect --leader-election-namespace "$NS" --leader-election-id secure-lease
	# start_manager served plain metrics; run one more with HTTPS metrics.
	stop_manager deploy-secure
	KUBECONFIG="$BATS_FILE_TMPDIR/sa.kubeconfig" setsid "$VMG_BIN" --vc-ca-file "$VC_CA_FILE" \
		--metrics-bind-address "127.0.0.1:$sport" --health-probe-bind-address 0 \
		--watch-namespace deploy-e2e --leader-elect --leader-election-namespace "$NS" --leader-election-id secure-lease \
		</dev/null >>"$ENV_DIR/logs/deploy-secure.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/deploy-secure.pid"
	url=https://127.0.0.1:$sport/metrics
	retry 20 bash -c "curl -sk -o /dev/null '$url'"

	run curl -sk -o /dev/null -w '%{http_code}' "$url"
	[ "$output" = 401 ]
	run curl -sk -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer not-a-token' "$url"
	[ "$output" = 401 ]
	# Read only: another method is refused before any review.
	run curl -sk -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer not-a-token' "$url"
	[ "$output" = 405 ]

	kubectl create serviceaccount scraper-denied -n "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	denied=$(kubectl create token scraper-denied -n "$NS")
	run curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $denied" "$url"
	[ "$output" = 403 ]

	kubectl create serviceaccount scraper -n "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl create clusterrolebinding scraper-metrics --clusterrole=vmgroup-operator-metrics-reader \
		--serviceaccount="$NS:scraper" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	allowed=$(kubectl create token scraper -n "$NS" --duration=1h)
	echo "$allowed" >"$BATS_FILE_TMPDIR/scraper.token"
	run curl -sk -w '\n%{http_code}' -H "Authorization: Bearer $allowed" "$url"
	[ "$(echo "$output" | tail -1)" = 200 ]
	echo "$output" | sed '$d' >"$BATS_FILE_TMPDIR/metrics.txt"
	for m in controller_runtime_reconcile_total workqueue_depth rest_client_requests_total \
		leader_election_master_status process_resident_memory_bytes vmgroup_vcenter_requests_total; do
		grep -q "^# TYPE $m " "$BATS_FILE_TMPDIR/metrics.txt" || { echo "no $m"; return 1; }
	done
	run promtool check metrics <"$BATS_FILE_TMPDIR/metrics.txt"
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	# TLS 1.1 is refused.
	run curl -sk --tls-max 1.1 -o /dev/null "$url"
	[ "$status" -ne 0 ]
	echo "$sport" >"$BATS_FILE_TMPDIR/secure.port"
}

@test "deploy: a real Prometheus scrapes the endpoint with a bearer token, reports the target up and evaluates the shipped alerts" {
	sport=$(cat "$BATS_FILE_TMPDIR/secure.port")
	pick_port pport
	alert_rules "$BATS_FILE_TMPDIR/alerts.rules.yml"
	cat >"$BATS_FILE_TMPDIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $BATS_FILE_TMPDIR/alerts.rules.yml
scrape_configs:
  - job_name: vmgroup-operator
    scheme: https
    authorization:
      credentials_file: $BATS_FILE_TMPDIR/scraper.token
    tls_config:
      insecure_skip_verify: true
    static_configs:
      - targets: ["127.0.0.1:$sport"]
EOF
	setsid prometheus --config.file="$BATS_FILE_TMPDIR/prometheus.yml" \
		--storage.tsdb.path="$BATS_FILE_TMPDIR/tsdb" --web.listen-address="127.0.0.1:$pport" \
		</dev/null >>"$ENV_DIR/logs/prometheus.log" 2>&1 3>&- 4>&- &
	echo $! >"$ENV_DIR/run/prometheus.pid"
	retry 60 bash -c "curl -sf http://127.0.0.1:$pport/api/v1/targets | jq -e '.data.activeTargets[0].health == \"up\"' >/dev/null"
	up_value() {
		curl -sfG --data-urlencode 'query=up{job="vmgroup-operator"}' "http://127.0.0.1:$pport/api/v1/query" |
			jq -r '.data.result[0].value[1]'
	}
	retry 20 bash -c "[ \"\$(curl -sfG --data-urlencode 'query=up{job=\"vmgroup-operator\"}' http://127.0.0.1:$pport/api/v1/query | jq -r '.data.result[0].value[1]')\" = 1 ]"
	run up_value
	[ "$output" = 1 ]
	# Both alerts are evaluated against the manager's series without error,
	# and neither fires: vCenter is in use and has not gone away.
	retry 20 bash -c "curl -sf http://127.0.0.1:$pport/api/v1/rules | jq -e '[.data.groups[].rules[] | select(.health == \"ok\" and .state == \"inactive\" and (.lastEvaluation | startswith(\"0001\") | not))] | length == 2' >/dev/null"
	# The series the rules read are the manager's, each once.
	for q in vmgroup_vcenter_ready vmgroup_vcenter_outages_total leader_election_master_status; do
		run curl -sfG --data-urlencode "query=$q" "http://127.0.0.1:$pport/api/v1/query"
		[ "$status" -eq 0 ]
		[ "$(jq '.data.result | length' <<<"$output")" = 1 ]
	done
	run curl -sfG --data-urlencode 'query=vmgroup_vcenter_ready' "http://127.0.0.1:$pport/api/v1/query"
	[ "$(jq -r '.data.result[0].value[1]' <<<"$output")" = 1 ]
}

@test "deploy: secrets never appear in logs or metrics" {
	for f in "$ENV_DIR"/logs/deploy-*.log "$BATS_FILE_TMPDIR/metrics.txt"; do
		refute grep -qF "$VC_PASS" "$f"
		refute grep -qF "$(cat "$BATS_FILE_TMPDIR/sa.token")" "$f"
		refute grep -qF "$(cat "$BATS_FILE_TMPDIR/scraper.token")" "$f"
	done
	stop_manager deploy-secure
}
