"""The many-users check's users in this process, in client processes, and over Ray actors on a local cluster.

The same campaign as `many_users.py` (one `external` deployment at the reference server, a level of `--users`
users, one request each of `--tokens` events at 100 events/s) run three ways through `ctxbench run`: the users
in the one client process, over `client_processes = 2`, and over `ray_actors = 2` with `--ray` on a cluster of
two nodes on 127.0.0.1 started here (the deployment's task on one, the actors on both). Printed per way: the
whole command's wall time, its overhead (wall time less the level's span: start-up, placement, results), the
spread of the users' first sends (how together they started), events/s over the level, and receive error
(arrival - the server's send stamp, one host so one clock) p50 / p99 / max, and TTFT error p50.

    .venv/bin/python benchmarks/ray_actors.py [--users 256] [--tokens 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only, read as Ray is imported
sys.path.insert(0, str(Path(__file__).parent))
from client_speed import errors_of, percentile, start_server  # noqa: E402

from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.results.store import RunDir  # noqa: E402

CAMPAIGN = """
[campaign]
name = "ray-{way}"
results = "{results}"

[checks.throughput]
levels = [{users}]
prompt_tokens = 256
output_tokens = {tokens}
requests_per_user = 1
warmup_requests = 0
client_processes = {processes}
ray_actors = {actors}

[[deployments]]
name = "reference-{way}"
engine = "external"
urls = ["{url}"]
tokenizer = "{tokenizer}"
"""

WAYS = (("in-process", 1, 0), ("2 processes", 2, 0), ("2 Ray actors", 1, 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--port", type=int, default=8769)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 2, "object_store_memory": 80 * 2**20, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "node_ip_address": "127.0.0.1"})
    cluster.add_node(**node, node_ip_address="127.0.0.1")
    url = f"http://127.0.0.1:{args.port}"
    server = start_server(args.port, 100.0)
    print(f"{args.users} users, one request of {args.tokens} events at 100 events/s each, via `ctxbench run`")
    print(
        f"{'way':>13} {'nodes':>5} {'wall s':>7} {'overhead s':>10} {'start spread ms':>15} {'events/s':>9} "
        f"{'err p50':>8} {'p99':>8} {'max':>8} {'ttft err p50':>12}  (ms)"
    )
    try:
        for way, processes, actors in WAYS:
            with tempfile.TemporaryDirectory() as scratch:
                results = Path(scratch) / "results"
                campaign = Path(scratch) / "campaign.toml"
                tag = way.replace(" ", "-").lower()
                campaign.write_text(
                    CAMPAIGN.format(
                        way=tag,
                        results=results,
                        users=args.users,
                        tokens=args.tokens,
                        processes=processes,
                        actors=actors,
                        url=url,
                        tokenizer=tiny_model().tokenizer_dir,
                    )
                )
                command = [sys.executable, "-m", "ctxbench", "run", str(campaign)]
                started = time.perf_counter()
                subprocess.run(
                    command + (["--ray", cluster.address] if actors else []),
                    check=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                wall = time.perf_counter() - started
                (run_path,) = (results / "runs").iterdir()
                records = list(RunDir(run_path).records())
            absolute, _, ttft = errors_of(records)
            span_s = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / 1e9
            firsts = [r.sent_ns for r in records]
            spread_ms = (max(firsts) - min(firsts)) / 1e6
            failed = sum(1 for r in records if not r.ok)
            nodes = len({r.labels.get("client_node") for r in records})  # one: no actor labels
            print(
                f"{way:>13} {nodes:>5} {wall:>7.1f} {wall - span_s:>10.1f} {spread_ms:>15.1f} "
                f"{len(absolute) / span_s:>9.0f} {percentile(absolute, 50):>8.2f} "
                f"{percentile(absolute, 99):>8.2f} {max(absolute):>8.1f} {percentile(ttft, 50):>12.1f}"
                + (f"  {failed} FAILED" if failed else ""),
                flush=True,
            )
    finally:
        server.terminate()
        cluster.shutdown()


if __name__ == "__main__":
    main()
