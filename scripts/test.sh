#!/usr/bin/env bash
# The whole test suite. Installs what the tests need when it is missing
# (PostgreSQL, Redis, and jq and curl for the documentation's examples,
# from Debian's packages; the tests start their own throwaway servers on
# loopback; Chromium for the dashboard's browser tests), then runs every
# test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

need=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
command -v jq >/dev/null || need+=(jq)       # the README's quickstart (internal/readmetest runs it)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

go test -race -count=1 -timeout 25m "$@" ./...
