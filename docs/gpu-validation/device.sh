#!/usr/bin/env bash
# One session on a lent GPU machine without internet (H100, H200 or any sm_90 card): the wheels its image
# lacks, llama.cpp's CUDA server built by ctxbench, the bf16 matmul ceiling, then the campaign, with results
# named after the GPU found ("h100-1m" on an H100). Made here first: `.venv/bin/python
# docs/gpu-validation/gpu_source.py` writes .gpu/ and .whl/, which the device call carries. Run from the
# repository root; results go under $RES (default /tmp/res): $RES/<gpu>-1m, build.json, gpu.txt, run.log.
#   RES=/tmp/res setsid nohup bash docs/gpu-validation/device.sh > /tmp/device.log 2>&1 &
#   RES=/tmp/res bash docs/gpu-validation/wait.sh 560      # in each following call, under 30 s apart
set -uo pipefail
RES=${RES:-/tmp/res}
CAMPAIGN=${CAMPAIGN:-examples/one-gpu-1m.toml}
mkdir -p "$RES"
[ -f .gpu/llama-cpp-slim.tar.gz ] && ls .whl/*.whl > /dev/null 2>&1 || {
  echo "no .gpu/llama-cpp-slim.tar.gz or .whl/: run docs/gpu-validation/gpu_source.py here and carry both" | tee "$RES/ended"
  exit 2
}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CTXBENCH_CACHE=/tmp/ctxbench-cache
python3 -c "import ctxbench.cli" 2> "$RES/import.log" || {
  echo "ctxbench does not import on this image (a module the wheels lack?): $(tail -1 "$RES/import.log")" | tee "$RES/ended"
  exit 1
}
nvidia-smi > "$RES/gpu.txt" 2>&1
nvidia-smi topo -m > "$RES/topo.txt" 2>&1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
gpu=$(echo "$card" | grep -oE '\b[A-Z]{1,2}[0-9]{2,4}\b' | head -1 | tr 'A-Z' 'a-z')  # "NVIDIA H100 80GB HBM3": h100
[ -n "$gpu" ] || gpu=$(echo "$card" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')
name=${NAME:-${gpu:-gpu}-${SUFFIX:-1m}}
echo "$name" > "$RES/name"
[ "${MATMUL:-1}" = 1 ] && python3 - > "$RES/gpu.json" <<'PY'
import json, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize(); start, end = torch.cuda.Event(True), torch.cuda.Event(True)
start.record()
for _ in range(10): a @ b
end.record(); torch.cuda.synchronize()
seconds = start.elapsed_time(end) / 1000 / 10
print(json.dumps({"gpu": torch.cuda.get_device_name(), "bf16_matmul_tflops": round(2 * 8192**3 / seconds / 1e12, 1)}))
PY
date -u +%FT%TZ > "$RES/started"
python3 -m ctxbench engine build llamacpp --variant cuda --sdist .gpu/llama-cpp-slim.tar.gz --jobs "$(nproc)" \
  > "$RES/build.log" 2>&1 || { echo "build failed"; tail -40 "$RES/build.log"; date -u +%FT%TZ > "$RES/ended"; exit 1; }
cp /tmp/ctxbench-cache/engines/llamacpp-*-cuda/build.json "$RES/" 2>/dev/null
# RUN_ARGS: more flags for `ctxbench run`, e.g. "-d one-deployment"
python3 -m ctxbench run "$CAMPAIGN" --results "$RES/$name" ${RUN_ARGS:-} > "$RES/run.log" 2>&1
echo "campaign exit $?" >> "$RES/run.log"
date -u +%FT%TZ > "$RES/ended"
