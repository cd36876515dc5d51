#!/usr/bin/env bash
# Mutation testing of the safety rules: applies each mutant below, one at a
# time, to a scratch copy of the tree (the working tree is never touched),
# runs the tests named for it, and reports it killed (some test failed) or
# survived (every test passed). Exits 1 if any mutant survived, 2 if a
# mutant could not be applied (its pattern is gone or no longer unique: the
# code moved, update the mutant) or does not compile.
#
#   scripts/mutants.sh            # every mutant
#   scripts/mutants.sh -l         # list the mutants
#   scripts/mutants.sh ID...      # only these
#
# Opt-in, not run in CI: it takes several minutes, and the adapters' tests
# start PostgreSQL and Redis (installed as scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

# mutant ID FILE PATTERN REPLACEMENT PACKAGES [RUN]
#   PATTERN is a literal string that must occur exactly once in FILE; it is
#   replaced by REPLACEMENT (literal too). PACKAGES (space-separated) are
#   tested with -run RUN when RUN is given.
ids=() files=() pats=() reps=() pkgs=() runs=()
mutant() {
  ids+=("$1") files+=("$2") pats+=("$3") reps+=("$4") pkgs+=("$5") runs+=("${6:-}")
}

# The token counter: every grant takes the next token.
mutant token-counter fsm/tokens.go \
  't.last++' 't.last += 0' ./fsm
# FIFO: the lock goes to the waiter that queued first.
mutant fifo-waiters fsm/waitqueue.go \
  'w := q.list[0]' 'w := q.list[len(q.list)-1]' ./fsm
# The watermark rule (docs/design.md §5): below the watermark is stale...
mutant rule-accepts-below rule.go \
  'if presented < mark {' 'if presented+1 < mark {' '. ./guard/...'
# ...and an accepted token becomes the watermark.
mutant rule-no-raise rule.go \
  'return presented, nil' 'return mark, nil' '. ./guard/...'
# Each store adapter's own comparison.
mutant postgres-guard postgres/guard.go \
  'WHERE w.token <= EXCLUDED.token' 'WHERE w.token <= EXCLUDED.token + 1' ./postgres
mutant postgres-upsert postgres/update.go \
  '" <= EXCLUDED." + tok' '" <= EXCLUDED." + tok + " + 1"' ./postgres
mutant postgres-update postgres/update.go \
  'tok + " <= " + tp + ")"' 'tok + " <= " + tp + " + 1)"' ./postgres
mutant postgres-guard-raise postgres/guard.go \
  'DO UPDATE SET token = EXCLUDED.token,' 'DO UPDATE SET token = w.token,' ./postgres
mutant sqlfence-postgres sqlfence/dialect.go \
  'WHERE w.token <= EXCLUDED.token' 'WHERE w.token <= EXCLUDED.token + 1' ./sqlfence
mutant sqlfence-sqlite sqlfence/dialect.go \
  'WHERE w.token <= excluded.token' 'WHERE w.token <= excluded.token + 1' ./sqlfence
mutant sqlfence-postgres-raise sqlfence/dialect.go \
  'DO UPDATE SET token = EXCLUDED.token,' 'DO UPDATE SET token = w.token,' ./sqlfence
mutant sqlfence-sqlite-raise sqlfence/dialect.go \
  'DO UPDATE SET token = excluded.token,' 'DO UPDATE SET token = w.token,' ./sqlfence
mutant redisfence-stale redisfence/scripts.go \
  'if fenced_less(fenced_token, fenced_mark) then' 'if fenced_less(fenced_token, fenced_mark) and false then' ./redisfence
mutant redisfence-raise redisfence/scripts.go \
  'local fenced_raise = (not fenced_mark) or fenced_less(fenced_mark, fenced_token)' 'local fenced_raise = (not fenced_mark)' ./redisfence
mutant filefence-locked-check filefence/dir.go \
  'next, err := fence.Decide(name, mark, t)' 'next, err := fence.Decide(name, 0, t)' ./filefence
mutant filefence-raise filefence/dir.go \
  'd.writeMark(name, next)' 'd.writeMark(name, mark)' ./filefence
# The SDK's validity: ValidUntil = sent + TTL - margin, on creation and on
# every renewal.
mutant client-margin-create client/session.go \
  'validUntil:    sent.Add(ttl - margin),' 'validUntil:    sent.Add(ttl),' ./client 'TestSession'
mutant client-margin-renewal client/session.go \
  'sent.Add(ttl - s.margin)' 'sent.Add(ttl)' ./client 'TestSession'
mutant client-margin-renewal-plus client/session.go \
  'sent.Add(ttl - s.margin)' 'sent.Add(ttl + s.margin)' ./client 'TestSession'
# Expiry terms: the leader stamps its own term; the state machine ignores
# an expiry older than the newest leadership.
mutant expiry-stamp-older server/leader.go \
  'ExpireSession{Session: id, Term: term}' 'ExpireSession{Session: id, Term: term - 1}' ./cmd/fenced 'TestCluster_ExpiryTermAcrossLeaderChange'
mutant expiry-older-applied fsm/expiry.go \
  'if e.GetTerm() < m.leaderTerm {' 'if false && e.GetTerm() < m.leaderTerm {' ./fsm

if [ "${1:-}" = -l ]; then
  for i in "${!ids[@]}"; do
    printf '%-28s %-22s %s  =>  %s\n' "${ids[$i]}" "${files[$i]}" "${pats[$i]}" "${reps[$i]}"
  done
  exit 0
fi

want=("$@")
selected() {
  [ ${#want[@]} -eq 0 ] && return 0
  local w
  for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}
for w in "${want[@]}"; do
  found=0
  for id in "${ids[@]}"; do [ "$id" = "$w" ] && found=1; done
  [ $found = 1 ] || { echo "unknown mutant $w (see $0 -l)" >&2; exit 2; }
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git ls-files -z --cached --others --exclude-standard |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$scratch"
logs="$scratch/.mutants"
mkdir -p "$logs"

killed=() survived=() broken=()
for i in "${!ids[@]}"; do
  id=${ids[$i]} file=${files[$i]}
  selected "$id" || continue
  target="$scratch/$file"
  n=$(PAT=${pats[$i]} perl -0ne '$n += () = /\Q$ENV{PAT}\E/g; END { print $n + 0 }' "$target")
  if [ "$n" != 1 ]; then
    [ "$n" = 0 ] && why="pattern not found" || why="pattern found $n times"
    echo "BROKEN   $id: $why in $file: ${pats[$i]}"
    broken+=("$id")
    continue
  fi
  cp "$target" "$logs/orig"
  PAT=${pats[$i]} REP=${reps[$i]} perl -0pi -e 's/\Q$ENV{PAT}\E/$ENV{REP}/' "$target"
  log="$logs/$id.log"
  if ! (cd "$scratch" && go vet "./$(dirname "$file")") >"$log" 2>&1; then
    echo "BROKEN   $id: the mutant does not compile (see below)"
    sed 's/^/         /' "$log" | head -20
    broken+=("$id")
  else
    args=(-count=1 -timeout 15m)
    [ -n "${runs[$i]}" ] && args+=(-run "${runs[$i]}")
    # shellcheck disable=SC2086 # the package list is split on purpose
    if (cd "$scratch" && go test "${args[@]}" ${pkgs[$i]}) >"$log" 2>&1; then
      echo "SURVIVED $id: $file: ${pats[$i]}  =>  ${reps[$i]}"
      survived+=("$id")
    else
      first=$(grep -m1 -E '^\s*--- FAIL' "$log" | sed 's/^ *//' || true)
      echo "killed   $id${first:+ ($first)}"
      killed+=("$id")
    fi
  fi
  cp "$logs/orig" "$target"
done

echo "== ${#killed[@]} killed, ${#survived[@]} survived, ${#broken[@]} broken"
[ ${#broken[@]} -eq 0 ] || exit 2
[ ${#survived[@]} -eq 0 ] || exit 1
