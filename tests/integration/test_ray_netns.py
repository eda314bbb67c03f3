"""A Ray cluster of hosts with their own addresses (issue 36): a network namespace per host on one bridge
(tests/netns.py), a Ray head in one, two workers with a stand-in GPU each, and the driver in a fourth, which
runs `ctxbench run FILE --ray HEAD:6379` as a user would on a real cluster. Nothing here listens on loopback
for another host: every address the cluster uses is a namespace's own. What it cannot show: the hosts share
one kernel and one clock, and the bridge has no WAN latency (docs/distributed.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from netns import Host, Network

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.throughput.file import ThroughputFile
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServerConfig
from ctxbench.engines.models import TinyModel
from ctxbench.measure import metrics
from ctxbench.store.run_dir import RunDir

from .test_campaign_llamacpp import campaign_file
from .test_ray_cluster import DEPLOYMENT, TWO, evidence

pytestmark = [pytest.mark.engine, pytest.mark.netns]

RAY = str(Path(sys.executable).parent / "ray")
PORT = 6379
OBJECT_STORE = str(80 * 2**20)


def _env(**extra: str) -> dict[str, str]:
    """The tests' environment for a host's processes, less what keeps Ray on loopback (conftest.py)."""
    return {**{k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}, **extra}


# The head calls a node dead after about 2 s without an answer (Ray's default: about 30 s), so that a host cut
# off shows as its deployment's failure within the test's patience.
FAST_DEATH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


def _start(host: Host, args: list[str], cpus: int, temp: Path | None = None) -> None:
    """`ray start` on the host, at its own address (the head's temp directory: short, for Ray's sockets)."""
    node = ["--node-ip-address", host.address, "--num-cpus", str(cpus), "--object-store-memory", OBJECT_STORE]
    where = ["--temp-dir", str(temp)] if temp is not None else []
    command = [RAY, "start", *args, *node, *where, "--disable-usage-stats"]
    done = host.run(command, timeout=180, env=_env(**FAST_DEATH))
    assert done.returncode == 0, f"ray start on {host.netns}: {done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _nodes(driver: Host, head: str) -> dict[str, str]:
    """NodeID -> address of the alive nodes, asked from the driver's host as its driver would."""
    probe = (
        "import json, sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
        "alive = {n['NodeID']: n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']}; "
        "print('NODES', json.dumps(alive))"
    )
    done = driver.run([sys.executable, "-c", probe, head], timeout=120, env=_env())
    assert done.returncode == 0, done.stderr[-2000:]
    # Ray prints its own lines too (a node marked dead, say), before or after ours: ours is the marked one
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("NODES ")]
    return json.loads(line.removeprefix("NODES "))


def _wait_for_nodes(net: Network, count: int) -> None:
    head = f"{net['head'].address}:{PORT}"
    deadline = time.monotonic() + 120
    while len(_nodes(net["driver"], head)) < count:
        assert time.monotonic() < deadline, f"the {count} Ray nodes were not all alive within 120 s"
        time.sleep(2)


@pytest.fixture(scope="module")
def hosts() -> Iterator[Network]:
    reason = Network.available()
    if reason is not None:
        pytest.skip(reason)
    temp = Path(tempfile.mkdtemp(prefix="ctxray"))  # Ray's sockets: a short path
    try:
        # "slow": a host made ready here but joined to the cluster only by the test that needs it
        with Network("ray", ["head", "a", "b", "driver", "slow"]) as net:
            head = f"{net['head'].address}:{PORT}"
            # the head runs nothing: the deployments' tasks and the levels' actors go to the worker hosts
            _start(net["head"], ["--head", "--port", str(PORT), "--include-dashboard", "false"], 0, temp)
            for name, resource in (("a", "node_a"), ("b", "node_b")):
                resources = json.dumps({"gpu_standin": 1, resource: 1})
                _start(net[name], ["--address", head, "--resources", resources], 3)
            _start(net["driver"], ["--address", head], 0)
            _wait_for_nodes(net, 4)
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


# From another host: wait for the engine's /health (a minute at most).
READY = """
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(sys.argv[1] + "/health", timeout=1).read()
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit(1)
"""

FAR = """
[checks.throughput]
levels = [4]
requests_per_user = 3
warmup_requests = 1
prompt_tokens = 128
output_tokens = 8
ray_actors = 2

[[deployments]]
name = "far"
engine = "external"
urls = ["{url}"]
served_name = "tiny"
tokenizer = "{tokenizer}"
"""


def _engine_on(host: Host, build: LlamaCppBuild, tiny: TinyModel, port: int) -> str:
    """llama-server with the tiny model listening on the host's own address (every host reaches it); its URL
    once another host gets an answer from /health."""
    config = LlamaServerConfig(binary=build.server, model=tiny.gguf, ctx_size=4096, parallel=4, alias="tiny")
    command = [host.address if part == "127.0.0.1" else part for part in config.command(port)]
    host.popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://{host.address}:{port}"
    assert host.run([sys.executable, "-c", READY, url], timeout=120).returncode == 0, f"no engine at {url}"
    return url


def test_a_level_over_actors_on_two_hosts_merges_raw_records_into_exact_percentiles(
    hosts: Network, tmp_path: Path, tiny: TinyModel, llama_build: LlamaCppBuild
) -> None:
    """The engine listens on host a's own address, so both worker hosts reach it: the level's two actors go
    one to each (SPREAD), and its percentiles are those of the union of their raw records, not a merge of
    per-host summaries (inference-perf #797: histograms cannot be merged, raw samples can)."""
    a, head = hosts["a"], f"{hosts['head'].address}:{PORT}"
    url = _engine_on(a, llama_build, tiny, 8088)
    path = campaign_file(tmp_path, FAR.format(url=url, tokenizer=tiny.tokenizer_dir))
    done = hosts["driver"].run(
        [sys.executable, "-m", "ctxbench", "run", str(path), "--ray", head],
        timeout=600,
        env=_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_path,) = (tmp_path / "results" / "runs").iterdir()
    addresses = _nodes(hosts["driver"], head)
    measured = [r for r in RunDir(run_path).records() if r.check == "throughput" and not r.warmup]
    assert len(measured) == 4 * 3 and all(r.ok for r in measured)
    nodes = {r.labels["client_node"] for r in measured}
    assert {addresses[n] for n in addresses if n[:12] in nodes} == {a.address, hosts["b"].address}
    level = ThroughputFile.load(run_path)
    assert level is not None
    figures = level.levels["4"]
    ttfts = [metrics.ttft_s(r) for r in measured]
    union = np.percentile([t for t in ttfts if t is not None], [50, 99])
    # the same samples, the same interpolation; ctxbench's and NumPy's arithmetic may round the last bit apart
    # (seen under load: 0.09126559449999999 against 0.0912655945)
    assert (figures.ttft_s.p50, figures.ttft_s.p99) == pytest.approx(
        (float(union[0]), float(union[1])), rel=1e-12
    )
    assert sorted(figures.request_ids) == sorted(r.request_id for r in measured)


# A Python that sleeps before it can run a Ray worker: the host's actors are placed but never say hello.
SLOW_WORKER = """
import sys, time
if any("default_worker.py" in arg for arg in sys.argv):
    time.sleep(120)
"""

STUCK = """
[checks.throughput]
levels = [3]
requests_per_user = 1
warmup_requests = 0
prompt_tokens = 128
output_tokens = 4
ray_actors = 3
ray_wait_s = 5

[[deployments]]
name = "stuck"
engine = "external"
urls = ["{url}"]
served_name = "tiny"
tokenizer = "{tokenizer}"
ray_resources = {{ node_a = 1 }}
"""


def test_a_level_whose_actors_are_placed_but_never_start_fails_in_ray_wait_s_without_a_traceback(
    hosts: Network, tmp_path: Path, tiny: TinyModel, llama_build: LlamaCppBuild
) -> None:
    """Three actors spread over the three hosts with CPUs; on the third, "slow", no Ray worker can start (its
    Python sleeps first), so that actor is placed and never says hello: the level fails after ray_wait_s
    naming what happened, the run exits 1, and no traceback reaches the user."""
    a, slow, head = hosts["a"], hosts["slow"], f"{hosts['head'].address}:{PORT}"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_WORKER)
    command = [RAY, "start", "--address", head, "--node-ip-address", slow.address, "--num-cpus", "1"]
    command += ["--object-store-memory", OBJECT_STORE, "--disable-usage-stats"]
    done = slow.run(command, timeout=180, env=_env(PYTHONPATH=str(site), **FAST_DEATH))
    assert done.returncode == 0, done.stderr[-2000:]
    try:
        _wait_for_nodes(hosts, 5)
        url = _engine_on(a, llama_build, tiny, 8089)
        path = campaign_file(tmp_path, STUCK.format(url=url, tokenizer=tiny.tokenizer_dir))
        run = [sys.executable, "-m", "ctxbench", "run", str(path), "--ray", head]
        done = hosts["driver"].run(run, timeout=600, env=_env(), cwd=tmp_path)
        output = done.stdout + done.stderr
        assert done.returncode == 1, output[-3000:]
        assert "placed, but not all of them started within ray_wait_s = 5 s" in output, output[-3000:]
        assert "Traceback" not in done.stdout and "Traceback" not in done.stderr.split("(deployment_task")[0]
    finally:
        for pid in slow.pids():  # the slow host leaves the cluster; the head calls its node dead in seconds
            os.kill(pid, 9)
        deadline = time.monotonic() + 60
        while slow.address in _nodes(hosts["driver"], head).values():
            assert time.monotonic() < deadline, (
                "the slow host's node stayed alive 60 s after its processes died"
            )
            time.sleep(1)


# The 1-user ramp ends (a unit of its own), then the 2-user one starts with its second user 8 s behind: the
# host is cut in those 8 s, mid-ramp.
RAMP = (
    """
[checks.capacity]
[checks.ramp]
start = 256
end = 1024
turns = 3
users = [1, 2]
max_tokens = 16
stagger_s = 8
"""
    + DEPLOYMENT
)


def _run_until_the_2_user_ramp(hosts: Network, command: list[str], cwd: Path) -> subprocess.Popen[str]:
    """`ctxbench run` from the driver's host, returned once a record of the 2-user ramp reached the driver."""
    driver = hosts["driver"].popen(
        command, env=_env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 300
    while not any(
        '"users":"2"' in p.read_text() for p in (cwd / "results" / "runs").glob("*/requests.jsonl")
    ):
        if driver.poll() is not None or time.monotonic() > deadline:
            driver.kill()
            pytest.fail(f"the 2-user ramp never started: {driver.communicate()[0]}")
        time.sleep(0.2)
    return driver


def test_a_host_cut_off_mid_ramp_fails_its_deployment_by_name_and_the_run_resumes_once_it_is_back(
    hosts: Network, tmp_path: Path, tiny: TinyModel
) -> None:
    a, head = hosts["a"], f"{hosts['head'].address}:{PORT}"
    path = campaign_file(
        tmp_path, RAMP.format(name="cut", gguf=tiny.gguf, tokenizer=tiny.tokenizer_dir, resource="node_a")
    )
    command = [sys.executable, "-m", "ctxbench", "run", str(path), "--ray", head]
    driver = _run_until_the_2_user_ramp(hosts, command, tmp_path)
    records = tmp_path / "results" / "runs"
    hosts.cut("a")  # mid-ramp: the engine, its deployment's task and its node go silent together
    output, _ = driver.communicate(timeout=300)
    assert driver.returncode == 1, output
    assert "cut: failed: the Ray task running it did not finish" in output and "again resumes it" in output, (
        output
    )
    (run_path,) = records.iterdir()
    kept = [json.loads(line) for line in (run_path / "requests.jsonl").read_text().splitlines()]
    assert {r["labels"]["check"] for r in kept} >= {"capacity", "ramp"}  # what reached the driver stays
    units = (run_path / "units.jsonl").read_text()
    assert '"ramp-u1"' in units and '"ramp-u2"' not in units, units

    hosts.restore("a")
    for pid in a.pids():  # the head called host a's node dead: its processes go, a new node takes its place
        os.kill(pid, 9)
    _start(a, ["--address", head, "--resources", json.dumps({"gpu_standin": 1, "node_a": 1})], 3)
    _wait_for_nodes(hosts, 4)
    again = hosts["driver"].run(command, timeout=600, env=_env(), cwd=tmp_path)
    assert again.returncode == 0 and "cut: done" in again.stdout, again.stdout[-3000:] + again.stderr[-3000:]
    assert [p.name for p in records.iterdir()] == [run_path.name]  # the same run, resumed
    manifest = json.loads((run_path / "manifest.json").read_text())
    assert [a["attempt"] for a in manifest["attempts"]] == [1, 2]
    records_now = [json.loads(line) for line in (run_path / "requests.jsonl").read_text().splitlines()]
    for finished in ("capacity", "1"):  # finished units (capacity, the 1-user ramp) are not sent again

        def mine(r: dict[str, Any], unit: str = finished) -> bool:
            return r["labels"]["check"] == unit or r["labels"].get("users") == unit

        assert [r for r in records_now if mine(r)] == [r for r in kept if mine(r)]
    assert '"ramp-u2"' in (run_path / "units.jsonl").read_text()


def test_the_heads_host_cut_off_ends_the_run_naming_it_and_keeps_what_was_measured(
    hosts: Network, tmp_path: Path, tiny: TinyModel
) -> None:
    """Last in this module: the cluster does not outlive its head (the fixture's teardown removes it)."""
    head = f"{hosts['head'].address}:{PORT}"
    path = campaign_file(
        tmp_path,
        RAMP.format(name="headless", gguf=tiny.gguf, tokenizer=tiny.tokenizer_dir, resource="node_b"),
    )
    command = [sys.executable, "-m", "ctxbench", "run", str(path), "--ray", head]
    driver = _run_until_the_2_user_ramp(hosts, command, tmp_path)
    records = tmp_path / "results" / "runs"
    hosts.cut("head")
    output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 1, output[-3000:]
    assert f"error: the Ray head at {head} stopped answering" in output and "Traceback" not in output, output[
        -3000:
    ]
    (run_path,) = records.iterdir()
    units = (run_path / "units.jsonl").read_text()
    assert '"capacity"' in units and '"ramp-u1"' in units, units  # finished units reached this machine
    kept = [json.loads(line) for line in (run_path / "requests.jsonl").read_text().splitlines()]
    assert {r["labels"].get("users") for r in kept if r["labels"]["check"] == "ramp"} >= {"1"}
