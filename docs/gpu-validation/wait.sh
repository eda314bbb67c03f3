#!/usr/bin/env bash
# Wait up to $1 seconds for device.sh to finish (it writes $RES/ended), printing progress; then pack what
# it has written so far into $OUT (every call, so an interrupted session still brings results back).
RES=${RES:-/tmp/res}
[ -d "$RES" ] || { echo "no $RES on this machine: a fresh machine, the detached run is gone"; exit 3; }
deadline=$((SECONDS + ${1:-540}))
while [ ! -e "$RES/ended" ] && [ $SECONDS -lt $deadline ]; do
  sleep 15
  echo "[$(date -u +%T)] $(tail -c 300 "$RES/run.log" 2>/dev/null | tr '\r' '\n' | grep -v '^\s*$' | tail -1)"
done
tail -c 3000 "$RES/run.log" 2>/dev/null | tr '\r' '\n' | grep -v '━' | tail -25
[ -n "${OUT:-}" ] && tar -czf "$OUT/results.tar.gz" -C "$RES" . && ls -la "$OUT"
[ -e "$RES/ended" ] && echo "DEVICE RUN ENDED" || echo "still running"
