"""Topology preflight: which GPUs talk over NVLink, which only over PCIe or across sockets, the IOMMU
mode, and what that means for a layout (the seed: "Check the topology first").

The link matrix comes from NVML (nvidia-ml-py), with `nvidia-smi topo -m` (the text a user already knows)
as the fallback and for NUMA and CPU affinity; saved `topo -m` text can be parsed too. NVLink islands are
the connected groups of GPUs joined by `NV#` links. The advice follows the seed's experience: replicas per
island beat one model split across islands, and cross-socket GPU copies failed until the IOMMU was set to
passthrough.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TopologyError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU\d+$")


@dataclass(frozen=True)
class Topology:
    gpus: tuple[str, ...]
    links: dict[tuple[str, str], str]  # (GPUa, GPUb) -> X, NV#, PIX, PXB, PHB, NODE, SYS
    numa: dict[str, str]
    cpu_affinity: dict[str, str]

    def islands(self) -> list[list[str]]:
        """Groups of GPUs connected by NVLink (a GPU with no NVLink is an island of one)."""
        seen: set[str] = set()
        groups = []
        for gpu in self.gpus:
            if gpu in seen:
                continue
            group, frontier = [], [gpu]
            while frontier:
                current = frontier.pop()
                if current in seen:
                    continue
                seen.add(current)
                group.append(current)
                frontier += [
                    b for (a, b), link in self.links.items() if a == current and link.startswith("NV")
                ]
            groups.append(sorted(group, key=lambda g: int(g[3:])))
        return groups


def parse_topo_matrix(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` output (ANSI underlines and NIC rows tolerated)."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_index = next((i for i, line in enumerate(lines) if "GPU0" in line and "Affinity" in line), None)
    if header_index is None:
        raise TopologyError("no GPU matrix in the `nvidia-smi topo -m` output: is an NVIDIA GPU visible?")
    columns = [c.strip() for c in lines[header_index].split("\t")]
    columns = [c for c in columns if c]
    gpus = tuple(c for c in columns if _GPU.match(c))
    links: dict[tuple[str, str], str] = {}
    numa: dict[str, str] = {}
    affinity: dict[str, str] = {}
    for line in lines[header_index + 1 :]:
        if line.startswith("Legend"):
            break
        cells = [c.strip() for c in line.split("\t")]
        if not _GPU.match(cells[0]):
            continue  # NIC rows and blank lines
        row, values = cells[0], cells[1:]
        for column, value in zip(columns, values, strict=False):
            if _GPU.match(column):
                links[(row, column)] = value
            elif column == "CPU Affinity":
                affinity[row] = value
            elif column == "NUMA Affinity":
                numa[row] = value
    return Topology(gpus, links, numa, affinity)


_NVML_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def topology_from_nvml(nvml: Any) -> Topology:  # the pynvml module, or a fake of it
    """The link matrix from NVML (nvidia-ml-py): NVLinks counted per peer, else the PCIe common ancestor."""
    nvml.nvmlInit()
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        buses = [_bus(nvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
        nvlinks: dict[tuple[int, int], int] = {}
        for i, handle in enumerate(handles):
            for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(handle, link) != 1:
                        continue
                    peer = _bus(nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(handle, link).busId)
                except nvml.NVMLError:
                    break  # no (more) NVLinks on this GPU
                if peer in buses:
                    key = (i, buses.index(peer))
                    nvlinks[key] = nvlinks.get(key, 0) + 1
        gpus = tuple(f"GPU{i}" for i in range(len(handles)))
        links = {}
        for i, a in enumerate(handles):
            for j, b in enumerate(handles):
                if i == j:
                    links[(gpus[i], gpus[j])] = "X"
                elif (i, j) in nvlinks:
                    links[(gpus[i], gpus[j])] = f"NV{nvlinks[(i, j)]}"
                else:
                    level = nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)
                    links[(gpus[i], gpus[j])] = _NVML_LEVELS.get(int(level), f"level {level}")
        return Topology(gpus, links, {}, {})
    finally:
        nvml.nvmlShutdown()


def _bus(value: bytes | str) -> str:
    text = value.decode() if isinstance(value, bytes) else value
    return text.lower().lstrip("0")


def read_topology() -> Topology:
    """The local machine's topology: NVML (nvidia-ml-py) first, `nvidia-smi topo -m` as the fallback,
    which also gives NUMA and CPU affinity."""
    try:
        import pynvml

        found = topology_from_nvml(pynvml)
        if found.gpus:
            try:
                text = _nvidia_smi_topology()
                return Topology(found.gpus, found.links, text.numa, text.cpu_affinity)
            except TopologyError:
                return found
    except Exception:  # no NVML library or no driver: nvidia-smi says why, below
        pass
    return _nvidia_smi_topology()


def _nvidia_smi_topology() -> Topology:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        raise TopologyError(
            "no NVIDIA GPU here: `nvidia-smi` is not installed. Run `ctxbench topology` on the GPU "
            "node, or give --from-file with its `nvidia-smi topo -m` output."
        )
    result = subprocess.run([tool, "topo", "-m"], capture_output=True, text=True)
    if result.returncode != 0:
        raise TopologyError(f"`nvidia-smi topo -m` failed: {(result.stderr or result.stdout).strip()[:300]}")
    return parse_topo_matrix(result.stdout)


def iommu_mode(cmdline: str, iommu_entries: list[str]) -> str:
    """`passthrough`, `translated` (an IOMMU is active and not in passthrough) or `off` (none exposed)."""
    if re.search(r"\biommu=pt\b|\biommu\.passthrough=1\b", cmdline):
        return "passthrough"
    return "translated" if iommu_entries else "off"


def local_iommu_mode() -> str:
    cmdline = Path("/proc/cmdline").read_text() if Path("/proc/cmdline").exists() else ""
    entries = (
        [p.name for p in Path("/sys/class/iommu").glob("*")] if Path("/sys/class/iommu").exists() else []
    )
    return iommu_mode(cmdline, entries)


def advice(
    topology: Topology, iommu: str, model_gb: float | None = None, gpu_gb: float | None = None
) -> list[str]:
    """Layout advice and warnings in the seed's words of experience."""
    islands = topology.islands()
    notes = [
        f"{len(topology.gpus)} GPU(s) in {len(islands)} NVLink island(s): "
        + "; ".join("+".join(group) for group in islands)
    ]
    crossing = {link for (a, b), link in topology.links.items() if a != b and not link.startswith("NV")}
    if len(islands) > 1:
        notes.append(
            f"GPUs in different islands talk over {'/'.join(sorted(crossing))}: do not split one model "
            "across the islands if replicas will do (one copy per island or per GPU)."
        )
    numas = set(topology.numa.values()) - {"N/A", ""}
    if "SYS" in crossing and iommu == "translated":
        notes.append(
            "warning: GPU pairs cross the CPU sockets (SYS) and the IOMMU translates: cross-socket GPU "
            "copies failed until the IOMMU was set to passthrough (iommu=pt on the kernel command line)."
        )
    if len(numas) > 1:
        notes.append(
            f"GPUs sit on NUMA nodes {', '.join(sorted(numas))}: "
            "pin each server's CPU threads to its GPUs' node."
        )
    if model_gb is not None and gpu_gb is not None and islands:
        island_gb = gpu_gb * len(islands[0])
        if model_gb <= gpu_gb:
            notes.append(f"a {model_gb:.0f} GB model fits one {gpu_gb:.0f} GB GPU: one replica per GPU.")
        elif model_gb <= island_gb:
            notes.append(
                f"a {model_gb:.0f} GB model fits one island ({island_gb:.0f} GB): one replica per island, "
                "tensor-parallel inside it."
            )
        else:
            notes.append(
                f"a {model_gb:.0f} GB model needs more than one island ({island_gb:.0f} GB): it must span "
                "islands; prefer pipeline over tensor parallelism across the slower link."
            )
    return notes
