"""GPU telemetry: a fake NVML module (the shape of pynvml's API) drives the sampler; NVML absent is real."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pytest

from ctxbench.measure.telemetry import (
    BETWEEN_CHECKS,
    TELEMETRY_FILE,
    GpuSample,
    GpuSampler,
    TelemetryFormatError,
    by_instant,
    gpu_series,
    read_telemetry,
    summarize,
)


class FakeNvml(types.SimpleNamespace):
    """Two GPUs; GPU 1 does not report power. Energy grows 100 J and memory 1 GiB per reading of GPU 0."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self) -> None:
        super().__init__()
        self.readings = {0: 0, 1: 0}
        self.shut_down = False

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.1"

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"Fake H200"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 700_000

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:
        self.readings[handle] += 1
        return types.SimpleNamespace(used=self.readings[handle] * 2**30, total=141 * 2**30)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=90, memory=40)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle == 1:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 500_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return self.readings[handle] * 100_000

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        return 1980 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlShutdown(self) -> None:
        self.shut_down = True


def wait_for_samples(sampler: GpuSampler, count: int) -> None:
    deadline = time.monotonic() + 30
    while sampler.samples_written < count:
        assert time.monotonic() < deadline, "the sampler wrote no samples"
        time.sleep(0.005)


def test_each_sample_names_the_running_check_and_unreported_fields_stay_null(tmp_path: Path) -> None:
    nvml = FakeNvml()
    path = tmp_path / TELEMETRY_FILE
    with GpuSampler(path, interval_s=0.01, nvml=nvml) as sampler:
        sampler.check = "capacity"
        wait_for_samples(sampler, 3)
        sampler.check = BETWEEN_CHECKS
    telemetry = read_telemetry(path)
    assert telemetry is not None and telemetry.available and nvml.shut_down
    header = telemetry.headers[0]
    assert header["gpus"][0] == {
        "index": 0,
        "name": "Fake H200",
        "uuid": "GPU-0",
        "memory_total_bytes": 141 * 2**30,
        "power_limit_w": 700.0,
    }
    assert {s.check for s in telemetry.samples} >= {"capacity"}
    assert {s.gpu for s in telemetry.samples} == {0, 1}
    assert all(s.power_w is None for s in telemetry.samples if s.gpu == 1)
    assert all(s.power_w == 500.0 for s in telemetry.samples if s.gpu == 0)


def test_a_gpu_list_limits_the_sampled_gpus(tmp_path: Path) -> None:
    with GpuSampler(tmp_path / TELEMETRY_FILE, interval_s=0.01, gpus=[1, 7], nvml=FakeNvml()) as sampler:
        wait_for_samples(sampler, 1)
    telemetry = read_telemetry(tmp_path / TELEMETRY_FILE)
    assert telemetry is not None
    assert [g["index"] for g in telemetry.headers[0]["gpus"]] == [1]
    assert {s.gpu for s in telemetry.samples} == {1}


def test_without_nvml_the_file_says_why_and_holds_no_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    path = tmp_path / TELEMETRY_FILE
    with GpuSampler(path, interval_s=0.01) as sampler:
        sampler.check = "needle"
    telemetry = read_telemetry(path)
    assert telemetry is not None and not telemetry.available and telemetry.samples == []
    assert telemetry.reason == "nvidia-ml-py is not installed"


def sample(
    t_s: float,
    check: str,
    gpu: int = 0,
    memory_gib: int = 10,
    power: float | None = 400.0,
    energy: float | None = None,
) -> GpuSample:
    return GpuSample(
        t_ns=int(t_s * 1e9),
        check=check,
        gpu=gpu,
        memory_used_bytes=memory_gib * 2**30,
        sm_util_pct=50,
        memory_util_pct=10,
        power_w=power,
        sm_clock_mhz=1980,
        memory_clock_mhz=3201,
        energy_j=energy,
    )


def test_a_checks_energy_comes_from_the_counter_and_its_peak_memory_sums_the_gpus() -> None:
    samples = [
        sample(0, "ramp", 0, 10, energy=1000.0),
        sample(0, "ramp", 1, 20, energy=5000.0),
        sample(2, "ramp", 0, 12, energy=1800.0),
        sample(2, "ramp", 1, 25, energy=5900.0),
        sample(3, "needle", 0, 90, energy=2000.0),
    ]
    ramp = summarize(samples, "ramp")
    assert ramp is not None
    assert ramp.peak_memory_bytes == 37 * 2**30
    assert ramp.energy_j == pytest.approx(800.0 + 900.0) and ramp.energy_source == "counter"
    assert ramp.mean_power_w == pytest.approx(800.0) and ramp.duration_s == pytest.approx(2.0)
    assert ramp.samples == 2 and ramp.gpus == 2


def test_without_an_energy_counter_power_is_integrated_over_time() -> None:
    samples = [
        sample(0, "capacity", power=100.0),
        sample(1, "capacity", power=300.0),
        sample(3, "capacity", power=300.0),
    ]
    figure = summarize(samples, "capacity")
    assert figure is not None
    assert figure.energy_j == pytest.approx(200.0 + 600.0) and figure.energy_source == "power x time"
    assert summarize(samples, "needle") is None


def test_a_long_run_is_binned_within_a_check_keeping_its_peak_memory() -> None:
    # 10 instants of two GPUs (GPU 1 reports no power from t = 4 s), 6 in the ramp, 4 in the needle check;
    # at most 4 points: bins of 3 instants that never straddle two checks
    samples = [
        s
        for t in range(10)
        for s in (
            sample(t, "ramp" if t < 6 else "needle", 0, memory_gib=10 + t, power=100.0 * t),
            sample(t, "ramp" if t < 6 else "needle", 1, memory_gib=1, power=None if t >= 4 else 50.0),
        )
    ]
    series = gpu_series(by_instant(samples), t0_ns=0, max_points=4)
    assert series.seconds == [0, 3, 6, 9] and series.checks == ["ramp", "ramp", "needle", "needle"]
    assert series.memory_gib == [13, 16, 19, 20]  # the largest sum of both GPUs in each bin
    # power: the mean of the bin's instants where both GPUs reported; none did from t = 4 s on
    assert series.power_w == [pytest.approx(150.0), pytest.approx(350.0), None, None]
    assert series.sm_util_pct == [50, 50, 50, 50]


def test_a_file_of_another_version_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / TELEMETRY_FILE
    path.write_text(json.dumps({"format": "ctxbench.gpu-telemetry", "version": 99}) + "\n")
    with pytest.raises(TelemetryFormatError, match=str(path)):
        read_telemetry(path)


def test_report_names_an_unreadable_telemetry_file_without_a_traceback(tmp_path: Path) -> None:
    from cli_main import run_main

    from ctxbench.store.run_dir import RunDir

    run = RunDir.create(tmp_path, "telemetry")
    run.write_manifest({"deployment": "d"})
    (run.path / TELEMETRY_FILE).write_text(
        json.dumps({"format": "ctxbench.gpu-telemetry", "version": 99}) + "\n"
    )
    result = run_main(["report", "--results", str(tmp_path)])
    assert (
        result.exit_code != 0 and "Traceback" not in result.output and "internal error" not in result.output
    )
    assert "telemetry version 99" in result.output
