"""The llama-server launcher and the tiny model against the real binary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from tokenizers import Tokenizer

from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import TinyModel, tiny_model
from ctxbench.errors import EngineNotReady
from ctxbench.text.corpus import ProseGenerator

from .conftest import TINY_SLOT_CONTEXT


def test_server_reports_per_slot_context_version_and_metrics(
    tiny_server: LlamaServer, llama_build: LlamaCppBuild
) -> None:
    assert tiny_server.slot_context_limit() == TINY_SLOT_CONTEXT
    # the llama.cpp release the sdist vendors, not the b0-unknown a build without git history reports
    built = json.loads((llama_build.root / "build.json").read_text())
    assert tiny_server.version() == built["build_info"] == "b11312-0c1e57098"
    assert tiny_server.ready_s is not None and tiny_server.ready_s > 0
    samples = tiny_server.metrics()
    assert "llamacpp:prompt_tokens_total" in samples and "llamacpp:requests_processing" in samples
    assert tiny_server.command[0].endswith("llama-server") and "--metrics" in tiny_server.command


def test_stop_ends_the_whole_process_group(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path: Path
) -> None:
    config = LlamaServerConfig(binary=llama_build.server, model=tiny.gguf, ctx_size=512)
    server = LlamaServer(config, tmp_path / "server.log").start()
    process = server._process
    assert process is not None
    server.stop()
    assert process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.base_url}/health")
    server.stop()  # a second stop is harmless


def test_engine_that_exits_during_startup_reports_its_log_tail(
    llama_build: LlamaCppBuild, tmp_path: Path
) -> None:
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"this is not a gguf file")
    config = LlamaServerConfig(binary=llama_build.server, model=not_a_model, ready_timeout_s=60)
    with pytest.raises(EngineNotReady) as raised:
        LlamaServer(config, tmp_path / "server.log").start()
    message = str(raised.value)
    assert "exited with code" in message and "broken.gguf" in message


def test_port_in_use_is_a_clear_error(
    llama_build: LlamaCppBuild, tiny: TinyModel, tiny_server: LlamaServer, tmp_path: Path
) -> None:
    config = LlamaServerConfig(
        binary=llama_build.server, model=tiny.gguf, ctx_size=512, port=tiny_server.port
    )
    with pytest.raises(EngineNotReady) as raised:
        LlamaServer(config, tmp_path / "server.log").start()
    assert "already in use" in str(raised.value)


def test_tiny_model_is_deterministic(tmp_path: Path) -> None:
    a = tiny_model(tmp_path / "a")
    b = tiny_model(tmp_path / "b")
    assert a.gguf.read_bytes() == b.gguf.read_bytes()
    assert (a.tokenizer_dir / "tokenizer.json").read_text() == (
        b.tokenizer_dir / "tokenizer.json"
    ).read_text()


def test_tiny_tokenizer_counts_like_the_server(tiny_server: LlamaServer, tiny: TinyModel) -> None:
    tokenizer = Tokenizer.from_file(str(tiny.tokenizer_dir / "tokenizer.json"))
    text = ProseGenerator("count-me").text(5000)
    server_ids = httpx.post(f"{tiny_server.base_url}/tokenize", json={"content": text}).json()["tokens"]
    assert tokenizer.encode(text).ids == server_ids
