"""Many users over Ray actors: one level's users spread over `ray_actors` actors on the nodes of a cluster,
each driving the same asyncio users as one process does (`closed_loop.run_user`), all starting together.

Placement: a level's actors are placed all at once or not at all, one placement group of a CPU a bundle
spread over the nodes that can reach the server. A URL on loopback is reachable only from the nodes with the
same address as the one running the check (on a real cluster: that node alone, so run the engine on a routable
address or point an external deployment at one to use more); any other URL from every node. Actors placed one
by one could each hold a CPU while a level's last actor waits for one another level holds, and both levels
would wait for ever (two deployments' levels did, on 2 free CPUs). The group waits at most `ray_wait_s` for
its CPUs and the actors as long again to start; then the level fails, saying what it asked and what was free.

The start: every actor makes its client and says hello (its host, node and clock), then the driver names a
wall-clock instant 0.5 s ahead and each actor starts its users at that instant on its own clock. Records come
back one by one as each request ends (a Ray streaming generator), are written to the run here, and carry
`client_actor`, `client_host` and `client_node` labels. Stamps are `perf_counter_ns`, a clock of its host: a
record from another host is moved onto this host's clock by the difference of the two hosts' (wall -
monotonic) offsets, so it is as right as the hosts' wall clocks agree (NTP: about a millisecond); durations
within a record (TTFT, TPOT, decode) are exact either way. Percentiles are computed from the merged raw
records, never from merged histograms.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from ...client.router import Router
from ...client.stream import Client
from ...errors import CtxbenchError
from ...records import RequestRecord
from ...store.run_dir import RunDir
from .closed_loop import Level, WorkerJob, client_settings, make_client
from .labels import ClientLabels

START_AHEAD_S = 0.5  # from naming the start instant to it: every actor hears of it before it comes


def clock() -> dict[str, Any]:
    """This host's name and the offset of its wall clock from its monotonic one."""
    return {"host": socket.gethostname(), "offset_ns": time.time_ns() - time.perf_counter_ns()}


def shifted(record: RequestRecord, by_ns: int) -> RequestRecord:
    """The record with every stamp moved by `by_ns` (onto another host's monotonic clock)."""
    if by_ns == 0:
        return record
    return record.model_copy(
        update={
            "enqueued_ns": record.enqueued_ns + by_ns,
            "sent_ns": record.sent_ns + by_ns,
            "first_byte_ns": None if record.first_byte_ns is None else record.first_byte_ns + by_ns,
            "end_ns": record.end_ns + by_ns,
            "chunks": tuple(c.model_copy(update={"arrived_ns": c.arrived_ns + by_ns}) for c in record.chunks),
        }
    )


class _QueueRun(RunDir):
    """The run as an actor sees it: the same request ids; records go to a queue the generator drains."""

    def __init__(self, job: WorkerJob, queue: asyncio.Queue[RequestRecord | None]) -> None:
        super().__init__(job.run_path, job.attempt)
        self.queue = queue

    def append(self, record: RequestRecord) -> None:
        self.queue.put_nowait(record)


class LoadActor:
    """Some users of one level; a Ray actor (`users_over_ray` makes it one)."""

    def __init__(self, job: WorkerJob) -> None:
        self.job = job
        self.client: Client | Router | None = None

    async def hello(self) -> dict[str, Any]:
        import ray

        self.client = make_client(self.job.client)
        return {**clock(), "node": ray.get_runtime_context().get_node_id()}

    async def run(self, start_wall_ns: int) -> AsyncIterator[str]:
        """Start the users at `start_wall_ns` (wall clock) and yield each record as JSON as it ends."""
        job, client = self.job, self.client
        assert client is not None, "hello() makes the client"
        started = time.perf_counter() + (start_wall_ns - time.time_ns()) / 1e9
        await asyncio.sleep(max(0.0, started - time.perf_counter()))
        queue: asyncio.Queue[RequestRecord | None] = asyncio.Queue()
        run = _QueueRun(job, queue)

        async def users() -> None:
            try:
                await job.run_users(client, run, started)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(users())
        async with client:
            while (record := await queue.get()) is not None:
                yield record.model_dump_json()
            await task  # a user's exception reaches the driver as the generator's error


def reachable_nodes(url: str, here: str) -> list[dict[str, Any]]:
    """The alive nodes that can reach `url`, the node `here` (this task's) first."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    own = next((n for n in nodes if n["NodeID"] == here), None)
    if own is not None and on_loopback(url):
        nodes = [n for n in nodes if n["NodeManagerAddress"] == own["NodeManagerAddress"]]
    return sorted(nodes, key=lambda n: n["NodeID"] != here)


def on_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host == "localhost" or host.startswith("127.")


def bundles(count: int, url: str, nodes: list[dict[str, Any]]) -> list[dict[str, float]]:
    """A CPU an actor (one asyncio loop saturates a core first: docs/performance.md); on loopback, on a node
    of the check's own address (Ray gives every node the resource `node:<address>`)."""
    where = {f"node:{nodes[0]['NodeManagerAddress']}": 0.001} if on_loopback(url) else {}
    return [{"CPU": 1.0, **where} for _ in range(count)]


def require_cpus(what: str, count: int, url: str, nodes: list[dict[str, Any]]) -> None:
    """More actors than the nodes that can reach `url` have CPUs in all would wait for ever: refused now."""
    total = sum(n["Resources"].get("CPU", 0.0) for n in nodes)
    if total < count:
        raise CtxbenchError(
            f"{what}: they need a CPU each on the nodes that can reach {url}, and those {len(nodes)} have "
            f"{total:g} in all. Lower ray_actors, add nodes, or serve on a routable address."
        )


async def _within(awaitable: Any, seconds: float, failure: str) -> Any:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise CtxbenchError(failure) from None


def _free_cpus(nodes: list[dict[str, Any]]) -> str:
    import ray

    free = ray.available_resources().get("CPU", 0.0)
    total = sum(n["Resources"].get("CPU", 0.0) for n in nodes)
    return f"{free:g} CPUs free in the cluster, {total:g} on the {len(nodes)} nodes that can reach the server"


async def users_over_ray(level: Level) -> list[RequestRecord]:
    """One level's users over `params.ray_actors` actors; their records written here as they come back."""
    params, run, users, on_request = level.params, level.run, level.users, level.on_request
    try:
        import ray
        from ray.util import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError:
        raise CtxbenchError(
            "many users: ray_actors needs Ray: pip install 'ctxbench[ray]', and run on a cluster "
            "(ctxbench run FILE --ray ADDRESS)."
        ) from None
    if not ray.is_initialized():
        raise CtxbenchError(
            f"many users: ray_actors = {params.ray_actors} needs a Ray cluster: run the campaign with "
            "`ctxbench run FILE --ray ADDRESS` (or set ray_actors = 0)."
        )
    settings = client_settings(level.client)
    url = settings["clients"][0]["base_url"]
    here = ray.get_runtime_context().get_node_id()
    nodes = reachable_nodes(url, here)
    count = min(params.ray_actors, users)
    what = f"many users, {users} users over {count} Ray actors"
    require_cpus(what, count, url, nodes)
    group = placement_group(bundles(count, url, nodes), strategy="SPREAD")
    remote = ray.remote(LoadActor)
    actors: list[Any] = []
    records: list[RequestRecord] = []
    try:
        await _within(
            asyncio.wrap_future(group.ready().future()),
            params.ray_wait_s,
            f"{what}: Ray did not find {count} free CPUs on the nodes that can reach {url} within "
            f"ray_wait_s = {params.ray_wait_s:g} s ({_free_cpus(nodes)}); other work holds them. Free them, "
            "lower ray_actors or raise ray_wait_s, and run the campaign again.",
        )
        actors = [
            remote.options(
                num_cpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k),
            ).remote(level.job(settings, k, count))
            for k in range(count)
        ]
        hellos = await _within(
            asyncio.gather(*(actor.hello.remote() for actor in actors)),
            params.ray_wait_s,
            f"{what}: placed, but not all of them started within ray_wait_s = {params.ray_wait_s:g} s "
            "(each makes its client and says hello); see the Ray worker logs of those nodes.",
        )
        mine = clock()

        async def collect(index: int, actor: Any, start_wall_ns: int) -> None:
            hello = hellos[index]
            by_ns = 0 if hello["host"] == mine["host"] else hello["offset_ns"] - mine["offset_ns"]
            labels = ClientLabels(
                client_actor=index, client_host=hello["host"], client_node=hello["node"][:12]
            ).written()
            async for ref in actor.run.options(num_returns="streaming").remote(start_wall_ns):
                record = shifted(RequestRecord.model_validate_json(await ref), by_ns)
                record = record.model_copy(update={"labels": {**record.labels, **labels}})
                run.append(record)
                records.append(record)
                if on_request is not None:
                    on_request(record)

        start = time.time_ns() + int(START_AHEAD_S * 1e9)
        await asyncio.gather(*(collect(k, actor, start) for k, actor in enumerate(actors)))
    except ray.exceptions.RayError as exc:
        # an actor's own error (a RayTaskError wraps it; its text starts with the actor's process title)
        cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) else exc
        said = str(cause).splitlines()[0] if str(cause) else ""
        raise CtxbenchError(
            f"{what}: {type(cause).__name__}: {said}; the records that came back are kept."
        ) from None
    finally:
        release(ray, actors, group, remove_placement_group)
    return records


def release(ray: Any, actors: list[Any], group: Any, remove: Callable[[Any], None]) -> None:
    """Kill the level's actors and free its CPUs. Where the head is gone (its host cut off) Ray cannot be
    told and raises whatever its client meets (a RaySystemError, a gRPC or connection error): the level's
    own outcome, already on its way out, says what happened, never a traceback from here."""
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # the cluster is unreachable: nothing else is left to do
            pass
    try:
        remove(group)
    except Exception:  # as above
        pass
