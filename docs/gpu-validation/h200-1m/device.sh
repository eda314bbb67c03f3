#!/usr/bin/env bash
# One device session: the wheels its image lacks, llama.cpp's CUDA server built by ctxbench, the bf16 matmul
# ceiling, then the campaign. Run from the repository root with .gpu/ (the slim llama-cpp-python sdist) and
# .whl/ (pydantic, gguf) carried; results go to $RES (default /tmp/res).
set -uo pipefail
RES=${RES:-/tmp/res}
CAMPAIGN=${CAMPAIGN:-docs/gpu-validation/h200-1m/campaign.toml}
mkdir -p "$RES"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CTXBENCH_CACHE=/tmp/ctxbench-cache
nvidia-smi > "$RES/gpu.txt" 2>&1
nvidia-smi topo -m > "$RES/topo.txt" 2>&1
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
python3 -m ctxbench engine build llamacpp --variant cuda --sdist .gpu/llama-cpp-slim.tar.gz --jobs 16 \
  > "$RES/build.log" 2>&1 || { echo "build failed"; tail -40 "$RES/build.log"; exit 1; }
cp /tmp/ctxbench-cache/engines/llamacpp-*-cuda/build.json "$RES/" 2>/dev/null
python3 -m ctxbench run "$CAMPAIGN" --results "$RES/h200-1m" > "$RES/run.log" 2>&1
echo "campaign exit $?" >> "$RES/run.log"
date -u +%FT%TZ > "$RES/ended"
