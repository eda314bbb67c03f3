"""The run directory's own files: the manifest as a typed model that every reader loads through
(`Manifest.load`, `RunDir.manifest()`), and the human-readable needle log's name. Each check's summary file
(capacity.json, needle.json, throughput.json, ...) is a model in its check's folder (`checks/<name>/file.py`),
built on `check_files.CheckFile`.

The manifest's fields that reports, evidence, calibration and exports read are typed here; the rest (what a
run recorded for people: versions, seeds, the event loop, telemetry settings, the campaign's own extras) stay
as written (`extra="allow"`), so a manifest from any earlier ctxbench loads. Writers still write a plain dict
(`RunDir.write_manifest`): the model describes what readers may rely on, with its defaults for what older runs
lack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import CalibrationError
from ..plan import DenseShape

MANIFEST_FILE = "manifest.json"
NIAH_LOG = "niah.log"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())


class Attempt(_Open):
    attempt: int
    started_at: str | None = None
    clock: dict[str, Any] | None = None  # perf_counter_ns and unix_ns read together, and the arrivals' clock
    force: bool = False


class Failure(_Open):
    """Why the deployment failed: the error (with the engine's log tail), when, and the check it died in."""

    error: str = ""
    at: str | None = None
    during: str | None = None


class EngineEntry(_Open):
    """What ran (`Running.describe`): the engine's kind (`engines.kinds`), title, version, exact commands."""

    kind: str | None = None
    name: str | None = None
    version: str | None = None
    served_name: str | None = None
    replicas: int = 1
    command: list[str] | None = None
    env: dict[str, str] | None = None
    replica_gpus: list[list[int]] | None = None
    cold_start_s: float | None = None
    context_limit_per_slot: int | None = None


class Manifest(_Open):
    """A run's manifest: what ran, with what, when and how it ended. The suite and the ad-hoc commands build
    it and save it through this model (`RunDir.write_manifest`); readers load it through it."""

    manifest_version: int | None = None  # None: written before manifests were versioned
    ctxbench_version: str | None = None
    git_revision: str | None = None
    deployment: str | None = None
    campaign: str | None = None
    model: str | None = None
    tokenizer: str | None = None
    started_at: str | None = None
    ended_at: str | None = None  # None: the run has not ended (or was killed before it could say)
    note: str = ""
    checks: list[str] = []
    check: str | None = None  # an ad-hoc command's one check (`ctxbench needle`, ...); `checks` is then empty
    check_parameters: dict[str, Any] = {}
    attempts: list[Attempt] = []
    failed: Failure | None = None
    gpus: int = 0
    random_weights: bool = False
    engine: EngineEntry = EngineEntry()
    chat_template: dict[str, Any] | None = None
    model_shape: dict[str, Any] | None = None
    price_per_gpu_hour: float | None = None  # the campaign's price, where it set one
    campaign_file_deployment: dict[str, Any] | None = None  # its table as the campaign file gave it
    url: str | None = None  # an ad-hoc command's server
    seed_scope: list[str] = []  # what every prompt's seed is drawn from (the attempt's documents)
    repeat: int = 1
    gpu_telemetry: dict[str, Any] | None = None  # its file and sampling interval
    event_loop: str | None = None  # uvloop or asyncio

    @classmethod
    def load(cls, run_path: Path) -> Manifest:
        return cls.model_validate(json.loads((run_path / MANIFEST_FILE).read_text()))

    def dense_shape(self) -> DenseShape:
        """The model's shape as the run recorded it (a GGUF's), for the planner; a CalibrationError naming
        what to give where the run has none."""
        shape = self.model_shape
        if shape is None:
            raise CalibrationError(
                "the run's manifest.json has no model_shape (runs of ctxbench before this planner "
                "calibration, or a model that is not a GGUF); give the model's config.json with --config"
            )
        try:
            return DenseShape(
                n_layer=int(shape["n_layer"]),
                n_embd=int(shape["n_embd"]),
                n_head=int(shape["n_head"]),
                n_head_kv=int(shape["n_head_kv"]),
                head_dim=int(shape["head_dim"]),
                n_ff=int(shape["n_ff"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(
                f"the run's model_shape lacks {exc} (not a dense llama-style model?); give the "
                "model's config.json with --config"
            ) from None
