"""Engine commands composed from campaign files, /metrics under common names, and replica routing."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest

from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.campaigns.preflight import dry_run
from ctxbench.client.router import Router
from ctxbench.client.stream import Client
from ctxbench.engines.deployment import plan_deployment
from ctxbench.engines.kinds import SGLANG, VLLM
from ctxbench.engines.prom import common_metrics, parse_metrics

CAMPAIGN = """
[campaign]
name = "layouts"
[checks.capacity]

[[deployments]]
name = "tp2"
engine = "vllm"
model = "/models/Qwen3"
python = "/opt/vllm/bin/python"
gpus = [2, 3]
args = ["--max-model-len", "131072", "--api-key", "sk-secret"]
compile_cache = "/var/cache/vllm"
env = { HF_TOKEN = "hf_secret", VLLM_LOGGING_LEVEL = "INFO" }

[[deployments]]
name = "sgl-replicas"
engine = "sglang"
model = "/models/Qwen3"
gpus = [0, 1, 2, 3]
replicas = 2

[[deployments]]
name = "llama"
engine = "llamacpp"
model = "/models/q.gguf"
binary = "/opt/llama-server"
ctx_size = "64K"
parallel = 2
args = ["-ngl", "99"]
gpus = [1]
read_timeout_s = 120
"""


def plans(tmp_path: Path):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN)
    campaign = load_campaign(path, check_paths=False)
    return campaign, [plan_deployment(d, resolve=False) for d in campaign.deployments]


def test_vllm_command_has_the_port_placeholder_tensor_parallel_gpus_and_compile_cache(tmp_path: Path) -> None:
    _, (vllm, _, _) = plans(tmp_path)
    (spec,) = vllm.specs
    argv = spec.argv(8123)
    assert argv[:3] == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--port") + 1] == "8123" and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--served-model-name") + 1] == "tp2"
    assert spec.env["CUDA_VISIBLE_DEVICES"] == "2,3" and spec.env["VLLM_CACHE_ROOT"] == "/var/cache/vllm"
    assert spec.ready_paths == ("/health", "/v1/models")
    assert vllm.gpu_count == 2


def test_sglang_replicas_each_get_their_own_gpus(tmp_path: Path) -> None:
    _, (_, sglang, _) = plans(tmp_path)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in sglang.specs] == ["0,1", "2,3"]
    argv = sglang.specs[0].argv(30000)
    assert argv[1:3] == ["-m", "sglang.launch_server"] and "--enable-metrics" in argv
    assert (
        argv[argv.index("--tp-size") + 1] == "2" and argv[argv.index("--model-path") + 1] == "/models/Qwen3"
    )


def test_llamacpp_command_takes_context_slots_and_extra_args(tmp_path: Path) -> None:
    _, (_, _, llama) = plans(tmp_path)
    argv = llama.specs[0].argv(9000)
    assert argv[0] == "/opt/llama-server" and argv[argv.index("--ctx-size") + 1] == "65536"
    assert argv[argv.index("--parallel") + 1] == "2" and argv[-2:] == ["-ngl", "99"]
    assert llama.specs[0].env == {"CUDA_VISIBLE_DEVICES": "1"}


def test_dry_run_prints_exact_commands_with_secrets_redacted(tmp_path: Path) -> None:
    campaign, _ = plans(tmp_path)
    text = "\n".join(dry_run(campaign, []))
    assert "--tensor-parallel-size 2" in text and "CUDA_VISIBLE_DEVICES=2,3" in text
    assert "sk-secret" not in text and "hf_secret" not in text and "<redacted>" in text
    assert "(MISSING on this machine)" in text  # /models/Qwen3 is not here
    assert text.count("replica 1:") == 1  # the two SGLang replicas


VLLM_METRICS = """
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 50.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 7.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 150.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 32.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 1.0
"""

SGLANG_METRICS = """
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 8.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 2.0
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="m"} 4.0
"""


def test_engine_metrics_map_to_common_names_summed_over_labels() -> None:
    vllm = common_metrics(parse_metrics(VLLM_METRICS))
    assert vllm == {
        "prompt_tokens": 150.0,
        "prompt_tokens_all": 150.0,
        "generation_tokens": 7.0,
        "prefix_cache_queries": 150.0,
        "prefix_cache_hits": 32.0,
        "kv_cache_usage": 0.25,
        "requests_waiting": 3.0,
        "preemptions": 1.0,
    }
    sglang = common_metrics(parse_metrics(SGLANG_METRICS))
    assert sglang == {
        "prompt_tokens": 8.0,
        "prompt_tokens_all": 8.0,
        "kv_cache_usage": 0.28,
        "requests_waiting": 2.0,
        "preemptions": 4.0,
    }


def _replica(name: str, seen: list[str], gate: asyncio.Event | None = None) -> Client:
    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(name)
        if gate is not None:
            await gate.wait()
        body = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return Client(f"http://{name}", "m", transport_factory=lambda: httpx.MockTransport(handler))


async def test_a_conversation_sticks_to_its_replica_and_new_ones_go_to_the_least_loaded() -> None:
    seen: list[str] = []
    gate = asyncio.Event()
    router = Router([_replica("r0", seen, gate), _replica("r1", seen, gate)])
    async with router:
        first = asyncio.create_task(router.chat([{"role": "user", "content": "a"}], conversation="alice"))
        await asyncio.sleep(0.01)
        assert router.in_flight == [1, 0]
        second = asyncio.create_task(router.chat([{"role": "user", "content": "b"}], conversation="bob"))
        await asyncio.sleep(0.01)
        assert router.in_flight == [1, 1]  # bob went to the idle replica
        gate.set()
        records = await asyncio.gather(first, second)
        assert [r.labels["replica"] for r in records] == ["0", "1"]
        for _ in range(3):  # later turns stay where their history is cached
            again = await router.chat([{"role": "user", "content": "a2"}], conversation="alice")
            assert again.labels["replica"] == "0" and again.url.startswith("http://r0")
        one_off = await router.chat([{"role": "user", "content": "c"}])
        assert one_off.labels["replica"] in ("0", "1")
    assert seen[:2] == ["r0", "r1"]


def test_plans_take_readiness_compile_cache_and_death_signal_from_the_engine(tmp_path: Path) -> None:
    _, (vllm, sglang, llama) = plans(tmp_path)
    assert vllm.specs[0].ready_paths == VLLM.ready_paths and vllm.specs[0].death_signal == signal.SIGTERM
    assert sglang.specs[0].ready_paths == SGLANG.ready_paths
    assert llama.specs[0].ready_paths == ("/health",) and llama.specs[0].death_signal == signal.SIGKILL
    assert VLLM.compile_cache_env in vllm.specs[0].env


def test_the_limit_is_the_served_model_s_where_the_server_lists_several() -> None:
    # Issue 57: a server listing m1 (8,192) and m2 (2,048), measured as m2, said "limit 8192".
    from ctxbench.engines.limits import served_entry
    from ctxbench.errors import UsageError

    models = {"data": [{"id": "m1", "max_model_len": 8192}, {"id": "m2", "max_model_len": 2048}]}
    assert served_entry(models, "m2", "u", "fix")["max_model_len"] == 2048
    assert served_entry(models, None, "u", "fix")["id"] == "m1"
    assert served_entry({"data": []}, "m2", "u", "fix") == {}
    with pytest.raises(
        UsageError, match="u lists 'm1', 'm2', not 'm3': set served_name to the model to measure"
    ):
        served_entry(models, "m3", "u", "set served_name")


def test_a_deployment_s_read_timeout_reaches_its_plan(tmp_path: Path) -> None:
    # Issue 57: no campaign key set the 1,800 s read timeout.
    _, (vllm, _, llama) = plans(tmp_path)
    assert (vllm.read_timeout_s, llama.read_timeout_s) == (1800.0, 120.0)


def test_each_launched_engine_has_its_command_and_one_without_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    import ctxbench.engines.deployment as deployment_module
    from ctxbench.engines.kinds import ENGINES, engine

    assert all((one.command is not None) == one.launched for one in ENGINES)
    campaign, _ = plans(tmp_path)
    vllm = next(d for d in campaign.deployments if d.engine == "vllm")
    # an engine that misses its command is refused, never given another engine's (SGLang's, before)
    monkeypatch.setattr(deployment_module, "engine", lambda name: replace(engine(name), command=None))
    with pytest.raises(ValueError, match="engine 'vllm' has no command"):
        plan_deployment(vllm, resolve=False)
