#!/usr/bin/env bash
# Runs every Go fuzz target of the module under the fuzzing engine, one
# after the other, each for DURATION (default 5m):
#
#   scripts/fuzz.sh            # each target for 5 minutes
#   scripts/fuzz.sh 30s        # each for 30 seconds
#   scripts/fuzz.sh 10m FuzzKVHTTP FuzzJSONAPI   # only these
#
# FUZZ_PARALLEL sets the fuzzing workers per target (default: GOMAXPROCS).
# A failing input is written to <package>/testdata/fuzz/<Target>/ and from
# then on runs with the package's normal tests (go test runs every seed
# corpus). Stops at the first target that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

duration="${1:-5m}"
shift || true

# package target
targets=(
  ". FuzzParseToken"
  ". FuzzValidateMillis"
  ". FuzzValidateName"
  "./guard FuzzParsePresented"
  "./httpfence FuzzMiddleware"
  "./fsm FuzzMachine"
  "./fsm FuzzDecodeApply"
  "./fsm FuzzRestore"
  "./fsm FuzzDecodeEntry"
  "./server FuzzKVHTTP"
  "./server FuzzJSONAPI"
  "./internal/nativewire FuzzReadFrame"
  "./server FuzzNativeConn"
)

parallel=()
if [ -n "${FUZZ_PARALLEL:-}" ]; then
  parallel=(-parallel "$FUZZ_PARALLEL")
fi

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then
    continue
  fi
  echo "== $name ($pkg) for $duration"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" -fuzzminimizetime 10s "${parallel[@]}" "$pkg"
done
