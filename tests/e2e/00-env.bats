#!/usr/bin/env bats
# The test environment itself: real servers, with the properties the other
# suites rely on.

load helpers

@test "env: DIR/env exports everything a test or a user needs" {
	for v in KUBECONFIG VC_HOST VC_USER VC_PASS GOVC_URL GOVC_USERNAME GOVC_PASSWORD GOVC_INSECURE; do
		[ -n "${!v}" ] || { echo "$v is empty"; return 1; }
	done
	[ "$GOVC_INSECURE" = 1 ]
	command -v kubectl
	command -v govc
}

@test "env: kube-apiserver answers and enforces RBAC" {
	kubectl get --raw /readyz
	kubectl create namespace env-rbac
	kubectl -n env-rbac create serviceaccount tester
	run kubectl auth can-i list pods -n env-rbac --as=system:serviceaccount:env-rbac:tester
	[ "$status" -ne 0 ]
	[ "$output" = no ]
	run kubectl auth can-i list pods -n env-rbac
	[ "$output" = yes ]
}

@test "env: kubectl create token works for a new ServiceAccount" {
	kubectl create namespace env-token
	kubectl -n env-token create serviceaccount robot
	token=$(kubectl -n env-token create token robot)
	[ -n "$token" ]
	# The token authenticates (whoami answers with the ServiceAccount) ...
	run kubectl --kubeconfig=/dev/null --server="$KUBE_APISERVER_URL" \
		--certificate-authority="$ENV_DIR/pki/ca.crt" --token="$token" auth whoami -o jsonpath='{.status.userInfo.username}'
	[ "$status" -eq 0 ]
	[ "$output" = system:serviceaccount:env-token:robot ]
	# ... and RBAC still says no to what it was not granted.
	run kubectl --kubeconfig=/dev/null --server="$KUBE_APISERVER_URL" \
		--certificate-authority="$ENV_DIR/pki/ca.crt" --token="$token" get pods -n env-token
	[ "$status" -ne 0 ]
	[[ "$output" == *Forbidden* || "$output" == *forbidden* ]]
}

@test "env: govc lists the template and the folder for groups" {
	run govc ls /DC0/vm
	[ "$status" -eq 0 ]
	[[ "$output" == */DC0/vm/vm-operator-template* ]]
	[[ "$output" == */DC0/vm/vm-operator* ]]
	run govc object.collect -s /DC0/vm/vm-operator-template config.template
	[ "$output" = true ]
	run govc ls /DC0/host/DC0_C0
	[ "$(echo "$output" | grep -c '/DC0/host/DC0_C0/DC0_C0_H')" -ge 2 ]
	govc ls /DC0/datastore | grep -q LocalDS_0
}

@test "env: a wrong vCenter password is refused" {
	run env GOVC_PASSWORD=not-the-password GOVC_PERSIST_SESSION=false govc about
	[ "$status" -ne 0 ]
	[[ "$output" == *"Login failure"* ]]
	run env GOVC_PERSIST_SESSION=false govc about
	[ "$status" -eq 0 ]
}

@test "env: vcsim serves TLS that verifies only with its CA, and the REST API" {
	run curl -sS -o /dev/null "https://$VC_HOST/sdk"
	[ "$status" -ne 0 ]
	run curl -sS --cacert "$VC_CA_FILE" -o /dev/null -w '%{http_code}' -X POST \
		-u "$VC_USER:$VC_PASS" "https://$VC_HOST/rest/com/vmware/cis/session"
	[ "$status" -eq 0 ]
	[ "$output" = 200 ]
	run curl -sS --cacert "$VC_CA_FILE" -o /dev/null -w '%{http_code}' -X POST \
		-u "$VC_USER:wrong" "https://$VC_HOST/rest/com/vmware/cis/session"
	[ "$output" = 401 ]
}

@test "env: restart of kube-apiserver and etcd keeps the cluster's objects" {
	kubectl create configmap env-keep --from-literal=k=v
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" etcd
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" kube-apiserver
	run kubectl get configmap env-keep -o jsonpath='{.data.k}'
	[ "$output" = v ]
}

@test "env: restart of vcsim keeps the inventory on the same port" {
	GOVC_PERSIST_SESSION=false govc folder.create /DC0/vm/vm-operator/env-keep
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim
	run env GOVC_PERSIST_SESSION=false govc ls /DC0/vm/vm-operator
	[ "$status" -eq 0 ]
	[[ "$output" == */DC0/vm/vm-operator/env-keep* ]]
	GOVC_PERSIST_SESSION=false govc object.destroy /DC0/vm/vm-operator/env-keep
}
