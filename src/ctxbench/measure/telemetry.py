"""GPU telemetry: what the GPUs did while each check ran, sampled through NVML at a fixed interval.

Each sample holds, per GPU, memory used, SM and memory-controller utilisation, power, SM and memory
clocks and the board's energy counter, stamped with `perf_counter_ns` (the clock of the request
records, so the timeline sets the GPU under the requests) and tagged with the check that was running.
The run directory keeps them in `telemetry.jsonl`: a header line per attempt, then one line per GPU per
sample. Without NVML or without a GPU the header says why, no sample follows and the checks run
unchanged. A field the GPU does not report is null, never zero.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..errors import TelemetryFormatError
from ..records import RequestRecord
from . import metrics

TELEMETRY_FILE = "telemetry.jsonl"
TELEMETRY_FORMAT = "ctxbench.gpu-telemetry"
TELEMETRY_VERSION = 1
BETWEEN_CHECKS = "-"


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant. `energy_j` is the board's cumulative counter (since the driver loaded)."""

    t_ns: int
    check: str
    gpu: int
    memory_used_bytes: int | None
    sm_util_pct: int | None
    memory_util_pct: int | None
    power_w: float | None
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    energy_j: float | None


def _load_nvml() -> tuple[ModuleType | None, str | None]:
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no usable GPU here
        return None, f"NVML did not start ({exc}); no NVIDIA driver on this machine"
    return pynvml, None


class GpuSampler:
    """A thread that appends one sample per GPU every `interval_s` to `path` while the run goes on.

    `gpus` are NVML indices (all GPUs when empty). Set `check` as each check starts. `nvml` stands in
    for the `pynvml` module (tests); by default it is imported and initialised here."""

    def __init__(
        self,
        path: Path,
        *,
        interval_s: float = 0.5,
        gpus: Sequence[int] = (),
        attempt: int = 1,
        nvml: ModuleType | None = None,
    ) -> None:
        self.path = path
        self.interval_s = interval_s
        self.check = BETWEEN_CHECKS
        self._wanted = tuple(gpus)
        self._attempt = attempt
        self._nvml = nvml
        self._handles: list[tuple[int, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples_written = 0

    def __enter__(self) -> GpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        nvml, reason = (self._nvml, None) if self._nvml is not None else _load_nvml()
        header: dict[str, Any] = {
            "format": TELEMETRY_FORMAT,
            "version": TELEMETRY_VERSION,
            "attempt": self._attempt,
            "interval_s": self.interval_s,
            "clock": "perf_counter_ns",
            "gpus": [],
        }
        if nvml is not None and self.interval_s > 0:
            try:
                count = int(nvml.nvmlDeviceGetCount())
                indices = [i for i in (self._wanted or range(count)) if i < count]
                self._handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
                header["gpus"] = [_describe(nvml, i, handle) for i, handle in self._handles]
                header["driver"] = _text(_call(nvml.nvmlSystemGetDriverVersion))
            except Exception as exc:
                self._handles, reason = [], f"NVML could not list the GPUs ({exc})"
            if not self._handles and reason is None:
                reason = "NVML shows no GPU" + (f" among {list(self._wanted)}" if self._wanted else "")
        elif nvml is not None:
            reason = "sampling is off (interval 0)"
        header["available"] = bool(self._handles)
        header["reason"] = reason
        self._nvml = nvml
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("a")
        self._out.write(json.dumps(header) + "\n")
        self._out.flush()
        if self._handles:
            self._thread = threading.Thread(target=self._run, name="gpu-telemetry", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample_once()  # the last instant of the run, so every check has a closing sample
        if hasattr(self, "_out"):
            self._out.close()
            del self._out
        if self._nvml is not None and self._handles:
            _call(self._nvml.nvmlShutdown)

    def _run(self) -> None:
        # Samples land on a fixed grid from the start, so a slow NVML call does not drift the interval.
        started = time.perf_counter()
        tick = 0
        while not self._stop.is_set():
            self._sample_once()
            tick += 1
            self._stop.wait(max(0.0, started + tick * self.interval_s - time.perf_counter()))

    def _sample_once(self) -> None:
        nvml = self._nvml
        assert nvml is not None
        check = self.check
        lines = []
        for index, handle in self._handles:
            t_ns = time.perf_counter_ns()
            memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
            rates = _call(nvml.nvmlDeviceGetUtilizationRates, handle)
            power_mw = _call(nvml.nvmlDeviceGetPowerUsage, handle)
            energy_mj = _call(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
            sample = GpuSample(
                t_ns=t_ns,
                check=check,
                gpu=index,
                memory_used_bytes=None if memory is None else int(memory.used),
                sm_util_pct=None if rates is None else int(rates.gpu),
                memory_util_pct=None if rates is None else int(rates.memory),
                power_w=None if power_mw is None else power_mw / 1000.0,
                sm_clock_mhz=_call(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
                memory_clock_mhz=_call(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
                energy_j=None if energy_mj is None else energy_mj / 1000.0,
            )
            lines.append(json.dumps(asdict(sample)))
        self._out.write("".join(line + "\n" for line in lines))
        self._out.flush()
        self.samples_written += 1


def _call(function: Any, *args: Any) -> Any:
    """An NVML reading, or None where this GPU or driver does not report it."""
    try:
        return function(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _describe(nvml: ModuleType, index: int, handle: Any) -> dict[str, Any]:
    memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
    limit_mw = _call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    return {
        "index": index,
        "name": _text(_call(nvml.nvmlDeviceGetName, handle)),
        "uuid": _text(_call(nvml.nvmlDeviceGetUUID, handle)),
        "memory_total_bytes": None if memory is None else int(memory.total),
        "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
    }


@dataclass(frozen=True)
class Telemetry:
    """A run's telemetry file as read back: each attempt's header and every sample, in order."""

    headers: list[dict[str, Any]]
    samples: list[GpuSample]

    @property
    def available(self) -> bool:
        return any(h.get("available") for h in self.headers)

    @property
    def reason(self) -> str | None:
        return next((h.get("reason") for h in reversed(self.headers) if h.get("reason")), None)

    def gpu_names(self) -> list[str]:
        return sorted({str(g.get("name")) for h in self.headers for g in h.get("gpus", [])})


def read_telemetry(path: Path) -> Telemetry | None:
    """`telemetry.jsonl` (None when the run has none); a torn last line is skipped."""
    if not path.exists():
        return None
    headers, samples = [], []
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if data.get("format") == TELEMETRY_FORMAT:
            if data.get("version") != TELEMETRY_VERSION:
                raise TelemetryFormatError(
                    f"{path}: telemetry version {data.get('version')} is not {TELEMETRY_VERSION}; "
                    "rebuild the report with the ctxbench that wrote it"
                )
            headers.append(data)
        else:
            samples.append(GpuSample(**data))
    return Telemetry(headers, samples)


@dataclass(frozen=True)
class CheckTelemetry:
    """What the GPUs did over one check: totals are over the sampled GPUs at each instant."""

    check: str
    gpus: int
    samples: int
    duration_s: float
    peak_memory_bytes: int | None
    mean_power_w: float | None
    energy_j: float | None
    energy_source: str  # "counter" (the board's energy counter) or "power x time" (integrated samples)
    mean_sm_util_pct: float | None
    max_sm_clock_mhz: int | None


_V = TypeVar("_V", int, float)


def _every(values: list[_V | None]) -> list[_V] | None:
    """The values when every GPU of an instant reported one, else None (a sum over some GPUs is no total)."""
    present = [v for v in values if v is not None]
    return present if len(present) == len(values) else None


def by_instant(samples: Iterable[GpuSample]) -> list[list[GpuSample]]:
    """Samples grouped into instants (one sample per GPU, taken in the same pass), in time order."""
    instants: list[list[GpuSample]] = []
    for sample in samples:
        if (
            instants
            and all(s.gpu != sample.gpu for s in instants[-1])
            and instants[-1][0].check == sample.check
        ):
            instants[-1].append(sample)
        else:
            instants.append([sample])
    return instants


@dataclass(frozen=True)
class GpuSeries:
    """Telemetry as series over time for a figure: seconds since `t0_ns`, memory (GiB, all GPUs: the
    largest sample of a bin), power (W, all GPUs: the bin's mean) and SM utilisation (%, mean over GPUs
    and the bin), and the check each point was taken in. A field no GPU reported is None at that point."""

    seconds: list[float]
    memory_gib: list[float | None]
    power_w: list[float | None]
    sm_util_pct: list[float | None]
    checks: list[str]


def gpu_series(instants: Sequence[Sequence[GpuSample]], t0_ns: int, max_points: int = 1500) -> GpuSeries:
    """`instants` (from `by_instant`) as at most `max_points` points: consecutive instants of one check are
    binned together when there are more, so a day of samples stays a figure a browser can draw."""
    size = max(1, -(-len(instants) // max_points))
    bins: list[list[Sequence[GpuSample]]] = []
    for instant in instants:
        if bins and len(bins[-1]) < size and bins[-1][0][0].check == instant[0].check:
            bins[-1].append(instant)
        else:
            bins.append([instant])

    def total(instant: Sequence[GpuSample], field: str) -> float | None:
        values = [getattr(s, field) for s in instant]
        return None if any(v is None for v in values) else float(sum(values))

    def mean(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    memory = [[total(i, "memory_used_bytes") for i in b] for b in bins]
    return GpuSeries(
        seconds=[(b[0][0].t_ns - t0_ns) / 1e9 for b in bins],
        memory_gib=[max((m / 2**30 for m in ms if m is not None), default=None) for ms in memory],
        power_w=[mean(total(i, "power_w") for i in b) for b in bins],
        sm_util_pct=[mean(mean(s.sm_util_pct for s in i) for i in b) for b in bins],
        checks=[b[0][0].check for b in bins],
    )


def summarize(samples: Sequence[GpuSample], check: str) -> CheckTelemetry | None:
    """One check's telemetry; energy from the board's counter (last - first, per GPU), else from the
    sampled power integrated over time (trapezoids). None when the check has no sample."""
    mine = [s for s in samples if s.check == check]
    if not mine:
        return None
    gpus = sorted({s.gpu for s in mine})
    instants = by_instant(mine)
    memory = [sum(used) for i in instants if (used := _every([s.memory_used_bytes for s in i])) is not None]
    power = [
        (i[0].t_ns, sum(watts)) for i in instants if (watts := _every([s.power_w for s in i])) is not None
    ]
    util = [s.sm_util_pct for s in mine if s.sm_util_pct is not None]
    clocks = [s.sm_clock_mhz for s in mine if s.sm_clock_mhz is not None]
    duration = (mine[-1].t_ns - mine[0].t_ns) / 1e9
    energy, source = None, "counter"
    counters = {g: [s.energy_j for s in mine if s.gpu == g and s.energy_j is not None] for g in gpus}
    if all(len(c) >= 2 for c in counters.values()):
        energy = sum(c[-1] - c[0] for c in counters.values())
    elif len(power) >= 2:
        energy, source = (
            sum((b[0] - a[0]) / 1e9 * (a[1] + b[1]) / 2 for a, b in itertools.pairwise(power)),
            "power x time",
        )
    return CheckTelemetry(
        check=check,
        gpus=len(gpus),
        samples=len(instants),
        duration_s=duration,
        peak_memory_bytes=max(memory) if memory else None,
        mean_power_w=sum(p for _, p in power) / len(power) if power else None,
        energy_j=energy,
        energy_source=source,
        mean_sm_util_pct=sum(util) / len(util) if util else None,
        max_sm_clock_mhz=max(clocks) if clocks else None,
    )


def checks_in(samples: Sequence[GpuSample]) -> list[str]:
    """The checks the samples cover, in the order they ran (the time between checks left out)."""
    seen: dict[str, None] = {}
    for sample in samples:
        if sample.check != BETWEEN_CHECKS:
            seen.setdefault(sample.check, None)
    return list(seen)


@dataclass(frozen=True)
class TokenEnergy:
    """A check's GPU energy over the tokens its requests produced and processed (both over the whole check:
    the two are not shares of one total). Prompt tokens are those prefilled, cached ones left out."""

    output_tokens: int
    prefilled_tokens: int
    joules_per_output_token: float | None
    joules_per_prefilled_token: float | None


def token_energy(figure: CheckTelemetry, records: Iterable[RequestRecord]) -> TokenEnergy:
    """energy_j / sum(output tokens) and energy_j / sum(prompt tokens - cached tokens), over the check's
    records."""
    output = prefilled = 0
    for record in records:
        out = metrics.output_tokens(record)
        output += out.tokens if out is not None else 0
        prompt = metrics.prompt_tokens(record)
        prefilled += max(0, (prompt or 0) - (metrics.cached_tokens(record) or 0))
    energy = figure.energy_j
    return TokenEnergy(
        output,
        prefilled,
        energy / output if energy is not None and output else None,
        energy / prefilled if energy is not None and prefilled else None,
    )
