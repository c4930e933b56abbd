# tests/e2e/helpers.bash: what the e2e suites share. Loaded by each .bats
# file; the environment (hack/env/up) is already running in $ENV_DIR.
# shellcheck disable=SC1091
. "$ENV_DIR/env"

# retry SECONDS CMD...: runs CMD every 0.2 s until it succeeds or SECONDS
# have passed (measured on the clock, however long CMD takes).
retry() {
	local end=$((SECONDS + $1))
	shift
	while [ "$SECONDS" -lt "$end" ]; do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}

# refute CMD [ARG...]: fails when CMD succeeds. A bare "! CMD" cannot fail a
# bats test unless it is the test's last command: errexit ignores "!".
refute() {
	if "$@"; then
		printf 'refute: this succeeded: %s\n' "$*" >&2
		return 1
	fi
}

# jsonpath OBJ PATH: kubectl get with a jsonpath, in the test namespace.
jsonpath() {
	kubectl get "$1" -n "${NS:-default}" -o "jsonpath=$2"
}

# new_namespace: a fresh namespace for one test file, in $NS.
new_namespace() {
	NS=e2e-$(basename "$BATS_TEST_FILENAME" .bats | tr -c 'a-z0-9\n' '-')-$RANDOM
	kubectl create namespace "$NS" >/dev/null
	export NS
}
