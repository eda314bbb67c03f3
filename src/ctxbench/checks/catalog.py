"""Every check, in the order a run runs them (`CHECKS`): a new check is its own folder and one line here. The
campaign file's `[checks.*]` tables (`Checks`) and the check names are derived from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import create_model

from .base import Check, CheckTables
from .capacity import CAPACITY
from .fidelity import FIDELITY
from .needle import NEEDLE
from .probe import PROBE
from .quality import QUALITY
from .ramp import RAMP
from .returning import RETURNING
from .sessions import SESSIONS
from .throughput import THROUGHPUT
from .trace import TRACE

CHECKS: tuple[Check[Any], ...] = (
    PROBE,
    CAPACITY,
    NEEDLE,
    RAMP,
    QUALITY,
    THROUGHPUT,
    TRACE,
    RETURNING,
    SESSIONS,
    FIDELITY,
)


CHECKS_BY_NAME: dict[str, Check[Any]] = {check.name: check for check in CHECKS}
CHECK_NAMES: tuple[str, ...] = tuple(CHECKS_BY_NAME)

if TYPE_CHECKING:
    # The type checker sees the base, whose `of(check)` is typed by the check's parameters; a field read by
    # name (`checks.ramp`) is what this model exists to avoid.
    Checks = CheckTables
else:
    Checks = create_model(
        "Checks",
        __base__=CheckTables,
        __doc__="Each check runs when its table is present; `check = false` in a deployment's overrides "
        "skips it.",
        **{check.name: (check.params_type | None, None) for check in CHECKS},
    )


def selected(checks: Checks) -> list[tuple[Check[Any], Any]]:
    """(check, its parameters) for each check the campaign has a table for, in run order."""
    return [(check, params) for check in CHECKS if (params := checks.of(check)) is not None]


def request_count(checks: Checks) -> int:
    """Requests the checks send (for progress bars)."""
    return sum(check.request_count(params) for check, params in selected(checks))


def longest_prompt(checks: Checks, limit_tokens: int) -> int:
    """Tokens in the longest prompt any check builds from the document pool (1024 where none does)."""
    lengths = [check.longest_prompt(params, limit_tokens) for check, params in selected(checks)]
    return max((n for n in lengths if n is not None), default=1024)
