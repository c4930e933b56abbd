#!/usr/bin/env bats
# Tagging VMs with their VmGroup through the vSphere Automation REST API
# (vsphere/rest.c), against vcsim's vAPI simulator: the driver
# build/e2e/vsrest runs the client's operations and prints one JSON line
# per operation; govc checks what vCenter holds. Everything is made in a
# tag category and a VM folder of this file's own, removed at the end.

load helpers

setup_file() {
	[ -x "$VMG_DRIVERS/vsrest" ] || {
		echo "missing $VMG_DRIVERS/vsrest: run make build/e2e/vsrest" >&2
		return 1
	}
	local id=$$-$RANDOM
	echo "e2e-tagging-$id" >"$BATS_FILE_TMPDIR/category"
	echo "/DC0/vm/e2e-tagging-$id" >"$BATS_FILE_TMPDIR/folder"
	echo "e2e-tagged-vm-$id" >"$BATS_FILE_TMPDIR/vm"
	govc folder.create "/DC0/vm/e2e-tagging-$id"
	govc vm.create -on=false -folder "/DC0/vm/e2e-tagging-$id" -ds LocalDS_0 \
		-pool /DC0/host/DC0_C0/Resources -net "VM Network" -m 128 -c 1 "e2e-tagged-vm-$id"
}

teardown_file() {
	local cat folder
	cat=$(cat "$BATS_FILE_TMPDIR/category")
	folder=$(cat "$BATS_FILE_TMPDIR/folder")
	govc tags.category.rm -f "$cat" >/dev/null 2>&1 || true
	# vm.destroy removes the VM's files too (destroying the folder would not).
	govc vm.destroy "$folder/$(cat "$BATS_FILE_TMPDIR/vm")" >/dev/null 2>&1 || true
	govc object.destroy "$folder" >/dev/null 2>&1 || true
}

setup() {
	CAT=$(cat "$BATS_FILE_TMPDIR/category")
	FOLDER=$(cat "$BATS_FILE_TMPDIR/folder")
	VM_PATH=$FOLDER/$(cat "$BATS_FILE_TMPDIR/vm")
	VM_ID=$(govc ls -i "$VM_PATH" | sed 's/^VirtualMachine://')
	GNS=tagging-$RANDOM
}

teardown() {
	# A driver left waiting by a failed test.
	if [ -e "$BATS_TEST_TMPDIR/pid" ]; then
		kill "$(cat "$BATS_TEST_TMPDIR/pid")" 2>/dev/null || true
	fi
}

# vsrest ARGS...: the driver with this file's category.
vsrest() {
	"$VMG_DRIVERS/vsrest" --category "$CAT" "$@"
}

# field N KEY: KEY of the N-th JSON line (from 1) of $output.
field() {
	sed -n "${1}p" <<<"$output" | jq -r ".$2"
}

@test "tagging: login works, with the CA of the environment" {
	run vsrest login
	[ "$status" -eq 0 ]
	[ "$(field 1 ok)" = true ]
}

@test "tagging: a wrong password is refused with a clear message, and never printed" {
	run vsrest --password "not-the-password-$RANDOM" login + ensure-tag "$GNS" g1
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$(field 1 ok)" = false ]
	[ "$(field 1 available)" = false ]
	[[ "$(field 1 reason)" == *"refused the REST login of user $VC_USER (HTTP 401): wrong user name or password"* ]]
	# Sticky: the next operation is refused at once, with the same reason.
	[ "$(field 2 ok)" = false ]
	[[ "$(field 2 reason)" == *"HTTP 401"* ]]
	[[ "$output" != *not-the-password* ]]
	[[ "$output" != *"$VC_PASS"* ]]
}

@test "tagging: category and tag are ensured, twice gives the same ids" {
	run vsrest ensure-category + ensure-tag "$GNS" web + ensure-tag "$GNS" web
	echo "$output"
	[ "$status" -eq 0 ]
	cat_id=$(field 1 id)
	tag_id=$(field 2 id)
	[[ "$cat_id" == urn:vmomi:InventoryServiceCategory:* ]]
	[[ "$tag_id" == urn:vmomi:InventoryServiceTag:* ]]
	[ "$(field 3 id)" = "$tag_id" ]
	[ "$(field 2 tag)" = "$GNS/web" ]
	# A new client (nothing in memory) finds the same ones.
	run vsrest ensure-category + ensure-tag "$GNS" web
	[ "$status" -eq 0 ]
	[ "$(field 1 id)" = "$cat_id" ]
	[ "$(field 2 id)" = "$tag_id" ]
	# vCenter holds one category of that name, for VMs, and one such tag in it.
	run govc tags.category.info -json "$CAT"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(jq -r --arg n "$CAT" '.[] | select(.name == $n) | .id' <<<"$output")" = "$cat_id" ]
	[[ "$output" == *VirtualMachine* ]]
	run govc tags.ls -c "$CAT"
	[ "$(grep -c "^$GNS/web\b" <<<"$output")" -eq 1 ]
	vsrest delete-tag "$GNS" web
}

@test "tagging: a tag attached to a VM is seen by govc, and detached" {
	run vsrest attach "$GNS" db "$VM_ID" + list "$GNS" db
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field 2 'objects | join(",")')" = "VirtualMachine:$VM_ID" ]
	run govc tags.attached.ls -r "$VM_PATH"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"$GNS/db"* ]]
	tag_id=$(vsrest ensure-tag "$GNS" db | jq -r .id)
	run govc tags.attached.ls "$tag_id"
	[[ "$output" == *"VirtualMachine:$VM_ID"* ]]
	# Attaching again is no error.
	run vsrest attach "$GNS" db "$VM_ID"
	[ "$status" -eq 0 ]
	run vsrest detach "$GNS" db "$VM_ID" + list "$GNS" db
	[ "$status" -eq 0 ]
	[ "$(field 2 'objects | length')" = 0 ]
	run govc tags.attached.ls -r "$VM_PATH"
	[[ "$output" != *"$GNS/db"* ]]
	vsrest delete-tag "$GNS" db
}

@test "tagging: deleting the tag removes it and its attachments" {
	run vsrest attach "$GNS" gone "$VM_ID"
	[ "$status" -eq 0 ]
	run govc tags.attached.ls -r "$VM_PATH"
	[[ "$output" == *"$GNS/gone"* ]]
	run vsrest delete-tag "$GNS" gone + list "$GNS" gone + delete-tag "$GNS" gone
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(field 2 'objects | length')" = 0 ]
	run govc tags.ls -c "$CAT"
	[[ "$output" != *"$GNS/gone"* ]]
	run govc tags.attached.ls -r "$VM_PATH"
	[[ "$output" != *"$GNS/gone"* ]]
}

@test "tagging: a group name past the tag name limit gets a bounded, distinct tag" {
	long=$(printf 'g%.0s' $(seq 1 200))
	# The category is SINGLE (one group per VM): one of them goes on the VM.
	run vsrest attach "$GNS" "$long" "$VM_ID" + ensure-tag "$GNS" "${long}x"
	echo "$output"
	[ "$status" -eq 0 ]
	t1=$(field 1 tag)
	t2=$(field 2 tag)
	[ "${#t1}" -le 80 ]
	[ "${#t2}" -le 80 ]
	[ "$t1" != "$t2" ]
	[[ "$t1" == "$GNS/ggg"*"~"* ]]
	run govc tags.ls -c "$CAT"
	[[ "$output" == *"$t1"* ]]
	[[ "$output" == *"$t2"* ]]
	run govc tags.attached.ls -r "$VM_PATH"
	[[ "$output" == *"$t1"* ]]
	vsrest delete-tag "$GNS" "$long" + delete-tag "$GNS" "${long}x"
}

@test "tagging: a REST endpoint that is not there is reported as tagging unavailable" {
	run vsrest --base "https://$VC_HOST/no-such-prefix" ensure-tag "$GNS" x + attach "$GNS" x vm-1
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$(field 1 code)" = -95 ]
	[[ "$(field 1 msg)" == "tagging unavailable: no vSphere Automation REST endpoint at https://$VC_HOST/no-such-prefix/rest (HTTP 404"* ]]
	[ "$(field 2 available)" = false ]
	# Nothing listening: the same, with curl's reason.
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
	run vsrest --base "https://127.0.0.1:$port" login
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$(field 1 msg)" == "tagging unavailable: cannot reach the vCenter REST API at https://127.0.0.1:$port/rest: "* ]]
	# A certificate that is not trusted is a reason too.
	run vsrest --ca-file /etc/ssl/certs/ca-certificates.crt login
	[ "$status" -eq 1 ]
	[[ "$(field 1 reason)" == *"cannot reach"*"SSL"* ]]
}

# Last: it restarts vcsim, which forgets its sessions (and its tags).
@test "tagging: after vCenter restarts, a call answered 401 logs in again and goes through" {
	D=$BATS_TEST_TMPDIR
	mkfifo "$D/in"
	vsrest login + ensure-category + wait + login + ensure-tag "$GNS" after \
		<"$D/in" >"$D/out" 2>"$D/err" 3>&- &
	echo $! >"$D/pid"
	exec 5>"$D/in"
	retry 20 grep -q '"cmd":"wait"' "$D/out"
	# 3>&-: the new vcsim must not hold bats's output open (bats would wait
	# for it at the end).
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim 3>&-
	echo go >&5
	exec 5>&-
	wait "$(cat "$D/pid")"
	rm -f "$D/pid"
	cat "$D/out" "$D/err"
	run jq -sc '[.[] | [.cmd, .ok, .logins]]' "$D/out"
	# One login before the restart; the session check after it was answered
	# 401, and a second login made it go through, as did the next call.
	[ "$output" = '[["login",true,1],["ensure-category",true,1],["wait",true,null],["login",true,2],["ensure-tag",true,2]]' ]
	tag_id=$(jq -r 'select(.cmd == "ensure-tag") | .id' "$D/out")
	run govc tags.info "$tag_id"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"$GNS/after"* ]]
	govc tags.rm "$tag_id"
}
