#!/usr/bin/env bats
# Templates are templates: a VmGroup clones only from a VM template of the
# operator's datacenter that lies outside the operator's root folder. A
# plain VM, a template inside another group's folder (its VMs and disks
# are another namespace's) or inside the root folder, and a path out of the
# datacenter's VM folder are refused: phase ERROR saying what was found and
# why, and no clone is made.

load helpers
load manager

NS=e2e-templates
ROOT=/DC0/vm/vm-operator
POOL=/DC0/host/DC0_C0/Resources

g() { GOVC_PERSIST_SESSION=false govc "$@"; }

setup_file() {
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	start_manager templates-manager --sync-period=3s --watch-namespace "$NS" --datacenter DC0
}

teardown_file() {
	kubectl delete vg --all -n "$NS" --timeout=120s >/dev/null 2>&1 || true
	stop_manager templates-manager
	# What the tests made in vCenter, wherever a failure left it.
	for vm in /DC0/vm/e2e-plain-vm "$ROOT/e2e-rooted" /DC0/vm/e2e-lib/e2e-deep; do
		g vm.destroy "$vm" >/dev/null 2>&1 || true
	done
	g object.destroy /DC0/vm/e2e-lib >/dev/null 2>&1 || true
	for f in $(g find "$ROOT" -type f -name "${NS}_*" 2>/dev/null); do
		g find "$f" -type m | xargs -r -n1 env GOVC_PERSIST_SESSION=false govc vm.destroy >/dev/null 2>&1 || true
		g object.destroy "$f" >/dev/null 2>&1 || true
	done
}

setup() {
	manager_urls templates-manager
}

# clones_of NAME: the VMs anywhere in vCenter that a group NAME would have
# cloned (NAME-0, NAME-1, ...).
clones_of() {
	g find / -type m -name "$1-*" 2>/dev/null || true
}

# refused_now NAME TEMPLATE TEXT: the group NAME, as of its current spec
# (spec.template TEMPLATE), is ERROR with TEXT in its lastMessage and a
# Warning TemplateRefused event saying the same.
refused_now() {
	local name=$1 tmpl=$2 text=$3 gen obs
	[ "$(phase "$NS" "$name")" = ERROR ] || return 1
	[ "$(vg_field "$NS" "$name" '{.spec.template}')" = "$tmpl" ] || return 1
	gen=$(vg_field "$NS" "$name" '{.metadata.generation}')
	obs=$(vg_field "$NS" "$name" '{.status.observedGeneration}')
	[ "$gen" = "$obs" ] || return 1
	[[ "$(vg_field "$NS" "$name" '{.status.lastMessage}')" == *"$text"* ]] || return 1
	kubectl get events -n "$NS" --field-selector "involvedObject.name=$name,reason=TemplateRefused" \
		-o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}' | grep -qF "Warning" || return 1
	kubectl get events -n "$NS" --field-selector "involvedObject.name=$name,reason=TemplateRefused" \
		-o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -qF -- "$text"
}

# refused NAME TEMPLATE TEXT: waits for refused_now, then checks that
# nothing was cloned for the group, in its folder or anywhere.
refused() {
	retry 60 refused_now "$@" || {
		echo "phase: $(phase "$NS" "$1"); lastMessage: $(vg_field "$NS" "$1" '{.status.lastMessage}')"
		return 1
	}
	[ "$(vm_count "$NS" "$1")" = 0 ]
	[ -z "$(clones_of "$1")" ]
}

@test "templates: a plain VM as spec.template gives ERROR saying it is not a template, and no clone" {
	g vm.create -on=false -c 1 -m 1024 -g otherGuest -net "VM Network" -folder /DC0/vm \
		-pool "$POOL" -ds LocalDS_0 e2e-plain-vm
	[ "$(g object.collect -s /DC0/vm/e2e-plain-vm config.template)" = false ]
	apply_vg "$NS" plain 1 1 e2e-plain-vm 1
	refused plain e2e-plain-vm 'template "e2e-plain-vm" is a virtual machine, not a template'
	# By its inventory path alike.
	kubectl patch vg plain -n "$NS" --type=merge -p '{"spec":{"template":"/DC0/vm/e2e-plain-vm"}}'
	refused plain /DC0/vm/e2e-plain-vm \
		'template "/DC0/vm/e2e-plain-vm" is a virtual machine, not a template'
	# Still nothing, a few resyncs later.
	sleep 7
	[ "$(phase "$NS" plain)" = ERROR ]
	[ -z "$(clones_of plain)" ]
}

@test "templates: a template inside another group's folder or the root folder gives ERROR, and no clone" {
	apply_vg "$NS" victim 1 1 vm-operator-template 1
	wait_running "$NS" victim 1
	victim=$(folder_of "$NS" victim)
	# Someone makes templates where the groups' VMs live: in a group's
	# folder, and right in the root folder.
	g vm.clone -vm /DC0/vm/vm-operator-template -folder "$victim" -on=false -pool "$POOL" e2e-stolen
	g vm.markastemplate "$victim/e2e-stolen"
	g vm.clone -vm /DC0/vm/vm-operator-template -folder "$ROOT" -on=false -pool "$POOL" e2e-rooted
	g vm.markastemplate "$ROOT/e2e-rooted"

	apply_vg "$NS" thief 1 1 "$victim/e2e-stolen" 1
	refused thief "$victim/e2e-stolen" \
		"template \"$victim/e2e-stolen\" is inside the operator's folder $ROOT"
	# The group's own VM, by name: inside too.
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"victim-0"}}'
	refused thief victim-0 "template \"victim-0\" is inside the operator's folder $ROOT"
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"e2e-stolen"}}'
	refused thief e2e-stolen "template \"e2e-stolen\" is inside the operator's folder $ROOT"
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"e2e-rooted"}}'
	refused thief e2e-rooted "template \"e2e-rooted\" is inside the operator's folder $ROOT"
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"vm-operator/e2e-rooted"}}'
	refused thief vm-operator/e2e-rooted \
		"template \"vm-operator/e2e-rooted\" is inside the operator's folder $ROOT"
	# A path out of the datacenter's VM folder is refused as written.
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"/DC1/vm/e2e-far"}}'
	refused thief /DC1/vm/e2e-far \
		'template "/DC1/vm/e2e-far" is outside datacenter DC0: an inventory path must begin with /DC0/vm/'
	# The victim keeps its one VM; the template put into its folder is not
	# its own, and is left alone.
	[ "$(vg_field "$NS" victim '{.status.currentReplicas}')" = 1 ]
	[ "$(vms "$NS" victim)" = "$(printf 'e2e-stolen\nvictim-0')" ]
}

@test "templates: a real template outside the root folder runs, found by name or path" {
	# The environment's template, in /DC0/vm.
	kubectl patch vg thief -n "$NS" --type=merge -p '{"spec":{"template":"vm-operator-template"}}'
	wait_running "$NS" thief 1
	# One deeper in a folder of its own, whose namesake in a group's folder
	# does not make the name ambiguous.
	g folder.create /DC0/vm/e2e-lib
	g vm.clone -vm /DC0/vm/vm-operator-template -folder /DC0/vm/e2e-lib -on=false -pool "$POOL" e2e-deep
	g vm.markastemplate /DC0/vm/e2e-lib/e2e-deep
	victim=$(folder_of "$NS" victim)
	# (vcsim keeps a VM's files under its name: the namesake is renamed.)
	g vm.clone -vm /DC0/vm/vm-operator-template -folder "$victim" -on=false -pool "$POOL" e2e-deep-2
	g object.rename "$victim/e2e-deep-2" e2e-deep
	g vm.markastemplate "$victim/e2e-deep"
	apply_vg "$NS" deep 1 1 e2e-deep 1
	wait_running "$NS" deep 1
	kubectl patch vg deep -n "$NS" --type=merge -p '{"spec":{"template":"/DC0/vm/e2e-lib/e2e-deep","replicas":2}}'
	wait_running "$NS" deep 2
	run bash -c "GOVC_PERSIST_SESSION=false govc vm.info -e $(folder_of "$NS" deep)/deep-1 | grep vmgroup.codeconnect.vmworld.com.template"
	[[ "$output" == */DC0/vm/e2e-lib/e2e-deep* ]]
	[ "$(vg_field "$NS" deep '{.status.conditions[?(@.type=="Degraded")].status}')" = False ]
	g vm.destroy "$victim/e2e-deep" "$victim/e2e-stolen"
}
