#!/usr/bin/env bash
# tests/bench/tls_flood.sh: a flood of TLS handshakes from many addresses
# against lib/server as the metrics port runs it, with and without its
# handshake limits (tests/bench/tls_flood.c); prints the loop's CPU and
# what a scraper sees, and fails when the limits do not hold.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
make -s --no-print-directory build/bench/tls_flood >&2
build/bench/tls_flood "${TLS_FLOOD_SECONDS:-5}" "${TLS_FLOOD_CLIENTS:-2}"
