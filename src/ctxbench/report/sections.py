"""Each check's section of the run report (`Check.section`, from its folder), one per check of
`checks.catalog.CHECKS`, in the catalog's order."""

from __future__ import annotations

from collections.abc import Callable

from ..checks.catalog import CHECKS
from ..render.run_read import RunRead

Section = Callable[[RunRead], list[str]]

CHECK_SECTIONS: dict[str, Section] = {check.name: check.section for check in CHECKS}
