"""The needle check's parameters (`[checks.needle]`, the flags of `ctxbench needle`): lengths x depths, the
retrieval tasks and their knobs, the short-context control."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ...config.param_types import MAX_TOKENS_PER_PROMPT, Strict, Tokens, token_count
from ...text.tasks import TASKS, TaskName, curve_count, curve_depths, listed_tasks


class NeedleParams(Strict):
    """A hidden fact in a fresh document at every length x depth, for each retrieval task."""

    task: Annotated[list[TaskName], BeforeValidator(listed_tasks)] = Field(
        default=["single"],
        min_length=1,
        max_length=len(TASKS),
        description=f"Retrieval tasks: {', '.join(TASKS)} (docs/campaigns.md says what each claims).",
    )
    distractors: int = Field(
        3, ge=1, le=64, description="multi_key: facts of the same form beside the one asked."
    )
    values: int = Field(3, ge=2, le=16, description="multi_value: values of the one key, all to come back.")
    hops: int = Field(4, ge=2, le=16, description="variable_tracking: assignments in the chain asked for.")
    # Set from `depths = "curve"` or a count: the report draws recall against depth, a line per length.
    depth_curve: bool = False
    lengths: list[Tokens] = Field(
        default_factory=list, max_length=64, description="Prompt lengths: 32K,128K,1M. Default: the limit."
    )
    depths: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default=[0.1, 0.5, 0.9],
        min_length=1,
        max_length=64,
        description="Needle depths in [0, 1], or curve / curve:N (evenly spaced, drawn as a curve).",
    )
    max_tokens: int = Field(32, ge=1, le=65536, description="Output budget for each answer.")
    over_limit: bool = Field(
        False, description="Send lengths over the server's limit instead of skipping them (--force)."
    )
    # A model that fails the control fails the task, not the context (docs/validation.md).
    control: Annotated[int, BeforeValidator(token_count)] = Field(
        1024,
        ge=0,
        le=MAX_TOKENS_PER_PROMPT,
        description="The short-context control's length, asked before the grid at the same depths (0: none).",
    )
    # Depths for some lengths only, e.g. {"1M" = [0.5]}: one 1M prompt costs as much as many short ones.
    depths_at: dict[str, list[Annotated[float, Field(ge=0.0, le=1.0)]]] = Field(
        default_factory=dict, max_length=64
    )

    @model_validator(mode="before")
    @classmethod
    def _curve(cls, data: Any) -> Any:
        """`depths = "curve"`, `"curve:N"` or a count N is drawn as a curve (`_depths` makes the list)."""
        try:
            curve = isinstance(data, dict) and curve_count(data.get("depths")) is not None
        except ValueError:
            curve = False  # `_depths` says what is wrong, naming the key
        return {**data, "depth_curve": True} if curve else data

    @field_validator("depths", mode="before")
    @classmethod
    def _depths(cls, value: Any) -> Any:
        count = curve_count(value)
        return value if count is None else curve_depths(count)

    @field_validator("task")
    @classmethod
    def _tasks_once(cls, value: list[str]) -> list[str]:
        twice = sorted({t for t in value if value.count(t) > 1})
        if twice:
            raise ValueError(f"task lists {twice[0]!r} twice; list each task once")
        return value

    @field_validator("depths_at")
    @classmethod
    def _lengths_are_token_counts(cls, value: dict[str, list[float]]) -> dict[str, list[float]]:
        for key, depths in value.items():
            token_count(key)  # raises with the message naming the bad key
            if not depths:
                raise ValueError(f"depths_at[{key!r}] is empty; give at least one depth or drop the key")
        return value

    @model_validator(mode="after")
    def _depths_at_listed_lengths(self) -> NeedleParams:
        unknown = [key for key in self.depths_at if token_count(key) not in self.lengths]
        if unknown:
            raise ValueError(f"depths_at names {unknown[0]!r}, which is not one of lengths {self.lengths}")
        return self

    def depths_for(self, length: int) -> tuple[float, ...]:
        for key, depths in self.depths_at.items():
            if token_count(key) == length:
                return tuple(depths)
        return tuple(self.depths)

    def control_length(self) -> int | None:
        """The control's length, or None when there is none or the grid is no longer than it."""
        if not self.control or (self.lengths and self.control >= min(self.lengths)):
            return None
        return self.control

    def trial_count(self) -> int:
        """Requests over every task: a task asks one question per length x depth (multi_depth too: one
        document per length, a question per depth), the control first."""
        control = len(self.depths) if self.control_length() else 0
        return len(self.task) * (control + sum(len(self.depths_for(length)) for length in self.lengths))
