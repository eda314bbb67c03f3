"""What every check's summary file is (`CheckFile`: each check's own model lives in its folder's `file.py`),
one pydantic model per file: its name (`FILE`), `load(run_path)` (None where the run has none) and
`save(run_path)`; and `Stats`, a figure over requests as the files keep it. Writers build the model,
readers (evidence, the reports, the page, the export) go through it; nobody indexes the JSON by hand.
The figures in them are frozen when measured (docs/results-format.md, "Derived figures"): a report reads
them back and never recomputes them (only a percentile's interval missing from a run recorded before
intervals is derived from its requests). Fields readers read are typed; the rest a check wrote stays as
written (`extra="allow"`), so files from any earlier ctxbench load. Fields that came later have defaults:
the control and the trial's `control` flag, a level's `steady`, `search`, the open loop, the intervals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from .run_dir import write_json_atomic

F = TypeVar("F", bound="CheckFile")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())


class CheckFile(_Open):
    FILE: ClassVar[str]

    @classmethod
    def path_in(cls, run_path: Path) -> Path:
        return run_path / cls.FILE

    @classmethod
    def load(cls: type[F], run_path: Path) -> F | None:
        path = cls.path_in(run_path)
        return cls.model_validate(json.loads(path.read_text())) if path.exists() else None

    def save(self, run_path: Path) -> None:
        """The fields its writer gave (a default it did not set is left out, as it would be read back)."""
        write_json_atomic(self.path_in(run_path), self.model_dump(mode="json", exclude_unset=True))


class Stats(_Open):
    """A figure over requests (`metrics.Stats`): None where no request had it; each `pNN_ci` the percentile's
    95% interval (`stats.quantile_bounds`, an end too few requests give None)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p50_ci: tuple[float | None, float | None] | None = None
    p90_ci: tuple[float | None, float | None] | None = None
    p99_ci: tuple[float | None, float | None] | None = None
