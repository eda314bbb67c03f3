#!/usr/bin/env bash
# Rebuild the reports of every recorded campaign here from its files alone (`ctxbench report`), in a copy, and
# put the rebuilt report.md / report.html / figures back: run it when a change to the reports is meant, and
# commit the result with that change (tests/unit/test_recorded_reports.py compares them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ctxbench=${CTXBENCH:-$here/../../.venv/bin/ctxbench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for recorded in "$here"/h[0-9]*-*/; do
  name=$(basename "$recorded")
  [ -d "$recorded/runs" ] || continue
  cp -r "$recorded" "$work/$name"
  "$ctxbench" report --results "$work/$name" > /dev/null
  for report in $(cd "$recorded" && git ls-files -- 'report.md' 'report.html' 'runs/*/report.md' 'runs/*/report.html' 'figures/*'); do
    cp "$work/$name/$report" "$recorded/$report"
  done
  echo "rebuilt $name"
done
