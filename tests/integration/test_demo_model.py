"""One smoke test with the real SmolLM2-135M-Instruct demo model (F16) on llama-server."""

from __future__ import annotations

from ctxbench.client.stream import Client
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.measure import metrics


async def test_smollm2_answers_a_plain_question(demo_server: LlamaServer) -> None:
    async with Client(demo_server.base_url, "smollm2") as client:
        record = await client.chat(
            [{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=32,
            extra_body={"temperature": 0.0},
        )
    assert record.ok, record.error
    assert "paris" in record.text.lower(), record.text
    assert demo_server.slot_context_limit() == 8192
    assert metrics.ttft_s(record) is not None and metrics.output_tokens(record) is not None
