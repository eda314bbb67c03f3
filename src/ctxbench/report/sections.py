"""Each check's section of the run report, one per check of `checks.catalog.CHECKS`, in the catalog's
order: the check's own (`Check.section`) where its folder holds it (`own_report`), else its
entry in `SECTIONS` here (None: no section of its own; its requests are in the report's
requests table, or its results in the evidence report). tests/unit/test_check_folders.py holds the two to
cover every check once."""

from __future__ import annotations

from collections.abc import Callable

from ..checks.catalog import CHECKS
from ..render.run_read import RunRead
from .check_sections import ramp_section

Section = Callable[[RunRead], list[str]]

SECTIONS: dict[str, Section | None] = {
    "ramp": ramp_section,
}

CHECK_SECTIONS: dict[str, Section | None] = {
    check.name: check.section if check.own_report else SECTIONS[check.name] for check in CHECKS
}
