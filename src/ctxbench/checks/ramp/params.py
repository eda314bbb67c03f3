"""The ramp's parameters (`[checks.ramp]`, the flags of `ctxbench ramp`): conversations growing from `start`
to `end` tokens over `turns`, per users setting, the task a turn asks and its knobs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ...config.param_types import Strict, Tokens
from ...text.tasks import RAMP_TASKS, TaskName, task_named


class RampParams(Strict):
    """Conversations growing from `start` to `end` tokens over `turns` (geometric or linear), per users."""

    start: Tokens = Field(32 * 1024, description="Context of the first turn (8K, 32K...).")
    end: Tokens = Field(1024 * 1024, description="Context of the last turn.")
    turns: int = Field(10, ge=1, le=1000, description="Number of turns.")
    schedule: Literal["geometric", "linear"] = Field("geometric", description="geometric or linear.")
    max_tokens: int = Field(
        256, ge=1, le=65536, description="Output budget per reply (fact, then a summary)."
    )
    users: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default=[1, 2],
        min_length=1,
        max_length=16,
        description="Users settings to run in turn, e.g. 1,2 or 1,2,4.",
    )
    task: TaskName = Field(
        "single", description=f"What each turn asks back: {', '.join(RAMP_TASKS)} (text/tasks.py)."
    )
    distractors: int = Field(
        3, ge=1, le=64, description="multi_key: facts of the same form beside the one asked."
    )
    stagger_s: float = Field(
        5.0,
        ge=0.0,
        le=3600.0,
        description="Seconds between users' starts.",
        json_schema_extra={"flag": "--stagger"},
    )
    on_failure: Literal["stop", "continue"] = Field(
        "stop", description="After a failed turn a user: stop or continue."
    )
    # every reply writes max_tokens (random weights stop anywhere): decode rates compare
    ignore_eos: bool = False

    @field_validator("task")
    @classmethod
    def _one_question_a_turn(cls, value: TaskName) -> TaskName:
        if not task_named(value).in_ramp:  # a turn asks one question about one fact
            raise ValueError(f"the ramp asks one question a turn: {', '.join(RAMP_TASKS)}, not {value}")
        return value

    @model_validator(mode="after")
    def _end_after_start(self) -> RampParams:
        if self.end < self.start:
            raise ValueError(f"end ({self.end}) is shorter than start ({self.start}); a ramp grows")
        return self
