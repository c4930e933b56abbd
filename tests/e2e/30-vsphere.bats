#!/usr/bin/env bats
# The vCenter side against the environment's vcsim, through the vsdrv
# driver (tests/e2e/drivers/vsdrv.c): session and TLS modes, placement,
# operations with task tracking, the inventory watch and its recovery, the
# bound on tasks in flight. Test VMs live in folders of this file's own under
# /DC0/vm/vm-operator, removed at the end.

load helpers

vsd() {
	"$VMG_DRIVERS/vsdrv" --ca-file "$VC_CA_FILE" "$@"
}

# collect PATH PROPERTY: one property of an object, as govc sees it.
collect() {
	govc object.collect -s "/DC0/vm/vm-operator/$1" "$2"
}

# SHA-256 fingerprint of the certificate vcsim presents, "AA:BB:...".
served_fingerprint() {
	openssl s_client -connect "$VC_HOST" </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 | cut -d= -f2
}

setup_file() {
	export FOLDER="vs-e2e-$$"
	export BOUND="vs-e2e-bound-$$"
	govc folder.create "/DC0/vm/vm-operator/$FOLDER" >/dev/null
	govc folder.create "/DC0/vm/vm-operator/$BOUND" >/dev/null
}

teardown_file() {
	govc object.destroy "/DC0/vm/vm-operator/$FOLDER" "/DC0/vm/vm-operator/$BOUND" >/dev/null 2>&1 || true
}

# watch_start FILE [OPTION...]: a watch in the background, its output in
# FILE, once it has synced; WATCH_PID is its process.
watch_start() {
	local out=$1
	shift
	# The binary itself, not through vsd, so that $! is its process.
	"$VMG_DRIVERS/vsdrv" --ca-file "$VC_CA_FILE" "$@" watch >"$out" 2>"$out.err" 3>&- &
	WATCH_PID=$!
	retry 10 grep -q '"event":"synced"' "$out"
}

synced_twice() {
	[ "$(grep -c '"event":"synced"' "$1")" -ge 2 ]
}

watch_stop() {
	kill -TERM "$WATCH_PID" 2>/dev/null || true
	wait "$WATCH_PID" || true
	WATCH_PID=
}

teardown() {
	# A watch left by a failed test must not outlive it, nor vcsim stay
	# stopped.
	[ -z "${WATCH_PID:-}" ] || kill -TERM "$WATCH_PID" 2>/dev/null || true
	kill -CONT "$(cat "$ENV_DIR/run/vcsim.pid")" 2>/dev/null || true
	rm -f "$ENV_DIR/vcsim/method-delays"
}

# soap_count METHOD: how many calls of METHOD vcsim has served.
soap_count() {
	curl -sf "$VCSIM_DEBUG_URL/debug/soap-methods" | awk -v m="$1" '$1 == m { n = $2 } END { print n + 0 }'
}

# soap_at_least METHOD N: vcsim has served N calls of METHOD or more.
soap_at_least() {
	[ "$(soap_count "$1")" -ge "$2" ]
}

@test "vsphere: login verified against VC_CA_FILE" {
	run vsd login
	[ "$status" -eq 0 ]
	[[ "$output" == *'"state":"ready"'* ]]
	[[ "$output" == *'"logins":1'* ]]
}

@test "vsphere: vcsim's certificate is refused without its CA" {
	run "$VMG_DRIVERS/vsdrv" --attempts 1 login
	[ "$status" -eq 1 ]
	[[ "$output" == *'"state":"backoff"'* ]]
	[[ "$output" == *'"error":"ETRANSPORT"'* ]]
	[[ "$output" == *certificate* ]]
	[[ "$output" != *'"state":"ready"'* ]]
}

@test "vsphere: a pinned thumbprint is accepted when right and refused when wrong" {
	local tp wrong sha1
	tp=$(served_fingerprint)
	[ ${#tp} -eq 95 ]
	run "$VMG_DRIVERS/vsdrv" --thumbprint "$tp" login
	[ "$status" -eq 0 ]
	[[ "$output" == *'"state":"ready"'* ]]
	# Lower case and without colons is the same fingerprint.
	run "$VMG_DRIVERS/vsdrv" --thumbprint "$(echo "$tp" | tr -d : | tr A-F a-f)" login
	[ "$status" -eq 0 ]
	if [ "${tp:0:1}" = 0 ]; then wrong="1${tp:1}"; else wrong="0${tp:1}"; fi
	run "$VMG_DRIVERS/vsdrv" --thumbprint "$wrong" --attempts 1 login
	[ "$status" -eq 1 ]
	[[ "$output" == *'"error":"ETRANSPORT"'* ]]
	[[ "$output" == *"certificate"* ]]
	sha1=$(openssl s_client -connect "$VC_HOST" </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha1 | cut -d= -f2)
	run "$VMG_DRIVERS/vsdrv" --thumbprint "$sha1" login
	[ "$status" -eq 2 ]
	[[ "$output" == *"SHA-1"* ]]
}

@test "vsphere: insecure skips verification" {
	run "$VMG_DRIVERS/vsdrv" --insecure login
	[ "$status" -eq 0 ]
	[[ "$output" == *'"state":"ready"'* ]]
}

@test "vsphere: a wrong password is refused clearly and tried again only after minutes (an account lockout is near)" {
	run vsd --password "not-$VC_PASS" --attempts 1 login
	[ "$status" -eq 1 ]
	echo "$output"
	grep -q "\"error\":\"EAUTH\",\"message\":\"vCenter refused the login for user $VC_USER: incorrect user name or password\"" <<<"$output"
	# vSphere SSO locks an account after 5 failures within 180 s by
	# default: the same password waits 5 minutes.
	grep -q '"attempts":1,"retry_in_ms":300000' <<<"$output"
	# With a shorter wait, the backoff above it still doubles.
	run vsd --password "not-$VC_PASS" --refused-retry 1500 --attempts 3 login
	[ "$status" -eq 1 ]
	echo "$output"
	[ "$(grep -c '"state":"backoff"' <<<"$output")" -eq 3 ]
	[ "$(grep -c '"state":"connecting"' <<<"$output")" -eq 3 ]
	grep -q '"attempts":1,"retry_in_ms":1500' <<<"$output"
	grep -q '"attempts":2,"retry_in_ms":2000' <<<"$output"
	grep -q '"attempts":3,"retry_in_ms":4000' <<<"$output"
	# The password never shows.
	[[ "$output" != *"not-$VC_PASS"* ]]
}

@test "vsphere: placement defaults, and errors that say where they looked" {
	run vsd placement
	[ "$status" -eq 0 ]
	[[ "$output" == *'"datacenter":"/DC0","root":"/DC0/vm/vm-operator"'* ]]
	[[ "$output" == *'"pool":"/DC0/host/DC0_C0/Resources"'* ]]
	run vsd --datacenter /DC0 --root-folder /DC0/vm/vm-operator --resource-pool DC0_C0/Resources \
		--datastore LocalDS_0 placement
	[ "$status" -eq 0 ]
	[[ "$output" == *'"datastore":"LocalDS_0"'* ]]
	run vsd --datacenter NoDC placement
	[ "$status" -eq 1 ]
	[[ "$output" == *'datacenter \"NoDC\" not found (found: DC0)'* ]]
	run vsd --root-folder no-such-root placement
	[ "$status" -eq 1 ]
	[[ "$output" == *'"error":"ENOTFOUND"'* ]]
	[[ "$output" == *'root folder \"no-such-root\" not found in /DC0/vm'* ]]
	run vsd --resource-pool nopool placement
	[ "$status" -eq 1 ]
	[[ "$output" == *'resource pool \"nopool\" not found in /DC0/host (found: DC0_C0/Resources)'* ]]
}

@test "vsphere: create-folder twice gives the same folder" {
	run vsd mkfolder "$FOLDER"
	[ "$status" -eq 0 ]
	[[ "$output" == *'"kind":"create-folder","err":0'* ]]
	[[ "$output" == *'"existed":true'* ]]
	ref=$(govc find -i /DC0/vm/vm-operator -type f -name "$FOLDER")
	[[ "$ref" == Folder:* ]]
	[[ "$output" == *"\"result\":\"${ref#Folder:}\""* ]]
}

@test "vsphere: clone with 2 CPUs and 2048 MB, powered on, with the marks" {
	run vsd --cpu 2 --mem 2048 --uid e2e-uid-1 clone "$FOLDER" vm-a
	[ "$status" -eq 0 ]
	[[ "$output" == *'"kind":"clone","err":0'* ]]
	[[ "$output" == *'"result":"vm-'* ]]
	[[ "$output" == *'"task":"task-'* ]]
	[ "$(collect "$FOLDER/vm-a" config.hardware.numCPU)" = 2 ]
	[ "$(collect "$FOLDER/vm-a" config.hardware.memoryMB)" = 2048 ]
	[ "$(collect "$FOLDER/vm-a" runtime.powerState)" = poweredOn ]
	run govc vm.info -e "/DC0/vm/vm-operator/$FOLDER/vm-a"
	[[ "$output" == *"vmgroup.codeconnect.vmworld.com.uid:"*"e2e-uid-1"* ]]
	[[ "$output" == *"vmgroup.codeconnect.vmworld.com.template:"*"vm-operator-template"* ]]
}

@test "vsphere: power off, reconfigure, power on, destroy" {
	vsd --cpu 1 --mem 1024 clone "$FOLDER" vm-b >/dev/null
	run vsd poweroff "$FOLDER/vm-b"
	[ "$status" -eq 0 ]
	[ "$(collect "$FOLDER/vm-b" runtime.powerState)" = poweredOff ]
	# Powering off what is off: the task's fault comes back.
	run vsd poweroff "$FOLDER/vm-b"
	[ "$status" -eq 1 ]
	[[ "$output" == *'"fault":"InvalidPowerState"'* ]]
	run vsd --cpu 3 --mem 3072 reconfigure "$FOLDER/vm-b"
	[ "$status" -eq 0 ]
	[ "$(collect "$FOLDER/vm-b" config.hardware.numCPU)" = 3 ]
	[ "$(collect "$FOLDER/vm-b" config.hardware.memoryMB)" = 3072 ]
	run vsd poweron "$FOLDER/vm-b"
	[ "$status" -eq 0 ]
	[ "$(collect "$FOLDER/vm-b" runtime.powerState)" = poweredOn ]
	vsd poweroff "$FOLDER/vm-b" >/dev/null
	run vsd destroy "$FOLDER/vm-b"
	[ "$status" -eq 0 ]
	run govc ls "/DC0/vm/vm-operator/$FOLDER/vm-b"
	[ -z "$output" ]
}

@test "vsphere: a missing template is not found, and the error names it" {
	run vsd --template no-such-template clone "$FOLDER" vm-c
	[ "$status" -eq 1 ]
	[[ "$output" == *'"error":"ENOTFOUND"'* ]]
	[[ "$output" == *'template \"no-such-template\" not found in /DC0/vm'* ]]
	run vsd --template /DC0/vm/no-such-template clone "$FOLDER" vm-c
	[ "$status" -eq 1 ]
	[[ "$output" == *'template \"/DC0/vm/no-such-template\" not found'* ]]
	# By inventory path it is found too.
	run vsd --template /DC0/vm/vm-operator-template clone "$FOLDER" vm-c
	[ "$status" -eq 0 ]
}

@test "vsphere: changes made with govc reach the inventory callback within 2 s" {
	local out=$BATS_TEST_TMPDIR/watch.out
	vsd --cpu 1 --mem 1024 --uid e2e-uid-w clone "$FOLDER" vm-w >/dev/null
	watch_start "$out"
	grep -q "\"change\":\"added\",\"kind\":\"vm\",.*\"name\":\"vm-w\",.*\"group\":\"$FOLDER\".*\"uid\":\"e2e-uid-w\"" "$out"
	govc vm.power -off "/DC0/vm/vm-operator/$FOLDER/vm-w" >/dev/null
	retry 2 grep -q '"change":"updated","kind":"vm",.*"name":"vm-w",.*"power":"poweredOff"' "$out"
	govc vm.change -vm "/DC0/vm/vm-operator/$FOLDER/vm-w" -c 4 -m 4096
	retry 2 grep -q '"change":"updated","kind":"vm",.*"name":"vm-w",.*"cpu":4,"mem":4096' "$out"
	govc vm.destroy "/DC0/vm/vm-operator/$FOLDER/vm-w"
	retry 2 grep -q "\"change\":\"removed\",\"kind\":\"vm\",.*\"name\":\"vm-w\",.*\"group\":\"$FOLDER\"" "$out"
	govc folder.create "/DC0/vm/vm-operator/$FOLDER-x" >/dev/null
	retry 2 grep -q "\"change\":\"added\",\"kind\":\"folder\",.*\"group\":\"$FOLDER-x\"" "$out"
	govc object.destroy "/DC0/vm/vm-operator/$FOLDER-x" >/dev/null
	retry 2 grep -q "\"change\":\"removed\",\"kind\":\"folder\",.*\"group\":\"$FOLDER-x\"" "$out"
	watch_stop
	refute grep -q '"event":"unsynced"' "$out"
}

@test "vsphere: an inventory larger than the cache's bound is never reported synced, and says why" {
	local out=$BATS_TEST_TMPDIR/overflow.out
	"$VMG_DRIVERS/vsdrv" --ca-file "$VC_CA_FILE" --max-objects 3 --backoff-max 500 watch >"$out" 2>&1 3>&- &
	WATCH_PID=$!
	retry 10 grep -q '"event":"unsynced".*more than 3 objects' "$out"
	sleep 2 # rebuilt again and again meanwhile, never synced
	watch_stop
	cat "$out"
	refute grep -q '"event":"synced"' "$out"
}

@test "vsphere: after the session is terminated, the next call logs in again" {
	local out=$BATS_TEST_TMPDIR/relogin.out go=$BATS_TEST_TMPDIR/go key
	"$VMG_DRIVERS/vsdrv" --ca-file "$VC_CA_FILE" relogin "$go" >"$out" 2>&1 3>&- &
	local pid=$!
	retry 10 grep -q '"event":"key"' "$out"
	key=$(sed -n 's/.*"event":"key","key":"\([^"]*\)".*/\1/p' "$out")
	govc session.ls | grep -q "$key"
	govc session.rm "$key"
	refute bash -c 'govc session.ls | grep -qF "$1"' _ "$key"
	touch "$go"
	wait "$pid"
	cat "$out"
	grep -q '"event":"call","err":0,"error":"","message":"","logins":2' "$out"
}

@test "vsphere: the task bound queues: 20 clones, never more than 4 in flight" {
	run vsd --max-tasks 4 --uid e2e-bound clones "$BOUND" 20
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *'"count":20,"ok":20,"max_tasks":4,"max_inflight":4,'* ]]
	[ "$(govc ls "/DC0/vm/vm-operator/$BOUND" | wc -l)" -eq 20 ]
}

@test "vsphere: the inventory watch recovers after vcsim restarts" {
	local out=$BATS_TEST_TMPDIR/restart.out
	vsd --cpu 1 --mem 1024 clone "$FOLDER" vm-r >/dev/null
	# (Retries at most every 2 s, so that the test need not wait long.)
	watch_start "$out" --backoff-max 2000
	"$VMG_TOP/hack/env/restart" "$ENV_DIR" vcsim >/dev/null
	# It notices, rebuilds and syncs again, with the state as it is: the VM
	# that was there is not reported gone.
	retry 30 grep -q '"event":"unsynced"' "$out"
	if ! retry 30 synced_twice "$out"; then
		grep -v '"change"' "$out"
		return 1
	fi
	refute grep -q '"change":"removed","kind":"vm",.*"name":"vm-r"' "$out"
	# And it sees later changes.
	govc vm.power -off "/DC0/vm/vm-operator/$FOLDER/vm-r" >/dev/null
	retry 5 grep -q '"change":"updated","kind":"vm",.*"name":"vm-r",.*"power":"poweredOff"' "$out"
	watch_stop
}

# lose_long_poll VM OUT: makes VM in the test's folder, starts a watch in
# OUT whose long poll may take 1 s + 1 s, and stops vcsim until the watch
# has lost that long poll to the transport (as to a network blip or a slow
# answer) and is trying it again; VCSIM is vcsim's process, stopped.
lose_long_poll() {
	VCSIM=$(cat "$ENV_DIR/run/vcsim.pid")
	vsd --cpu 1 --mem 1024 clone "$FOLDER" "$1" >/dev/null
	watch_start "$2" --max-wait 1 --call-timeout 1000 --backoff-max 1000
	kill -STOP "$VCSIM"
	retry 10 grep -q '"event":"retrying"' "$2"
}

# sees_power_off VM OUT: the watch in OUT reports VM powered off by govc.
sees_power_off() {
	sleep 2 # the long polls vcsim held while stopped have ended
	govc vm.power -off "/DC0/vm/vm-operator/$FOLDER/$1" >/dev/null
	retry 5 grep -q '"change":"updated","kind":"vm",.*"name":"'"$1"'",.*"power":"poweredOff"' "$2"
}

@test "vsphere: a long poll lost once is tried again with the cache served, and the watch goes on" {
	local out=$BATS_TEST_TMPDIR/blip.out
	lose_long_poll vm-s "$out"
	# Back before the retried long poll (sent 1 s after the failure) times out.
	kill -CONT "$VCSIM"
	grep -q '"event":"retrying","err":-[0-9]*,"error":"ETRANSPORT","message":"[^"]*WaitForUpdatesEx' "$out"
	# The retried long poll answers: synced again, never unsynced, and no
	# rebuild (the same collector, version and cache).
	retry 10 synced_twice "$out"
	refute grep -q '"event":"unsynced"' "$out"
	refute grep -Eq '"rebuilds":([2-9]|[1-9][0-9])' "$out"
	sees_power_off vm-s "$out"
	watch_stop
}

@test "vsphere: a long poll that vCenter answers after its timeout, answering CurrentTime meanwhile, is waited for and not retried" {
	local out=$BATS_TEST_TMPDIR/late.out t0 w0
	vsd --cpu 1 --mem 1024 clone "$FOLDER" vm-l >/dev/null
	t0=$(soap_count CurrentTime)
	# Each long poll takes 3 s and more, beyond its timeout (1 s + 1 s).
	echo WaitForUpdatesEx=3000 >"$ENV_DIR/vcsim/method-delays"
	watch_start "$out" --max-wait 1 --call-timeout 1000 --backoff-max 1000
	w0=$(soap_count WaitForUpdatesEx)
	retry 30 soap_at_least WaitForUpdatesEx $((w0 + 2))
	rm -f "$ENV_DIR/vcsim/method-delays"
	# The session asked vCenter the time while each was overdue, and waited;
	# the watch said so, with how long it had waited (past the 2 s timeout).
	[ "$(soap_count CurrentTime)" -ge $((t0 + 2)) ]
	grep -Eq '"event":"late",.*"late_ms":([2-9][0-9]{3}|[1-9][0-9]{4,})[,}]' "$out"
	refute grep -q '"event":"retrying"' "$out"
	refute grep -q '"event":"unsynced"' "$out"
	sees_power_off vm-l "$out"
	watch_stop
}

@test "vsphere: a long poll lost twice in a row makes the watch unsynced, saying why, until vCenter answers" {
	local out=$BATS_TEST_TMPDIR/outage.out
	lose_long_poll vm-t "$out"
	# The retry is lost too: unsynced, with the reason.
	retry 10 grep -q '"event":"unsynced","err":-[0-9]*,"error":"ETRANSPORT"' "$out"
	kill -CONT "$VCSIM"
	if ! retry 30 synced_twice "$out"; then
		grep -v '"change"' "$out"
		return 1
	fi
	sees_power_off vm-t "$out"
	watch_stop
}
