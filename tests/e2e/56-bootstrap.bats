#!/usr/bin/env bats
# Guest bootstrap with cloud-init: a VmGroup's spec.bootstrap.cloudInit.secretRef
# reaches each clone as the VMware guestinfo datasource (extraConfig), with
# metadata of its own; a missing Secret or key is an ERROR with no clone; the
# user data shows nowhere but in the clones.

load helpers
load manager

# The user data's text, which must appear in no log, event or status.
MARKER=boot-marker-5c1e9a
USERDATA=$'#cloud-config\nruncmd:\n  - echo boot-marker-5c1e9a\n'
USERDATA2=$'#cloud-config\nruncmd:\n  - echo boot-marker-5c1e9a second\n'

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace boot --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl -n boot create secret generic init --from-literal=user-data="$USERDATA" >/dev/null
	kubectl -n boot create secret generic other --from-literal=cloud.cfg="$USERDATA" >/dev/null
	start_manager boot-manager --sync-period=3s --watch-namespace boot
}

teardown_file() {
	kubectl delete vg --all -n boot --wait=false >/dev/null 2>&1 || true
	retry 60 bash -c '[ -z "$(kubectl get vg -n boot -o name 2>/dev/null)" ]' || true
	stop_manager boot-manager
	stop_manager boot-sa
}

setup() {
	manager_urls boot-manager
}

# apply_boot NAME REPLICAS SECRET [KEY]: a group with a bootstrap, in
# namespace $BOOT_NS (boot by default).
apply_boot() {
	local key=""
	[ -z "${4:-}" ] || key="
        key: $4"
	kubectl apply -f - <<YAML
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: $1
  namespace: ${BOOT_NS:-boot}
spec:
  cpu: 1
  memory: 1
  template: vm-operator-template
  replicas: $2
  bootstrap:
    cloudInit:
      secretRef:
        name: $3$key
YAML
}

# extra NAME VM KEY: one extraConfig value of a group's VM in boot, as govc
# reads it; extra_in NS NAME VM KEY in another namespace.
extra() { extra_in boot "$@"; }
extra_in() {
	GOVC_PERSIST_SESSION=false govc vm.info -e -json "$(folder_of "$1" "$2")/$3" |
		jq -r --arg k "$4" '(.virtualMachines // .VirtualMachines)[0] | (.config // .Config) | (.extraConfig // .ExtraConfig)[] | select((.key // .Key) == $k) | (.value // .Value)'
}

@test "bootstrap: kubectl explain describes every field of spec.bootstrap" {
	# The API server publishes a changed CRD's OpenAPI schema a moment
	# after it is established; explain reads that schema.
	retry 30 bash -c 'kubectl explain vg.spec.bootstrap | tr -s " \n" " " | grep -qF "at first boot"'
	for f in spec.bootstrap spec.bootstrap.cloudInit spec.bootstrap.cloudInit.secretRef \
		spec.bootstrap.cloudInit.secretRef.name spec.bootstrap.cloudInit.secretRef.key; do
		run kubectl explain "vg.$f"
		[ "$status" -eq 0 ]
		[[ "$output" == *DESCRIPTION* ]]
		[[ "$output" != *"<empty>"* ]]
	done
	run bash -c 'kubectl explain vg.spec.bootstrap.cloudInit.secretRef | tr -s " \n" " "'
	[[ "$output" == *"Name of the Secret"* ]]
	[[ "$output" == *"user-data when not given"* ]]
	# name is required, and the key's form is checked.
	run kubectl apply -f - <<YAML
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata: {name: bad, namespace: boot}
spec: {cpu: 1, memory: 1, template: t, replicas: 0, bootstrap: {cloudInit: {secretRef: {key: a/b}}}}
YAML
	[ "$status" -ne 0 ]
	[[ "$output" == *secretRef.name* ]]
	[[ "$output" == *secretRef.key* ]]
}

@test "bootstrap: each clone carries the user data and its own metadata in guestinfo" {
	apply_boot web 2 init
	wait_running boot web 2
	want=$(kubectl -n boot get secret init -o jsonpath='{.data.user-data}')
	uid=$(kubectl -n boot get vg web -o jsonpath='{.metadata.uid}')
	[ -n "$uid" ]
	for vm in web-0 web-1; do
		[ "$(extra web $vm guestinfo.userdata)" = "$want" ]
		[ "$(extra web $vm guestinfo.userdata.encoding)" = base64 ]
		[ "$(extra web $vm guestinfo.metadata.encoding)" = base64 ]
		meta=$(extra web $vm guestinfo.metadata | base64 -d)
		[ "$(jq -r '."local-hostname"' <<<"$meta")" = "$vm" ]
		[ "$(jq -r '."instance-id"' <<<"$meta")" = "$vm.$uid" ]
		[ "$(extra web $vm guestinfo.userdata | base64 -d)" = "$(printf '%s' "$USERDATA")" ]
	done
	[ "$(extra web web-0 guestinfo.metadata)" != "$(extra web web-1 guestinfo.metadata)" ]
}

@test "bootstrap: a change of the Secret applies to the VMs created afterwards" {
	kubectl -n boot create secret generic init --from-literal=user-data="$USERDATA2" \
		--dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl scale vg web -n boot --replicas=3
	wait_running boot web 3
	[ "$(extra web web-2 guestinfo.userdata | base64 -d)" = "$(printf '%s' "$USERDATA2")" ]
	[ "$(extra web web-0 guestinfo.userdata | base64 -d)" = "$(printf '%s' "$USERDATA")" ]
	# The status says so, as it does for a template change.
	[[ "$(vg_field boot web '{.status.lastMessage}')" == *'Secret "init"'*"applies to VMs created afterwards"* ]]
}

@test "bootstrap: a missing Secret is phase ERROR naming it, with no clone" {
	apply_boot nosecret 2 absent
	retry 30 bash -c '[ "$(kubectl get vg nosecret -n boot -o jsonpath={.status.phase})" = ERROR ]'
	msg=$(vg_field boot nosecret '{.status.lastMessage}')
	[[ "$msg" == *boot/absent* ]]
	[[ "$msg" == *'"user-data"'* ]]
	[ "$(vg_field boot nosecret '{.status.conditions[?(@.type=="Degraded")].reason}')" = BootstrapSecretNotFound ]
	sleep 3
	[ "$(vm_count boot nosecret)" = 0 ]
	run kubectl describe vg nosecret -n boot
	[[ "$output" == *BootstrapSecretNotFound* ]]
}

@test "bootstrap: a missing key is phase ERROR naming the Secret and key, with no clone" {
	apply_boot nokey 1 other
	retry 30 bash -c '[ "$(kubectl get vg nokey -n boot -o jsonpath={.status.phase})" = ERROR ]'
	msg=$(vg_field boot nokey '{.status.lastMessage}')
	[[ "$msg" == *boot/other* ]]
	[[ "$msg" == *'"user-data"'* ]]
	[ "$(vg_field boot nokey '{.status.conditions[?(@.type=="Degraded")].reason}')" = BootstrapKeyNotFound ]
	sleep 3
	[ "$(vm_count boot nokey)" = 0 ]
	# With the right key, the group recovers (the spec changed).
	apply_boot nokey 1 other cloud.cfg
	wait_running boot nokey 1
	[ "$(extra nokey nokey-0 guestinfo.userdata | base64 -d)" = "$(printf '%s' "$USERDATA")" ]
}

@test "bootstrap: the user data appears in no log, event or status" {
	b64=$(printf '%s' "$USERDATA" | base64 -w0)
	refute grep -q -e "$MARKER" -e "$b64" "$ENV_DIR/logs/boot-manager.log"
	run kubectl get events -n boot -o json
	[ "$status" -eq 0 ]
	[[ "$output" != *"$MARKER"* ]]
	[[ "$output" != *"$b64"* ]]
	run kubectl get vg -n boot -o json
	[ "$status" -eq 0 ]
	[[ "$output" != *"$MARKER"* ]]
	[[ "$output" != *"$b64"* ]]
	run curl -sf "$METRICS_URL"
	[[ "$output" != *"$MARKER"* ]]
}

@test "bootstrap: the shipped RBAC only gets Secrets; without its binding a group is ERROR BootstrapSecretForbidden, and a RoleBinding mends it" {
	local sa=vmgroup-operator-controller-manager op=vmgroup-operator-system
	local as=system:serviceaccount:$op:$sa rb=vmgroup-operator-manager-secret-reader
	for ns in "$op" boot-rb; do
		kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	done
	kubectl kustomize "$VMG_TOP/config/default" |
		awk 'BEGIN { RS = "\n---\n" } /\nkind: (ServiceAccount|Role|ClusterRole|RoleBinding|ClusterRoleBinding)\n/ { print; print "---" }' |
		kubectl apply -f - >/dev/null
	[ "$(kubectl auth can-i get secrets -n boot --as="$as")" = yes ]
	run kubectl auth can-i list secrets -n boot --as="$as"
	[ "$output" = no ]
	run kubectl auth can-i watch secrets -n boot --as="$as"
	[ "$output" = no ]

	# As the README says, for those who want less: no ClusterRoleBinding,
	# a RoleBinding per namespace.
	kubectl delete clusterrolebinding "$rb" >/dev/null
	kubectl -n boot-rb create secret generic init --from-literal=user-data="$USERDATA" >/dev/null
	token=$(kubectl create token "$sa" -n "$op" --duration=1h)
	cat >"$BATS_FILE_TMPDIR/sa.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "$KUBE_APISERVER_URL", certificate-authority: "$ENV_DIR/pki/ca.crt"}
users:
- name: sa
  user: {token: "$token"}
contexts:
- name: e2e
  context: {cluster: e2e, user: sa}
current-context: e2e
YAML
	KUBECONFIG="$BATS_FILE_TMPDIR/sa.kubeconfig" start_manager boot-sa --sync-period=3s --watch-namespace boot-rb
	BOOT_NS=boot-rb apply_boot rb 1 init
	retry 30 bash -c '[ "$(kubectl get vg rb -n boot-rb -o jsonpath={.status.phase})" = ERROR ]'
	[ "$(vg_field boot-rb rb '{.status.conditions[?(@.type=="Degraded")].reason}')" = BootstrapSecretForbidden ]
	[[ "$(vg_field boot-rb rb '{.status.lastMessage}')" == *boot-rb/init* ]]
	[ "$(vm_count boot-rb rb)" = 0 ]
	kubectl -n boot-rb create rolebinding "$rb" --clusterrole="$rb" --serviceaccount="$op:$sa" >/dev/null
	# A spec change ends the block at once (else within a minute).
	kubectl scale vg rb -n boot-rb --replicas=2
	wait_running boot-rb rb 2
	[ "$(extra_in boot-rb rb rb-1 guestinfo.userdata | base64 -d)" = "$(printf '%s' "$USERDATA")" ]
	kubectl delete vg rb -n boot-rb --timeout=90s
	stop_manager boot-sa
	kubectl kustomize "$VMG_TOP/config/default" |
		awk 'BEGIN { RS = "\n---\n" } /\nkind: ClusterRoleBinding\n/ { print; print "---" }' |
		kubectl apply -f - >/dev/null
}
