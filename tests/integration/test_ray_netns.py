"""A Ray cluster of hosts with their own addresses (issue 36): a network namespace per host on one bridge
(tests/netns.py), a Ray head in one, two workers with a stand-in GPU each, and the driver in a fourth, which
runs `ctxbench run FILE --ray HEAD:6379` as a user would on a real cluster. Nothing here listens on loopback
for another host: every address the cluster uses is a namespace's own. What it cannot show: the hosts share
one kernel and one clock, and the bridge has no WAN latency (docs/distributed.md)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns import Host, Network

from ctxbench.campaign import run_campaign
from ctxbench.campaign_file import load_campaign
from ctxbench.engines.models import TinyModel

from .test_campaign_llamacpp import campaign_file
from .test_ray_cluster import DEPLOYMENT, TWO, evidence

pytestmark = pytest.mark.engine

RAY = str(Path(sys.executable).parent / "ray")
PORT = 6379
OBJECT_STORE = str(80 * 2**20)


def _env() -> dict[str, str]:
    """The tests' environment for a host's processes, less what keeps Ray on loopback (conftest.py)."""
    return {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}


def _start(host: Host, args: list[str], cpus: int, temp: Path | None = None) -> None:
    """`ray start` on the host, at its own address (the head's temp directory: short, for Ray's sockets)."""
    node = ["--node-ip-address", host.address, "--num-cpus", str(cpus), "--object-store-memory", OBJECT_STORE]
    where = ["--temp-dir", str(temp)] if temp is not None else []
    done = host.run([RAY, "start", *args, *node, *where, "--disable-usage-stats"], timeout=180, env=_env())
    assert done.returncode == 0, f"ray start on {host.netns}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _nodes(driver: Host, head: str) -> dict[str, str]:
    """NodeID -> address of the alive nodes, asked from the driver's host as its driver would."""
    probe = (
        "import json, sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
        "print(json.dumps({n['NodeID']: n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']}))"
    )
    done = driver.run([sys.executable, "-c", probe, head], timeout=120, env=_env())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def hosts() -> Iterator[Network]:
    reason = Network.available()
    if reason is not None:
        pytest.skip(reason)
    temp = Path(tempfile.mkdtemp(prefix="ctxray"))  # Ray's sockets: a short path
    try:
        with Network("ray", ["head", "a", "b", "driver"]) as net:
            head = f"{net['head'].address}:{PORT}"
            _start(net["head"], ["--head", "--port", str(PORT), "--include-dashboard", "false"], 1, temp)
            for name, resource in (("a", "node_a"), ("b", "node_b")):
                resources = json.dumps({"gpu_standin": 1, resource: 1})
                _start(net[name], ["--address", head, "--resources", resources], 3)
            _start(net["driver"], ["--address", head], 0)
            deadline = time.monotonic() + 120
            while len(_nodes(net["driver"], head)) < 4:
                assert time.monotonic() < deadline, "the four Ray nodes did not all join within 120 s"
                time.sleep(2)
            yield net
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_two_deployments_on_two_hosts_give_the_evidence_of_one_process(
    hosts: Network, tmp_path: Path, tiny: TinyModel
) -> None:
    head = f"{hosts['head'].address}:{PORT}"
    deployments = "".join(
        DEPLOYMENT.format(name=name, gguf=tiny.gguf, tokenizer=tiny.tokenizer_dir, resource=resource)
        for name, resource in (("on-a", "node_a"), ("on-b", "node_b"))
    )
    (tmp_path / "ray").mkdir()
    path = campaign_file(tmp_path / "ray", TWO.format(actors=2, deployments=deployments))
    command = [sys.executable, "-m", "ctxbench", "run", str(path), "--ray", head]
    done = hosts["driver"].run(command, timeout=600, env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "on-a: done" in done.stdout and "on-b: done" in done.stdout, done.stdout
    addresses = _nodes(hosts["driver"], head)
    results = tmp_path / "ray" / "results"
    for manifest in sorted(results.glob("runs/*/manifest.json")):
        written = json.loads(manifest.read_text())
        host = hosts["a" if written["deployment"] == "on-a" else "b"]
        assert addresses[written["placement"]["node"]] == host.address, (written["placement"], addresses)
        # the engine listened on its host's loopback: the level's actors ran on that host alone
        records = [json.loads(line) for line in (manifest.parent / "requests.jsonl").read_text().splitlines()]
        level = [r for r in records if r["labels"].get("check") == "throughput"]
        assert len(level) == 4 * (2 + 1) and {r["labels"]["client_actor"] for r in level} == {"0", "1"}
        assert {addresses[n] for n in addresses if n[:12] in {r["labels"]["client_node"] for r in level}} == {
            host.address
        }

    (tmp_path / "one").mkdir()
    alone = campaign_file(tmp_path / "one", TWO.format(actors=0, deployments=deployments))
    assert [o.status for o in run_campaign(load_campaign(alone))] == ["done", "done"]
    assert evidence(results) == evidence(tmp_path / "one" / "results")
