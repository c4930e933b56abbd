#!/usr/bin/env bats
# Kubernetes Events about VmGroups in the real API server, written by the
# driver build/e2e/events (kube/events.c over kube/kube.c):
# aggregation into one Event with a count, a new Event per reason, what
# kubectl describe shows, the per-object rate limit, the message bound.

load helpers

setup_file() {
	[ -x "$VMG_DRIVERS/events" ] || {
		echo "missing $VMG_DRIVERS/events: run make build/e2e/events" >&2
		return 1
	}
	kubectl apply -k "$VMG_TOP/crds" >/dev/null
	kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null
	new_namespace
	echo "$NS" >"$BATS_FILE_TMPDIR/ns"
	local vg
	for vg in web burst same long; do
		kubectl apply -f - >/dev/null <<EOF
apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata: {name: $vg, namespace: $NS}
spec: {cpu: 1, memory: 1, template: vm-operator-template, replicas: 0}
EOF
	done
}

teardown_file() {
	kubectl delete namespace "$(cat "$BATS_FILE_TMPDIR/ns")" --wait=false >/dev/null 2>&1 || true
}

setup() {
	NS=$(cat "$BATS_FILE_TMPDIR/ns")
	export NS
}

# record VG ARGS...: runs the driver on the VmGroup VG; its JSON line of
# counters is in $out.
record() {
	local vg=$1
	shift
	out=$("$VMG_DRIVERS/events" --namespace "$NS" --name "$vg" "$@")
	echo "driver: $out"
}

# stat NAME: a counter of the driver's last run.
stat() {
	jq -r ".$1" <<<"$out"
}

# events_of VG JSONPATH: the Events whose involved object is VG.
events_of() {
	kubectl get events -n "$NS" --field-selector "involvedObject.name=$1" -o "jsonpath=$2"
}

@test "events: the same event recorded 5 times is one Event with count 5" {
	record web --reason Scaled --message "scaled to 3 replicas" --times 5 --interval-ms 200
	[ "$(stat recorded)" = 5 ]
	[ "$(stat created)" = 1 ]
	[ "$(stat patched)" -ge 1 ]
	[ "$(stat failed)" = 0 ]
	run events_of web '{range .items[*]}{.reason}/{.type}/{.count}/{.message}{"\n"}{end}'
	echo "$output"
	[ "$output" = "Scaled/Normal/5/scaled to 3 replicas" ]
	uid=$(kubectl get vg web -n "$NS" -o 'jsonpath={.metadata.uid}')
	[ "$(events_of web '{.items[0].involvedObject.uid}')" = "$uid" ]
	[ "$(events_of web '{.items[0].involvedObject.kind}')" = VmGroup ]
	[ "$(events_of web '{.items[0].source.component}')" = vmgroup-operator ]
	[ "$(events_of web '{.items[0].reportingComponent}')" = vmgroup-operator ]
	[[ "$(events_of web '{.items[0].metadata.name}')" =~ ^web\.[0-9a-f]+$ ]]
	first=$(events_of web '{.items[0].firstTimestamp}')
	last=$(events_of web '{.items[0].lastTimestamp}')
	[[ "$first" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	[[ ! "$last" < "$first" ]]
}

@test "events: a different reason makes a second Event" {
	record web --reason CloneFailed --type Warning --message "clone of web-0 failed"
	[ "$(stat created)" = 1 ]
	run events_of web '{range .items[*]}{.reason}/{.type}/{.count}{"\n"}{end}'
	echo "$output"
	[ "$(sort <<<"$output")" = "$(printf 'CloneFailed/Warning/1\nScaled/Normal/5')" ]
}

@test "events: kubectl describe vg shows them" {
	run kubectl describe vg web -n "$NS"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *Events:* ]]
	grep -Eq 'Normal +Scaled .*vmgroup-operator.* scaled to 3 replicas' <<<"$output"
	grep -Eq 'Warning +CloneFailed .*clone of web-0 failed' <<<"$output"
	grep -Eq '\(x5 over' <<<"$output"
}

@test "events: more than the burst (25) in a burst is rate limited per object" {
	# 30 different events at once: 25 Events, 5 dropped.
	record burst --reason Resized --message "resized" --times 30 --vary
	[ "$(stat recorded)" = 25 ]
	[ "$(stat rate_limited)" = 5 ]
	[ "$(stat created)" = 25 ]
	[ "$(events_of burst '{range .items[*]}{.metadata.name}{"\n"}{end}' | grep -c .)" = 25 ]
	# 30 equal events at once: one Event counting 25.
	record same --reason Resized --message "resized" --times 30
	[ "$(stat rate_limited)" = 5 ]
	[ "$(events_of same '{range .items[*]}{.count}{"\n"}{end}')" = 25 ]
	# Other objects are not limited by them.
	record web --reason Scaled --message "scaled to 4 replicas"
	[ "$(stat rate_limited)" = 0 ]
	[ "$(stat created)" = 1 ]
}

@test "events: a long message is cut to 1024 bytes" {
	msg=$(head -c 3000 /dev/zero | tr '\0' m)
	record long --reason Scaled --message "$msg"
	m=$(events_of long '{.items[0].message}')
	[ "${#m}" -eq 1024 ]
	[[ "$m" == *mmm... ]]
}
