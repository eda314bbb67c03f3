"""Topology preflight on recorded `nvidia-smi topo -m` texts (one is the lent H200's own output)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_main import run_main

from ctxbench.audits.topology import TopologyError, advice, iommu_mode, parse_topo_matrix

FIXTURES = Path(__file__).parents[1] / "fixtures" / "topology"


def load(name: str):
    return parse_topo_matrix((FIXTURES / name).read_text())


def test_two_nvlink_quads_joined_across_sockets() -> None:
    topology = load("two-nvlink-quads.txt")
    assert topology.islands() == [["GPU0", "GPU1", "GPU2", "GPU3"], ["GPU4", "GPU5", "GPU6", "GPU7"]]
    notes = " ".join(advice(topology, "translated", model_gb=300, gpu_gb=141))
    assert "do not split one model across the islands if replicas will do" in notes
    assert "IOMMU was set to passthrough" in notes and "NUMA nodes 0, 1" in notes
    assert "one replica per island" in notes  # 300 GB fits a quad of 141 GB GPUs


def test_full_nvswitch_node_is_one_island() -> None:
    topology = load("nvswitch-8.txt")
    assert len(topology.islands()) == 1 and topology.links[("GPU0", "GPU7")] == "NV18"
    assert not any("do not split" in note for note in advice(topology, "passthrough"))


def test_pcie_only_gpus_are_islands_of_one() -> None:
    topology = load("pcie-4.txt")
    assert topology.islands() == [["GPU0"], ["GPU1"], ["GPU2"], ["GPU3"]]
    assert any("PIX/SYS" in note for note in advice(topology, "off"))


def test_the_lent_h200s_own_output_with_its_ansi_underlines() -> None:
    topology = load("h200-single.txt")
    assert topology.gpus == ("GPU0",) and topology.islands() == [["GPU0"]]
    assert topology.cpu_affinity == {"GPU0": "0-15"} and topology.numa == {"GPU0": "0"}
    system = (FIXTURES / "h200-single-system.txt").read_text()
    cmdline = system.split("---")[1]
    assert iommu_mode(cmdline, []) == "off"
    notes = advice(topology, "off", model_gb=60, gpu_gb=141)
    assert notes[0] == "1 GPU(s) in 1 NVLink island(s): GPU0" and "one replica per GPU" in notes[-1]


def test_iommu_modes() -> None:
    assert iommu_mode("quiet iommu=pt intel_iommu=on", ["dmar0"]) == "passthrough"
    assert iommu_mode("quiet intel_iommu=on", ["dmar0"]) == "translated"
    assert iommu_mode("quiet", []) == "off"


def test_no_gpu_at_all_is_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="is an NVIDIA GPU visible"):
        parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    empty = tmp_path / "topo.txt"
    empty.write_text("No devices were found\n")
    result = run_main(["topology", "--from-file", str(empty)])
    assert result.exit_code == 1 and "NVIDIA GPU" in result.output


def test_command_prints_islands_and_advice() -> None:
    result = run_main(
        [
            "topology",
            "--from-file",
            str(FIXTURES / "two-nvlink-quads.txt"),
            "--model-gb",
            "120",
            "--gpu-gb",
            "141",
        ],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "2 NVLink island(s)" in text and "one replica per GPU" in text


def test_nvml_path_counts_nvlinks_per_peer_and_falls_back_to_pcie_levels() -> None:
    from types import SimpleNamespace

    from ctxbench.audits.topology import topology_from_nvml

    class NVMLError(Exception):
        pass

    buses = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:9A:00.0"]
    # GPU0 and GPU1 joined by 4 NVLinks; GPU2 reaches both only across the sockets.
    peers = {0: [buses[1]] * 4, 1: [buses[0]] * 4, 2: []}

    def remote(handle: int, link: int) -> SimpleNamespace:
        if link >= len(peers[handle]):
            raise NVMLError("not supported")
        return SimpleNamespace(busId=peers[handle][link].encode())

    fake = SimpleNamespace(
        NVMLError=NVMLError,
        NVML_NVLINK_MAX_LINKS=18,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 3,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=buses[h].encode()),
        nvmlDeviceGetNvLinkState=lambda h, link: (
            1 if link < len(peers[h]) else (_ for _ in ()).throw(NVMLError())
        ),
        nvmlDeviceGetNvLinkRemotePciInfo_v2=remote,
        nvmlDeviceGetTopologyCommonAncestor=lambda a, b: 50,
    )
    topology = topology_from_nvml(fake)
    assert topology.links[("GPU0", "GPU1")] == "NV4" and topology.links[("GPU0", "GPU2")] == "SYS"
    assert topology.islands() == [["GPU0", "GPU1"], ["GPU2"]]
