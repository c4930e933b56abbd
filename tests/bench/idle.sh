#!/usr/bin/env bash
# tests/bench/idle.sh: the manager's resident memory when idle (connected to
# kube-apiserver and vcsim, no groups), next to the floor any program
# linked like it holds: tests/bench/lib_floor.c links the same libraries,
# initialises them and makes one HTTPS request to each server, with none of
# the operator's code. Prints, e.g.:
#   idle: manager RSS 15.8 MiB (2.5 MiB anonymous, 13.3 MiB library and program files)
#   idle: the libraries alone (lib_floor): RSS 14.4 MiB (2.1 MiB anonymous, 12.3 MiB files)
#   idle: the operator's own share: 1.4 MiB; budget idle RSS < 10 MiB: OVER
# IDLE_WAIT (default 20) is how many seconds the manager idles first.
set -euo pipefail
. "$ENV_DIR/env"
cd "$VMG_TOP"
wait_s=${IDLE_WAIT:-20}
log=$ENV_DIR/logs/bench-idle-manager.log

mkvar() { make -s --no-print-directory --eval 'print-var-%: ; @echo $($*)' "print-var-$1"; }
mkdir -p build/bench
# shellcheck disable=SC2046 # word splitting of the flags is wanted
cc $(mkvar ALL_CFLAGS) -o build/bench/lib_floor tests/bench/lib_floor.c $(mkvar PKG_LIBS)
make -s --no-print-directory build >/dev/null

kubectl apply -k crds >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/vmgroups.vm.codeconnect.vmworld.com >/dev/null

pport=$((20000 + RANDOM % 6000))
"$VMG_BIN" --kubeconfig "$KUBECONFIG" --vc-ca-file "$VC_CA_FILE" \
	--metrics-bind-address 0 --health-probe-bind-address "127.0.0.1:$pport" \
	</dev/null >>"$log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$pport/readyz" >/dev/null || {
	echo "idle: the manager did not become ready; see $log" >&2
	exit 1
}
sleep "$wait_s"
kill -0 "$pid" || {
	echo "idle: the manager died; see $log" >&2
	exit 1
}
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
rss=$(kib VmRSS) anon=$(kib RssAnon) file=$(kib RssFile)

floor=$(build/bench/lib_floor "$KUBE_APISERVER_URL/readyz" "$ENV_DIR/pki/ca.crt" \
	"$ENV_DIR/pki/admin.crt" "$ENV_DIR/pki/admin.key" -- "https://$VC_HOST/sdk" "$VC_CA_FILE")
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$floor"; }
frss=$(field rss_kib) fanon=$(field anon_kib) ffile=$(field file_kib)
[ -n "$rss" ] && [ -n "$frss" ] || {
	echo "idle: measuring failed: manager '$rss', lib_floor '$floor'" >&2
	exit 1
}

awk -v r="$rss" -v a="$anon" -v f="$file" -v fr="$frss" -v fa="$fanon" -v ff="$ffile" -v w="$wait_s" 'BEGIN {
	printf "idle: manager RSS %.1f MiB after %d s idle (%.1f MiB anonymous, %.1f MiB library and program files)\n", r / 1024, w, a / 1024, f / 1024
	printf "idle: the libraries alone (lib_floor): RSS %.1f MiB (%.1f MiB anonymous, %.1f MiB files)\n", fr / 1024, fa / 1024, ff / 1024
	printf "idle: the operator'\''s own share: %.1f MiB; budget idle RSS < 10 MiB: %s\n", (r - fr) / 1024, (r < 10240) ? "ok" : "OVER"
}'
