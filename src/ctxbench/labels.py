"""A request's labels as models: `RequestRecord.labels` is `{str: str}` on disk (docs/results-format.md), and
each set of labels is one model that spells its keys, writes them (`written()`) and reads them back
(`of(record)`, or `parse(labels)` where a hook is handed a record's labels). A key is read by its string only
in the module that defines its model (tests/unit/test_labels.py holds every other module to it).

`Labels` are the keys every check writes (`check`, `planned_tokens`, `warmup`; `phase` and `prompt` where the
check has them); each check's folder subclasses it in its `labels.py`. A model keeps the keys it names and
leaves out the rest (a label another layer adds: the router's `replica`, `RouterLabels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

CHECK_LABEL, PLANNED_LABEL, WARMUP_LABEL, PHASE_LABEL, PROMPT_LABEL = (
    "check",
    "planned_tokens",
    "warmup",
    "phase",
    "prompt",
)
OVER_LIMIT: Final = "over_limit"  # the capacity check's prompt over the limit, refused as it should be


def planned_of(labels: Mapping[str, str]) -> int | None:
    """The prompt tokens a request's labels say ctxbench planned (None: none planned), read alone: the
    client holds every answer to it, whatever else a library caller's labels hold."""
    planned = labels.get(PLANNED_LABEL)
    return int(planned) if planned else None


class LabelModel(BaseModel):
    """A set of labels: fields in the order they are written; None, False and "" are not written (an empty
    label is no label), True is "1", a number its `str` (a field serializer formats one otherwise)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def written(self) -> dict[str, str]:
        """The labels as a record carries them."""
        dumped = self.model_dump(exclude_none=True)
        return {key: _text(value) for key, value in dumped.items() if value is not False and value != ""}

    @classmethod
    def parse(cls, labels: Mapping[str, str]) -> Self:
        return cls.model_validate(labels)

    @classmethod
    def of(cls, record: Any) -> Self:
        """The labels of a `RequestRecord` (typed `Any`: records.py imports this module)."""
        return cls.model_validate(record.labels)

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object, info: ValidationInfo) -> object:
        """An empty label is no label where a label may be absent (records before 2026-12-07 wrote
        `planned_tokens = ""` for a prompt ctxbench did not plan)."""
        absent = info.field_name is not None and cls.model_fields[info.field_name].default is None
        return None if value == "" and absent else value


class Labels(LabelModel):
    """What every check's requests carry: the check that sent it, the prompt tokens it planned (None: a
    prompt ctxbench did not plan, a user's own), a warm-up request (left out of its level's figures), the
    check's phase and the prompt's role where it has them (the probe's phases; the capacity's
    `over_limit`)."""

    check: str = ""
    phase: str | None = None
    prompt: str | None = None
    planned_tokens: int | None = None
    warmup: bool = False


class RouterLabels(LabelModel):
    """What the replica router adds to a request's labels: the replica it chose (client/router.py)."""

    replica: int


def _text(value: object) -> str:
    return "1" if value is True else str(value)
