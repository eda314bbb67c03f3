"""A check's flags are generated from its `*Params` (cli/param_flags.py): each exposed field is one flag with
the field's description as its help and the model's default, and a bad value is refused by the model, naming
the flag."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from cli_main import run_main
from pydantic import BaseModel, Field

from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.probe import ProbeParams
from ctxbench.checks.quality import QualityParams
from ctxbench.checks.ramp import RampParams
from ctxbench.cli import app
from ctxbench.cli.param_flags import flag_of, params_flags

GENERATED = {"probe": ProbeParams, "needle": NeedleParams, "ramp": RampParams, "quality": QualityParams}


def _options(name: str) -> dict[str, Any]:
    """The command's options by flag (click's Option objects: typer vendors its own click)."""
    params = typer.main.get_command(app).commands[name].params  # type: ignore[attr-defined]
    return {opt: p for p in params if p.param_type_name == "option" for opt in p.opts}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_every_exposed_field_is_one_flag_with_the_fields_help_and_default(name: str) -> None:
    model = GENERATED[name]
    options = _options(name)
    exposed = [key for key, field in model.model_fields.items() if flag_of(key, field) in options]
    assert exposed, name
    for key in exposed:
        field = model.model_fields[key]
        option = options[flag_of(key, field)]
        assert option.help == field.description
        default = field.get_default(call_default_factory=True)
        if isinstance(default, list):
            assert option.default == ",".join(str(item) for item in default)
        elif not field.is_required():
            assert str(option.default) == str(default)


def test_stagger_keeps_its_flag_and_a_value_out_of_range_is_refused_naming_it() -> None:
    assert "--stagger" in _options("ramp") and "--stagger-s" not in _options("ramp")
    ran = run_main(["ramp", "--url", "http://127.0.0.1:9", "--model", "m", "--stagger", "-1"])
    assert ran.exit_code == 2 and "--stagger" in ran.output and "greater than or equal to 0" in ran.output
    ran = run_main(["needle", "--url", "http://127.0.0.1:9", "--model", "m", "--lengths", "8K,huge"])
    assert ran.exit_code == 2 and "--lengths" in ran.output and "'huge'" in ran.output


class Bare(BaseModel):
    n: int = Field(1, ge=1)


def test_a_field_without_a_description_cannot_become_a_flag() -> None:
    def command(spec: Bare) -> None: ...

    with pytest.raises(TypeError, match=r"Bare\.n has no description"):
        params_flags(Bare, "n")(command)
