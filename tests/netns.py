"""Hosts with their own addresses on one machine: a network namespace per host, each joined to one bridge
(itself in a namespace of its own, so nothing of the machine's own network changes) by a veth pair.

    with Network("ray", ["head", "a", "b", "driver"]) as net:
        net["a"].popen(["ray", "start", ...])
        net.cut("a")        # the host's link down: packets to and from it are dropped, like a pulled cable
        net.restore("a")

Every address is inside the namespaces made here (10.<x>.<y>.0/24, private), and leaving the block deletes
them and kills every process left in them by pid (`ip netns pids`), whatever happened inside. Creating
namespaces needs root: `Network.available()` says why not where it cannot (tests skip with that reason).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=30)


@dataclass
class Host:
    """One namespace: its name, its address on the bridge, its link's name on the bridge's side."""

    netns: str
    address: str
    link: str
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    def command(self, args: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *args]

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """A process inside the host (its own session, so a stop reaches its children too)."""
        process = subprocess.Popen(self.command(args), start_new_session=True, **kwargs)
        self.processes.append(process)
        return process

    def run(self, args: Sequence[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(args), capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )

    def pids(self) -> list[int]:
        done = subprocess.run(
            ["ip", "netns", "pids", self.netns], capture_output=True, text=True, check=False
        )
        return [int(p) for p in done.stdout.split()]


class Network:
    """Namespaces `names` on one bridge, addresses .1, .2, ... in the order given."""

    @staticmethod
    def available() -> str | None:
        """None where namespaces can be made here; else why not (for a skip)."""
        if os.geteuid() != 0:
            return "network namespaces need root (CI runs as root)"
        probe = f"ctxprobe{os.getpid()}"
        try:
            _ip("netns", "add", probe)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot create a network namespace here: {exc}"
        _ip("netns", "del", probe, check=False)
        return None

    def __init__(self, tag: str, names: Sequence[str]) -> None:
        pid = os.getpid()
        self.prefix = f"ctx{tag}{pid}"
        self.subnet = f"10.{100 + pid % 100}.{pid // 100 % 250}"
        self.switch = f"{self.prefix}-sw"
        self.hosts = {
            name: Host(f"{self.prefix}-{name}", f"{self.subnet}.{i + 1}", f"v{pid % 100000}x{i}")
            for i, name in enumerate(names)
        }

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> Network:
        try:
            _ip("netns", "add", self.switch)
            _ip("link", "add", "br0", "type", "bridge", netns=self.switch)
            _ip("link", "set", "br0", "up", netns=self.switch)
            for host in self.hosts.values():
                _ip("netns", "add", host.netns)
                _ip("link", "set", "lo", "up", netns=host.netns)
                # the pair is made in the host's namespace: eth0 stays, the other end moves to the switch
                _ip("link", "add", "eth0", "type", "veth", "peer", "name", host.link, netns=host.netns)
                _ip("link", "set", host.link, "netns", self.switch, netns=host.netns)
                _ip("link", "set", host.link, "master", "br0", netns=self.switch)
                _ip("link", "set", host.link, "up", netns=self.switch)
                _ip("addr", "add", f"{host.address}/24", "dev", "eth0", netns=host.netns)
                _ip("link", "set", "eth0", "up", netns=host.netns)
                # a default route on the bridge: programs that find "their" address by routing outward (Ray
                # does) find this one; nothing leaves, the bridge reaches only these namespaces
                _ip("route", "add", "default", "dev", "eth0", netns=host.netns)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def cut(self, name: str) -> None:
        """The host's link down on the bridge's side: the host is cut off, its processes keep running."""
        _ip("link", "set", self.hosts[name].link, "down", netns=self.switch)

    def restore(self, name: str) -> None:
        _ip("link", "set", self.hosts[name].link, "up", netns=self.switch)

    def close(self) -> None:
        """Kill every process in the namespaces (TERM, then KILL after 5 s), then delete them."""
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            for host in self.hosts.values():
                for pid in host.pids():
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and any(h.pids() for h in self.hosts.values()):
                time.sleep(0.1)
        for host in self.hosts.values():
            for process in host.processes:
                if process.poll() is None:
                    process.kill()
                process.wait(timeout=5)
            _ip("netns", "del", host.netns, check=False)
        _ip("netns", "del", self.switch, check=False)
