"""Many users, short prompts on one H200 through a campaign file: llama.cpp's CUDA server with and without
n-gram speculative decoding, side by side, priced per output token. Run by docs/gpu-validation/README.md.

    python3 docs/gpu-validation/h200_campaign.py --server /tmp/b/bin/llama-server --results /tmp/res/campaign
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.engines.models import TinyModelSpec, tiny_model
from ctxbench.report.campaign import write_campaign_report
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir

# The same 740M-parameter random model as h200.py (width 2048, 16 layers, head size 64).
SPEC = TinyModelSpec(n_embd=2048, n_head=32, n_head_kv=8, n_layer=16, n_ff=5632, context_length=1048576)

CAMPAIGN = """
[campaign]
name = "h200-many-users"
price_per_gpu_hour = 3.50
results = "{results}"

[checks.throughput]
levels = [1, 4, 16, 64]
prompt_tokens = 1024
output_tokens = 256
requests_per_user = 6
source = "code"
ttft_slo_s = 1.0
tpot_slo_s = 0.05

[[deployments]]
name = "random-740m-llamacpp-cuda"
engine = "llamacpp"
binary = "{server}"
model = "{model}"
tokenizer = "{tokenizer}"
ctx_size = 131072
parallel = 64
gpus = [0]
args = ["-fa", "on", "-ngl", "99"]
ready_timeout_s = 300
random_weights = true
note = "Random weights (ctxbench's writer); one H200; speed and cost are real, content is not."

[[deployments]]
name = "random-740m-llamacpp-cuda-ngram"
engine = "llamacpp"
binary = "{server}"
model = "{model}"
tokenizer = "{tokenizer}"
ctx_size = 131072
parallel = 64
gpus = [0]
args = ["-fa", "on", "-ngl", "99", "--spec-type", "ngram-simple"]
ready_timeout_s = 300
random_weights = true
note = "The same, with llama.cpp's n-gram speculative decoding."

[[compare]]
a = "random-740m-llamacpp-cuda"
b = "random-740m-llamacpp-cuda-ngram"
question = "does n-gram drafting help many users on coding prompts?"
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/model"))
    args = parser.parse_args()
    started = time.perf_counter()
    model = tiny_model(args.model_dir, SPEC)
    print(f"model written in {time.perf_counter() - started:.0f} s", flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / "campaign.toml"
    path.write_text(CAMPAIGN.format(results=args.results, server=args.server, model=model.gguf,
                                    tokenizer=model.tokenizer_dir))
    campaign = load_campaign(path)
    for outcome in run_campaign(campaign, on_status=lambda m: print(m, flush=True)):
        print(outcome, flush=True)
        if outcome.run_id:
            run = RunDir(args.results / "runs" / outcome.run_id)
            (run.path / "report.md").write_text(run_report(run))
    write_campaign_report(args.results, campaign.campaign.price_per_gpu_hour)
    print(f"done in {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
