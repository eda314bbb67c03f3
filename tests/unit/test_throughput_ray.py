"""Where a level's Ray actors may go (the placement itself is tested on a real cluster:
tests/integration/test_ray_cluster.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxbench.checks.throughput.ray import bundles, require_cpus
from ctxbench.errors import CtxbenchError

NODES = [
    {"NodeID": "own", "NodeManagerAddress": "10.0.0.7", "Resources": {"CPU": 2.0}},
    {"NodeID": "other", "NodeManagerAddress": "10.0.0.8", "Resources": {"CPU": 1.0, "GPU": 1.0}},
]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://localhost:8080/v1", "http://127.0.2.9:1"])
def test_a_server_on_loopback_keeps_every_actor_on_an_address_of_the_checks_own(url: str) -> None:
    assert bundles(3, url, NODES) == [{"CPU": 1.0, "node:10.0.0.7": 0.001}] * 3


def test_a_routable_server_lets_the_actors_go_to_any_node_with_a_free_cpu() -> None:
    assert bundles(2, "http://10.0.0.9:8000", NODES) == [{"CPU": 1.0}] * 2


def test_more_actors_than_the_reachable_nodes_have_cpus_are_refused_at_once_naming_them() -> None:
    require_cpus("level", 3, "http://10.0.0.9:8000", NODES)  # 3 CPUs in all: they fit
    with pytest.raises(CtxbenchError) as raised:
        require_cpus("many users, 4 users over 4 Ray actors", 4, "http://10.0.0.9:8000", NODES)
    said = str(raised.value)
    assert said.startswith("many users, 4 users over 4 Ray actors: they need a CPU each")
    assert "those 2 have 3 in all" in said and "Lower ray_actors" in said


def test_a_vanished_head_during_cleanup_leaves_the_levels_own_outcome_standing() -> None:
    """After the head's host is cut off, every call to the cluster raises: the cleanup swallows it, so the
    error the level is already raising (or its records) come out, not a traceback from the `finally`."""
    from ctxbench.checks.throughput.ray import release

    killed, removed = [], []

    class Gone:
        def kill(self, actor: object) -> None:
            killed.append(actor)
            raise ConnectionError("failed to connect to GCS at 10.0.0.1:6379")

    def remove(group: object) -> None:
        removed.append(group)
        raise RuntimeError("GCS is unreachable")

    release(Gone(), ["a", "b"], "group", remove)
    assert killed == ["a", "b"] and removed == ["group"]  # every actor tried, the group too


def test_a_killed_tasks_local_results_are_swept_by_the_next_task_on_its_node(tmp_path: Path) -> None:
    # Issue 57: a Ray run whose node was killed left its /tmp/ctxbench-ray-* directory (distributed.py
    # removed it in a `finally` that never runs then). The next task on the node removes those of dead
    # processes and leaves a live one's.
    import subprocess
    import sys

    from ctxbench.campaigns.distributed import LOCAL_PREFIX, sweep_orphans

    code = "import os; print(os.getpid())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    orphan = tmp_path / f"{LOCAL_PREFIX}{dead.stdout.strip()}-abc"
    live = tmp_path / f"{LOCAL_PREFIX}{os.getpid()}-def"
    other = tmp_path / "ctxbench-ray-notapid"
    for path in (orphan, live, other):
        (path / "runs").mkdir(parents=True)
    assert sweep_orphans(tmp_path) == [orphan]
    assert not orphan.exists() and live.exists() and other.exists()
