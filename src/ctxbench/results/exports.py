"""The formats `ctxbench export` writes, one `Exporter` each (docs/results-format.md, "Exports"): its name,
what it is, whether `--out` is a file or a directory, and how it writes the runs under a results directory.
The CLI's flag, its help and its error for an unknown format are all derived from `EXPORTERS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from .llmd_schema import Version

Format = Literal["summary", "llm-d-report", "mlperf-endpoints"]


@dataclass(frozen=True)
class Exporter:
    name: Format
    what: str  # for `--format`'s help
    out_is: Literal["file", "directory"]
    # (results, out, llm-d version) -> what was written, one line for the console
    write: Callable[[Path, Path, Version], str]


def _summary(results: Path, out: Path, _: Version) -> str:
    from .summary import summarize

    out.parent.mkdir(parents=True, exist_ok=True)
    summarize(results).save(out)
    return f"summary: {out}"


def _llmd(results: Path, out: Path, version: Version) -> str:
    from .llmd_report import export_llmd

    return f"llm-d report v{version}: {len(export_llmd(results, out, version))} file(s) under {out}"


def _endpoints(results: Path, out: Path, _: Version) -> str:
    from .endpoints_summary import export_endpoints

    return f"MLPerf Endpoints result_summary.json: {len(export_endpoints(results, out))} file(s) under {out}"


EXPORTERS: dict[Format, Exporter] = {
    e.name: e
    for e in (
        Exporter("summary", "ctxbench's own run summary, versioned", "file", _summary),
        Exporter(
            "llm-d-report", "llm-d-benchmark's report, a file per stage of every run", "directory", _llmd
        ),
        Exporter(
            "mlperf-endpoints",
            "MLPerf Endpoints' result_summary.json, one per many-users level and Poisson rate",
            "directory",
            _endpoints,
        ),
    )
}
FORMATS: tuple[Format, ...] = get_args(Format)


def exporter(name: str) -> Exporter | None:
    """The exporter of `--format NAME`, None for a name no exporter has."""
    return next((e for e in EXPORTERS.values() if e.name == name), None)


def writing(out_is: Literal["file", "directory"]) -> str:
    """The formats whose `--out` is a file (or a directory), for the flag's help."""
    return ", ".join(e.name for e in EXPORTERS.values() if e.out_is == out_is)
