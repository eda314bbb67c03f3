"""The demo campaign: SmolLM2-135M-Instruct (F16) on the embedded CPU llama-server, all checks.

The model is real, so its recall columns are real findings at 135M scale; its speeds are this
machine's CPU, not a GPU's, and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .checks.capacity import CapacitySpec
from .checks.conversation import RampSpec
from .checks.needle import NeedleSpec
from .checks.probe import ProbeSpec
from .engines.build import LlamaCppBuild
from .engines.llamacpp import LlamaServerConfig
from .engines.models import DEMO_CONTEXT, demo_model_path
from .errors import EngineNotReady
from .results.store import RunDir
from .suite import Suite, run_suite
from .text.tokens import gguf_token_counter

DEMO_SLOTS = 2
DEPLOYMENT = "smollm2-135m-f16-llamacpp-cpu"
# Sized to finish in under four minutes on 2 CPU cores, where SmolLM2 prefills 150-450 tokens/s.
DEMO_SUITE = Suite(
    probe=ProbeSpec(document_chars=0),
    capacity=CapacitySpec(),
    needle=NeedleSpec(lengths=(1024, 2048)),
    ramp=RampSpec(start_tokens=1024, end_tokens=4096, turns=4, max_tokens=96, users=(1, 2), stagger_s=2.0),
)


def run_demo(
    results: Path,
    *,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
    resume: Path | None = None,
    force: bool = False,
) -> RunDir:
    """Start llama-server with the demo model, run every check, stop, and write the report."""
    build = LlamaCppBuild()
    model = demo_model_path()
    if not build.is_built() or not model.exists():
        raise EngineNotReady(
            "the demo needs the built engine and the demo model: run `ctxbench engine build llamacpp` and "
            "`ctxbench model prepare demo` (or `make demo`, which does both)."
        )
    config = LlamaServerConfig(
        binary=build.server, model=model, ctx_size=DEMO_CONTEXT * DEMO_SLOTS, parallel=DEMO_SLOTS,
        alias="smollm2-135m-instruct",
    )
    return run_suite(
        config, gguf_token_counter(model), DEMO_SUITE, results, deployment=DEPLOYMENT, campaign="demo",
        note="SmolLM2-135M-Instruct, real weights, F16, on this machine's CPU: speeds are not a GPU's.",
        on_status=on_status, on_request_done=on_request_done, resume=resume, force=force,
    )
