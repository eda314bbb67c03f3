"""ctxbench: does an LLM serving deployment really serve long contexts?

The public surface is re-exported here; everything else is internal and may move.
"""

__version__ = "0.1.0"

from .client.stream import Client, Timeouts
from .errors import (
    ContextLimitExceeded,
    CtxbenchError,
    EngineBuildError,
    EngineNotReady,
    ModelPrepareError,
    RequestFailed,
)
from .measure import metrics  # the formulas over records (docs/metrics.md): `from ctxbench import metrics`
from .records import Chunk, RequestError, RequestRecord, Usage

__all__ = [
    "Chunk",
    "Client",
    "ContextLimitExceeded",
    "CtxbenchError",
    "EngineBuildError",
    "EngineNotReady",
    "ModelPrepareError",
    "RequestError",
    "RequestFailed",
    "RequestRecord",
    "Timeouts",
    "Usage",
    "__version__",
    "metrics",
]
