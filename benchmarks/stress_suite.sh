#!/usr/bin/env bash
# The integration suite again and again under CPU contention: one busy-loop process per core beside it.
# Stops at the first red run (KEEP_GOING=1 runs them all) and prints one line a run and a tally.
#
#   make test-stress                          # 20 runs of tests/integration, a hog per core
#   RUNS=5 HOGS=0 PYTEST_ARGS="tests/integration -m 'not vllm'" make test-stress
#   FIRST=11 RUNS=10 make test-stress         # a streak carried on: runs 11..20
#
# A streak counts only runs of the same code: the "code" line names the git trees of src/, tests/ and the
# files that choose what is installed, so runs logged on two commits can be checked to be of one suite.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-20}
first=${FIRST:-1}
hogs=${HOGS:-$(nproc)}
args=${PYTEST_ARGS:-tests/integration}
logs=${LOGS:-results/stress}
mkdir -p "$logs"
pids=()
cleanup() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; }
trap cleanup EXIT
for _ in $(seq 1 "$hogs"); do .venv/bin/python -c 'while True: pass' & pids+=($!); done
code=$(for t in src tests pyproject.toml Makefile; do printf '%s=%s ' "$t" "$(git rev-parse --short "HEAD:$t" 2>/dev/null)"; done)
[ -n "$(git status --porcelain -- src tests pyproject.toml Makefile 2>/dev/null)" ] && code="$code(uncommitted changes: not a streak's code)"
echo "code: commit $(git rev-parse --short HEAD 2>/dev/null) $code"
echo "stress: $runs runs of pytest $args beside $hogs busy-loop process(es) on $(nproc) core(s); logs in $logs"
passed=0 failed=0
for run in $(seq "$first" $((first + runs - 1))); do
  started=$SECONDS
  eval ".venv/bin/python -m pytest -q -p no:cacheprovider $args" > "$logs/run-$run.log" 2>&1
  rc=$?
  tail_line=$(grep -E "passed|failed" "$logs/run-$run.log" | tail -1)
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  echo "run $run: $(date -u +%FT%TZ) exit $rc in $((SECONDS - started)) s: $tail_line"
  if [ $rc -ne 0 ]; then
    grep -E "^(FAILED|ERROR)" "$logs/run-$run.log"
    [ "${KEEP_GOING:-0}" = 1 ] || break
  fi
done
echo "stress: $passed passed, $failed failed"
[ $failed -eq 0 ]
