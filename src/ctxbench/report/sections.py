"""Each check's section of the run report, one entry per check of `checks.catalog.CHECKS` (None: the check
has no section of its own; its requests are in the report's requests table, or its results in the evidence
report). The run report writes them in the catalog's order; a new check adds its entry here."""

from __future__ import annotations

from collections.abc import Callable

from ..render.run_read import RunRead
from .check_sections import capacity_section, ramp_section, throughput_section, trace_section
from .fidelity_section import fidelity_section
from .needle_section import needle_section
from .returning import returning_section
from .sessions_section import sessions_section

Section = Callable[[RunRead], list[str]]

CHECK_SECTIONS: dict[str, Section | None] = {
    "probe": None,  # a handful of requests: the requests table shows each
    "capacity": capacity_section,
    "needle": needle_section,
    "ramp": ramp_section,
    "quality": None,  # a campaign-level table (quality.jsonl): the evidence report's column
    "throughput": throughput_section,
    "trace": trace_section,
    "returning": returning_section,
    "sessions": sessions_section,
    "fidelity": fidelity_section,
}
