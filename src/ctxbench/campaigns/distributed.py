"""A campaign over a Ray cluster (`ctxbench run FILE --ray ADDRESS`): each deployment is a Ray task that asks
for one GPU per entry of its `gpus` and its `ray_resources`, and Ray schedules it on any node that has them.

The node finds its engine in its cache (a llama.cpp build it lacks is built there, as `ctxbench engine build`
does), starts it, runs the checks and stops it, exactly as `ctxbench run`
does on one machine, in a run directory on its own disk; `results.mirror.Tail` sends that directory to the
driver's results directory as it is written, through a `Mirror` actor on the driver's node (the only writer
there, the campaign's state file included). A deployment whose node is lost keeps the state "started" with
its run id: `ctxbench run` again resumes that run from the driver's copy on whichever node Ray picks, its
finished units skipped. Ray does the scheduling; ctxbench only says what each task needs. Model and engine
paths are the node's: they must exist at the same path on every node that has the resources.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

from ..config.deployments import Deployment, ExternalDeployment, LlamaCppDeployment
from ..errors import CtxbenchError, ServerUnreachable
from ..results.mirror import Mirror, Tail
from ..store.run_dir import write_json_atomic
from .campaign import (
    Outcome,
    Work,
    campaign_record,
    pending,
    read_state,
    run_deployment,
    state_key,
    state_line,
)
from .campaign import state_path as campaign_state_path
from .campaign_file import Campaign

TAIL_INTERVAL_S = 1.0
# How long joining the cluster may take before we say so: Ray itself retries an address that accepts
# connections but is not a Ray head (or a head that stopped answering) for minutes. The TCP check (5 s) and
# this stay within 30 s together, Python's start included. CTXBENCH_RAY_CONNECT_S overrides it.
RAY_CONNECT_S = 15.0
WATCH_S = 2.0  # how often the driver looks for a waiting task's node among those Ray marked dead
HEAD_LOST_S = 10.0  # the head unreachable this long ends the campaign (Ray alone: 60 s, then an abort)


class HeadLost(CtxbenchError):
    """The Ray head stopped answering while deployments ran: names it and where what was measured is. Ray's
    client here is stranded: leaving through the interpreter's finalization crashed it (SIGSEGV)."""

    leave_at_once = True


# A driver joining in a process of its own, so that our timeout can stop it: ray.init has none to give.
_PROBE = "import sys, ray; ray.init(address=sys.argv[1], namespace='ctxbench-probe', log_to_driver=False)"


class RayNotInstalled(CtxbenchError):
    """`--ray` without Ray: says how to install the extra."""


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise RayNotInstalled(
            "--ray: Ray is not installed in this environment. Install the extra: pip install 'ctxbench[ray]' "
            "(the same version on every node of the cluster)."
        ) from None
    return ray


def listening(address: str, timeout_s: float = 5.0) -> None:
    """A host:port address must accept a TCP connection: Ray itself retries an address where nothing listens
    for minutes before it gives up. 'auto' and ray:// addresses are left to Ray."""
    host, colon, port = address.rpartition(":")
    if address == "auto" or "://" in address or not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ServerUnreachable(
            f"--ray {address}: nothing accepts connections there ({exc.strerror or exc}). Give the address "
            "`ray start --head` printed (host:port of the head node's GCS, 6379 by default), or 'auto' on a "
            "node of the cluster."
        ) from None


def answers(address: str, timeout_s: float | None = None) -> None:
    """A driver can join the cluster at `address` within `timeout_s` (RAY_CONNECT_S): tried in a process of
    its own, ended when the time is up. Raises ServerUnreachable naming the address and what to check."""
    limit = timeout_s or float(os.environ.get("CTXBENCH_RAY_CONNECT_S", RAY_CONNECT_S))
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, address],
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ServerUnreachable(
            f"--ray {address}: no Ray cluster answered there within {limit:g} s (something accepts "
            "connections, but it is not a Ray head, or the head does not answer). Check the address `ray "
            "start --head` printed, that the head is up (`ray status --address ADDRESS` on a node), and that "
            "this host reaches the head's ports (6379 and the ones `ray start` lists)."
        ) from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        last = said[-1] if said else f"exit {done.returncode}"
        raise ServerUnreachable(
            f"--ray {address}: cannot join the Ray cluster ({last}). Start it with `ray start --head` and "
            "give its address (host:port), or 'auto' on a node of it."
        )


def connect(address: str) -> ModuleType:
    """Join the cluster at `address` as its driver (a no-op when already joined)."""
    ray = require_ray()
    if not ray.is_initialized():
        listening(address)
        if address != "auto":
            answers(address)
        try:
            ray.init(address=address, namespace="ctxbench", log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise CtxbenchError(
                f"--ray {address}: cannot join the Ray cluster ({str(exc).splitlines()[0]}). Start it with "
                "`ray start --head` and give its address (host:port), or 'auto' on a node of it."
            ) from None
    return ray


def run_campaign_on_ray(
    campaign: Campaign,
    address: str,
    *,
    results: Path | None = None,
    names: list[str] | None = None,
    force: bool = False,
    on_status: Callable[[str], None] = lambda message: None,
) -> list[Outcome]:
    """Every selected deployment (and repeat) as a Ray task, all at once; Ray runs each where it fits and as
    many together as the cluster holds. Returns the outcomes in the file's order."""
    ray = connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    results = (results or campaign.campaign.results).resolve()
    state = campaign_state_path(campaign, results)
    write_json_atomic(state.with_suffix(".json"), campaign_record(campaign))
    mirror = (
        ray.remote(Mirror)
        .options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            ),
        )
        .remote(str(results))
    )
    task = ray.remote(deployment_task)
    work = pending(campaign, results, campaign.select(names or []), force, on_status)
    refs: dict[Any, Work] = {}
    for item in work:
        if isinstance(item, Outcome):
            continue
        deployment, repeat, resume = item
        gpus = 0 if isinstance(deployment, ExternalDeployment) else len(deployment.gpus)  # nothing launched
        options = {"num_cpus": 1, "num_gpus": gpus, "resources": dict(deployment.ray_resources)}
        on_status(f"{deployment.name}: submitted to the Ray cluster ({_needs(options)})")
        relative_state = str(state.relative_to(results))
        ref = task.options(max_retries=0, **options).remote(
            campaign, deployment.name, repeat, resume.name if resume else None, mirror, relative_state
        )
        refs[ref] = item
    done: dict[tuple[str, int], Outcome] = {}
    waiting = list(refs)
    head = Watch(ray.get_runtime_context().gcs_address, results)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1, timeout=WATCH_S)
        try:
            answering = head.check()
        except HeadLost:
            # Ray's shutdown at exit waits on the lost head for ever: this process leaves without it (the
            # results are the Mirror's, written and synced as they came, in a process of its own)
            atexit.unregister(ray.shutdown)
            raise
        finished: list[tuple[Any, Outcome]] = []
        for ref in ready:
            deployment, repeat, _ = refs[ref]
            try:
                finished.append((ref, Outcome(**ray.get(ref))))
            except ray.exceptions.RayError as exc:
                finished.append((ref, _lost(state, deployment, repeat, exc)))
        for ref, address in _on_dead_nodes(ray, mirror, waiting, refs) if answering else []:
            deployment, repeat, _ = refs[ref]
            waiting.remove(ref)
            _cancel(ray, ref)
            finished.append((ref, _lost(state, deployment, repeat, None, address)))
        for ref, outcome in finished:
            deployment, repeat, _ = refs[ref]
            label = f"{deployment.name}" + (f" (repeat {repeat})" if repeat > 1 else "")
            on_status(
                f"{label}: {outcome.status}" + (f": {outcome.error.splitlines()[0]}" if outcome.error else "")
            )
            done[(deployment.name, repeat)] = outcome
    ray.kill(mirror)
    outcomes: list[Outcome] = []
    for item in work:
        outcomes.append(item if isinstance(item, Outcome) else done[(item[0].name, item[1])])
    return outcomes


def _needs(options: dict[str, Any]) -> str:
    parts = [f"{options['num_gpus']} GPU"] + [f"{v:g} {k}" for k, v in options["resources"].items()]
    return ", ".join(parts)


class Watch:
    """The head's GCS, probed (a TCP connection, 1 s at most) each turn of the driver's loop: Ray's own client
    retries a head that is gone for 60 s and then ends the process, with no word of what was kept."""

    def __init__(self, address: str, results: Path) -> None:
        self.address, self.results = address, results
        self.silent_since: float | None = None

    def check(self) -> bool:
        """Whether the head answers now (a question to the cluster would wait on it otherwise); raises
        HeadLost once it has not for HEAD_LOST_S."""
        try:
            listening(self.address, timeout_s=1.0)
            self.silent_since = None
            return True
        except ServerUnreachable:
            now = time.monotonic()
            self.silent_since = self.silent_since or now
        if now - self.silent_since >= HEAD_LOST_S:
            raise HeadLost(
                f"the Ray head at {self.address} stopped answering ({HEAD_LOST_S:g} s without a connection): "
                f"the campaign cannot go on. What each deployment measured until then is in {self.results} "
                "(written as it came). Bring the head's host back (or start the head again), then `ctxbench "
                "run` again resumes each run from there."
            )
        return False


def _on_dead_nodes(ray: Any, mirror: Any, waiting: list[Any], refs: dict[Any, Work]) -> list[tuple[Any, str]]:
    """The waiting tasks whose node Ray has marked dead, with that node's address. Ray's owner of a task
    whose host was cut off was not told for minutes (a cut host's node was dead within 3 s, its task still
    waited for after 30): the driver asks itself, every WATCH_S, from where each task said it started."""
    if not waiting:
        return []
    try:
        where = ray.get(mirror.placements.remote(), timeout=WATCH_S)
        dead = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if not n.get("Alive")}
    except ray.exceptions.RayError:
        return []  # the cluster itself does not answer now: the next turn asks again
    lost = []
    for ref in waiting:
        deployment, repeat, _ = refs[ref]
        node = where.get(state_key(deployment.name, repeat))
        if node in dead:
            lost.append((ref, dead[node]))
    return lost


def _cancel(ray: Any, ref: Any) -> None:
    try:
        ray.cancel(ref, force=True)
    except Exception:  # its node is gone: nothing there to cancel
        pass


def _lost(
    state: Path, deployment: Deployment, repeat: int, exc: Exception | None, address: str | None = None
) -> Outcome:
    """A task that did not return (its node or worker died, or Ray marked the node at `address` dead): its
    state stays "started", so running the campaign again resumes the run from what the driver holds."""
    run_id = read_state(state).get(state_key(deployment.name, repeat), {}).get("run_id")
    if address is not None:
        why = f"its node at {address} stopped answering and Ray marked it dead"
    else:
        first = str(exc).splitlines()[0] if str(exc) else ""
        why = f"{type(exc).__name__}: {first}"
    error = f"the Ray task running it did not finish ({why}). What it measured is in " + (
        f"run {run_id}; `ctxbench run` again resumes it." if run_id else "no run yet; `ctxbench run` again."
    )
    return Outcome(deployment.name, "failed", run_id, error)


LOCAL_PREFIX = "ctxbench-ray-"  # a task's local results: ctxbench-ray-<pid>-<random>


def sweep_orphans(temp: Path) -> list[Path]:
    """Remove the local results directories of tasks whose process is gone (a killed node's worker never
    reached its `finally`); those of live processes stay. The removed directories."""
    removed = []
    for path in temp.glob(f"{LOCAL_PREFIX}*-*"):
        pid = path.name.removeprefix(LOCAL_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def deployment_task(
    campaign: Campaign, name: str, repeat: int, resume_id: str | None, mirror: Any, state: str
) -> dict[str, Any]:
    """On the node Ray picked: run one deployment in a local results directory mirrored to the driver's."""
    import ray

    (deployment,) = campaign.select([name])
    gpus = ray.get_gpu_ids()
    if deployment.gpus and gpus:  # Ray's GPUs for this task, in the order the deployment lists its own
        deployment = deployment.model_copy(update={"gpus": [int(g) for g in gpus[: len(deployment.gpus)]]})

    def send(method: str, args: tuple[object, ...]) -> None:
        ray.get(getattr(mirror, method).remote(*args))

    send("placed", (state_key(name, repeat), ray.get_runtime_context().get_node_id()))

    if isinstance(deployment, LlamaCppDeployment) and deployment.binary is None:
        from ..engines.build import LlamaCppBuild, build_llamacpp

        try:
            build_llamacpp(LlamaCppBuild(variant=deployment.build))  # found in this node's cache, else built
        except CtxbenchError as exc:
            error = f"on {socket.gethostname()}: {exc}"
            send("append", (state, state_line(name, "failed", resume_id, error, repeat).encode()))
            return asdict(Outcome(name, "failed", resume_id, error))
    sweep_orphans(Path(tempfile.gettempdir()))
    local = Path(tempfile.mkdtemp(prefix=f"{LOCAL_PREFIX}{os.getpid()}-"))

    try:
        resume = None
        if resume_id is not None:
            resume = local / "runs" / resume_id
            for relative, data in ray.get(mirror.files.remote(resume_id)).items():
                (resume / relative).parent.mkdir(parents=True, exist_ok=True)
                (resume / relative).write_bytes(data)
        tail = Tail(local, send, TAIL_INTERVAL_S)
        tail.already_sent()
        tail.start()

        def attach(run: Any) -> None:
            run.on_completed = tail.flush

        try:
            outcome = run_deployment(
                campaign,
                deployment,
                local,
                lambda line: send("append", (state, line.encode())),
                resume,
                lambda message: print(message, flush=True),  # Ray forwards a task's output to the driver
                lambda: None,
                repeat,
                placement={
                    "executor": "ray",
                    "node": ray.get_runtime_context().get_node_id(),
                    "host": socket.gethostname(),
                    "gpus": [str(g) for g in gpus],
                },
                on_run=attach,
            )
        finally:
            tail.stop()
        return asdict(outcome)
    finally:
        shutil.rmtree(local, ignore_errors=True)
