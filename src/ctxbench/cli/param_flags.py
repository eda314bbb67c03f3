"""A check's flags generated from its `*Params` model, so a parameter is written once: its name, default,
range and help (the field's `description`) live in the model; a command names which fields it exposes and
receives the validated model.

    @app.command()
    @params_flags(NeedleParams, "lengths", "depths", "max_tokens", "control")
    def needle(url: UrlOption, model: ModelOption, spec: NeedleParams, force: ...) -> None: ...

The flag is the field's name with dashes (`--max-tokens`), or the field's `json_schema_extra["flag"]`
(`stagger_s` is `--stagger`). A list is one comma-separated flag; a field the model parses from text (a token
count such as `32K`) or a `Literal` is a string flag; the model checks every value, and a refusal names the
flag it came from (`_validated`)."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from .common import _listed, _validated

F = TypeVar("F", bound=Callable[..., Any])


def flag_of(name: str, field: FieldInfo) -> str:
    extra = field.json_schema_extra
    flag = extra.get("flag") if isinstance(extra, dict) else None
    return str(flag) if flag else "--" + name.replace("_", "-")


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def _as_text(field: FieldInfo) -> bool:
    """Whether the flag is given as text for the model to parse: a token count ("32K") or a choice."""
    parsed = any(isinstance(m, BeforeValidator) for m in field.metadata)
    return parsed or typing.get_origin(field.annotation) is typing.Literal


def _flag_type_and_default(field: FieldInfo) -> tuple[Any, Any]:
    default = field.get_default(call_default_factory=True)
    if _is_list(field.annotation):
        return str, ",".join(str(item) for item in default or [])
    if field.is_required():
        return field.annotation, ...
    if _as_text(field):
        return str, str(default)
    return field.annotation, default


def _option(model: type[BaseModel], name: str) -> inspect.Parameter:
    field = model.model_fields[name]
    if not field.description:
        raise TypeError(f"{model.__name__}.{name} has no description: it is the flag's help text")
    kind, default = _flag_type_and_default(field)
    # the flag's type is the model field's, read at run time: no static type to check
    annotation = Annotated[kind, typer.Option(flag_of(name, field), help=field.description)]  # type: ignore[valid-type]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def params_flags(model: type[BaseModel], *names: str) -> Callable[[F], F]:
    """Replace the command's parameter of type `model` by one flag for each named field; the command is
    called with that parameter validated by the model (the same defaults, ranges and messages as a campaign
    file)."""

    def wrap(command: F) -> F:
        hints = typing.get_type_hints(command, include_extras=True)
        signature = inspect.signature(command)
        (spec,) = [name for name in signature.parameters if hints.get(name) is model]
        own = [p.replace(annotation=hints[p.name]) for p in signature.parameters.values() if p.name != spec]
        at = list(signature.parameters).index(spec)
        generated = [_option(model, name) for name in names]
        flags = {name: flag_of(name, model.model_fields[name]) for name in names}
        lists = {name for name in names if _is_list(model.model_fields[name].annotation)}

        @functools.wraps(command)
        def with_spec(**given: Any) -> Any:
            values = {name: given.pop(name) for name in names}
            for name in lists:
                values[name] = _listed(values[name], flags[name])
            return command(**given, **{spec: _validated(model, flags, **values)})

        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at:]]
        parameters = own[:at] + generated + keyword
        # typer reads a function's __signature__, which a plain function type does not declare
        with_spec.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_spec.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
        del with_spec.__wrapped__  # typer reads the signature above, not the command's
        return typing.cast(F, with_spec)

    return wrap
