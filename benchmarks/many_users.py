"""The many-users check itself (`ctxbench run`, prompts built, records written) against the reference server.

`client_speed.py` measures the client alone; this runs the product's path: a campaign with one `external`
deployment at the reference server and a throughput level of `--users` users, one request each of `--tokens`
events at 100 events/s, run each of `--ways`:

    in-process      the users in the one client process
    N-processes     over `client_processes = N`
    N-ray-actors    over `ray_actors = N` with `--ray`, on a cluster of two nodes on 127.0.0.1 started here
                    (the deployment's task on one, the actors on both; needs `pip install 'ctxbench[ray]'`)

Printed per way: the whole command's wall time, its overhead (wall time less the level's span: start-up,
placement, results), the spread of the users' first sends (how together they started), the client nodes the
records name, events/s over the level, receive error (arrival - the server's send stamp, one host so one
clock) p50 / p99 / max, and TTFT error p50, all from the run's own records.

    .venv/bin/python benchmarks/many_users.py [--users 1024] [--tokens 300] [--ways in-process,2-processes]
    .venv/bin/python benchmarks/many_users.py --tokens 100 --ways in-process,2-processes,2-ray-actors
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only, read as Ray is imported
sys.path.insert(0, str(Path(__file__).parent))
from client_speed import errors_of, percentile, start_server  # noqa: E402

from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.store.run_dir import RunDir  # noqa: E402

CAMPAIGN = """
[campaign]
name = "many-users-{way}"
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


def parse_way(way: str) -> tuple[int, int]:
    """(client_processes, ray_actors) of a `--ways` entry."""
    if way == "in-process":
        return 1, 0
    found = re.fullmatch(r"(\d+)-(processes|ray-actors)", way)
    if not found or int(found[1]) < 1:
        raise SystemExit(f"error: --ways: {way!r} is not in-process, N-processes or N-ray-actors")
    count = int(found[1])
    return (count, 0) if found[2] == "processes" else (1, count)


def local_cluster() -> tuple[str, Any]:
    """A head and a worker node on 127.0.0.1; its address and the object that shuts it down."""
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        raise SystemExit("error: --ways: a ray-actors way needs Ray: pip install 'ctxbench[ray]'") from None
    node: dict[str, Any] = {"num_cpus": 2, "object_store_memory": 80 * 2**20, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "node_ip_address": "127.0.0.1"})
    cluster.add_node(**node, node_ip_address="127.0.0.1")
    return cluster.address, cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--ways", default="in-process,2-processes")
    parser.add_argument("--port", type=int, default=8768)
    args = parser.parse_args()
    ways = [(way, *parse_way(way)) for way in args.ways.split(",")]
    url = f"http://127.0.0.1:{args.port}"
    with ExitStack() as stack:
        address = None
        if any(actors for _, _, actors in ways):
            address, cluster = local_cluster()
            stack.callback(cluster.shutdown)
        server = start_server(args.port, 100.0)
        stack.callback(server.terminate)
        print(f"{args.users} users, {args.tokens} events each at 100 events/s, via `ctxbench run`")
        print(
            f"{'way':>14} {'nodes':>5} {'wall s':>7} {'overhead s':>10} {'start spread ms':>15} "
            f"{'events/s':>9} {'err p50':>8} {'p99':>8} {'max':>8} {'ttft err p50':>12}  (ms)"
        )
        for way, processes, actors in ways:
            with tempfile.TemporaryDirectory() as scratch:
                results = Path(scratch) / "results"
                campaign = Path(scratch) / "campaign.toml"
                campaign.write_text(
                    CAMPAIGN.format(
                        way=way,
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
                    command + (["--ray", address] if actors and address else []),
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
                f"{way:>14} {nodes:>5} {wall:>7.1f} {wall - span_s:>10.1f} {spread_ms:>15.1f} "
                f"{len(absolute) / span_s:>9.0f} {percentile(absolute, 50):>8.2f} "
                f"{percentile(absolute, 99):>8.2f} {max(absolute):>8.1f} {percentile(ttft, 50):>12.1f}"
                + (f"  {failed} FAILED" if failed else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()
