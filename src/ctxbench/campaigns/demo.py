"""The demo campaign (`campaigns/demo.toml`): SmolLM2-135M-Instruct (F16) on the embedded CPU llama-server.

The model is real, so its recall columns are real findings at 135M scale; its speeds are this
machine's CPU, not a GPU's, and the report says so. The demo is an ordinary campaign file, run by the
same code as any other: `ctxbench run examples/demo.toml` does the same.
"""

from __future__ import annotations

from pathlib import Path

from ..engines.build import LlamaCppBuild
from ..engines.models import demo_model_path
from ..errors import EngineNotReady
from .campaign_file import Campaign, load_campaign

DEMO_CAMPAIGN = Path(__file__).parent / "demo.toml"


def demo_campaign() -> Campaign:
    """The demo campaign, after checking that the engine and the model it needs are prepared."""
    if not LlamaCppBuild().is_built() or not demo_model_path().exists():
        raise EngineNotReady(
            "the demo needs the built engine and the demo model: run `ctxbench engine build llamacpp` and "
            "`ctxbench model prepare demo` (or `make demo`, which does both)."
        )
    return load_campaign(DEMO_CAMPAIGN)
