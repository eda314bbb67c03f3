"""The many-users check itself (`ctxbench run`, prompts built, records written) against the reference server.

`client_speed.py` measures the client alone; this runs the product's path: a campaign with one `external`
deployment at the reference server and a throughput level of `--users` users, one request each of `--tokens`
events, with `client_processes` 1 and 2 (or `--processes`). Printed per run: events/s over the level, receive
error (arrival - the server's send stamp) p50 / p99 / max, and TTFT error, from the run's own records.

    .venv/bin/python benchmarks/many_users.py [--users 1024] [--tokens 300] [--processes 1,2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from client_speed import errors_of, percentile, start_server  # noqa: E402

from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.results.store import RunDir  # noqa: E402

CAMPAIGN = """
[campaign]
name = "many-users-p{processes}"
results = "{results}"

[checks.throughput]
levels = [{users}]
prompt_tokens = 256
output_tokens = {tokens}
requests_per_user = 1
warmup_requests = 0
client_processes = {processes}

[[deployments]]
name = "reference-p{processes}"
engine = "external"
urls = ["{url}"]
tokenizer = "{tokenizer}"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--port", type=int, default=8768)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    server = start_server(args.port, 100.0)
    print(
        f"{args.users} users, one request of {args.tokens} events at 100 events/s each, through `ctxbench "
        "run`"
    )
    print(
        f"{'processes':>9} {'wall s':>7} {'events/s':>9} {'err p50':>8} {'p99':>8} {'max':>8} "
        f"{'ttft err p50':>12}  (ms)"
    )
    try:
        for processes in (int(p) for p in args.processes.split(",")):
            with tempfile.TemporaryDirectory() as scratch:
                results = Path(scratch) / "results"
                campaign = Path(scratch) / "campaign.toml"
                campaign.write_text(
                    CAMPAIGN.format(
                        processes=processes,
                        results=results,
                        users=args.users,
                        tokens=args.tokens,
                        url=url,
                        tokenizer=tiny_model().tokenizer_dir,
                    )
                )
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "ctxbench", "run", str(campaign)],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                wall = time.perf_counter() - started
                (run_path,) = (results / "runs").iterdir()
                records = list(RunDir(run_path).records())
            absolute, _, ttft = errors_of(records)
            span_s = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / 1e9
            failed = sum(1 for r in records if not r.ok)
            print(
                f"{processes:>9} {wall:>7.1f} {len(absolute) / span_s:>9.0f} "
                f"{percentile(absolute, 50):>8.2f} "
                f"{percentile(absolute, 99):>8.2f} {max(absolute):>8.1f} {percentile(ttft, 50):>12.1f}"
                + (f"  {failed} FAILED" if failed else ""),
                flush=True,
            )
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
