"""Campaign files: what loads, and errors that name the file, the line, the key and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.errors import CampaignFileError

GOOD = """
[campaign]
name = "node-a"
price_per_gpu_hour = 2.5

[checks.capacity]

[checks.ramp]
start = "8K"
end = "1M"
users = [1, 2, 4]

[[deployments]]
name = "qwen-tp4"
engine = "vllm"
model = "{model}"
gpus = [0, 1, 2, 3]
args = ["--max-model-len", "1048576"]
compile_cache = "/tmp/vllm-cache"

[[deployments]]
name = "qwen-replicas"
engine = "vllm"
model = "{model}"
gpus = [4, 5, 6, 7]
replicas = 4
[deployments.checks.ramp]
end = "256K"
[deployments.checks]
capacity = false

[[deployments]]
name = "already-up"
engine = "external"
urls = ["http://127.0.0.1:8000"]
api_key_env = "MY_KEY"

[[compare]]
a = "qwen-tp4"
b = "qwen-replicas"
question = "one split copy or four replicas?"
"""


def write(tmp_path: Path, text: str) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    path = tmp_path / "campaign.toml"
    path.write_text(text.replace("{model}", str(model)))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(CampaignFileError) as raised:
        load_campaign(write(tmp_path, text))
    return str(raised.value)


def test_a_campaign_loads_with_token_sizes_overrides_and_replica_gpus(tmp_path: Path) -> None:
    campaign = load_campaign(write(tmp_path, GOOD))
    tp4, replicas, external = campaign.deployments
    assert campaign.checks.ramp is not None and campaign.checks.ramp.start == 8192
    assert campaign.checks.ramp.end == 1048576
    assert tp4.replica_gpus() == [[0, 1, 2, 3]]
    assert replicas.replica_gpus() == [[4], [5], [6], [7]]
    merged = campaign.checks_for(replicas)
    assert merged.capacity is None and merged.ramp is not None
    assert merged.ramp.end == 256 * 1024 and merged.ramp.users == [
        1,
        2,
        4,
    ]  # the rest comes from the campaign
    assert campaign.checks_for(tp4).capacity is not None
    assert external.served == "already-up"
    assert [d.name for d in campaign.select(["qwen-replicas"])] == ["qwen-replicas"]


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, '[campaign]\nname = "x"\n\n[[deployments]\nname = "y"\n')
    assert "campaign.toml" in message and "line 4" in message and "not valid TOML" in message


def test_unknown_engine_names_the_deployment_line_and_the_choices(tmp_path: Path) -> None:
    text = GOOD.replace('name = "qwen-replicas"\nengine = "vllm"', 'name = "qwen-replicas"\nengine = "vlm"')
    message = error_of(tmp_path, text)
    assert "deployments[1].engine" in message and "unknown engine 'vlm'" in message
    assert "llamacpp, vllm, sglang, external" in message
    line = int(message.split("campaign.toml:")[1].split(":")[0])
    assert write(tmp_path, text).read_text().splitlines()[line - 1].strip() == 'engine = "vlm"'


def test_missing_model_path_says_ctxbench_never_downloads(tmp_path: Path) -> None:
    text = GOOD.replace(
        'model = "{model}"\ngpus = [0, 1, 2, 3]', 'model = "/nowhere/Qwen3"\ngpus = [0, 1, 2, 3]'
    )
    message = error_of(tmp_path, text)
    assert "deployments[0].model" in message and "/nowhere/Qwen3" in message and "never downloads" in message


def test_a_trace_file_that_is_not_there_is_named_with_its_line(tmp_path: Path) -> None:
    text = GOOD.replace(
        "[checks.capacity]\n", '[checks.capacity]\n\n[checks.trace]\nfile = "/nowhere/trace.jsonl"\n'
    )
    message = error_of(tmp_path, text)
    assert "campaign.toml:9: checks.trace.file" in message and "/nowhere/trace.jsonl" in message
    assert "sample-trace" not in message and "examples/mooncake-sample.jsonl" in message


def test_open_loop_rates_are_checked_by_the_schema(tmp_path: Path) -> None:
    text = GOOD.replace(
        "[checks.capacity]\n", "[checks.capacity]\n\n[checks.throughput]\nlevels = []\nrates = [0]\n"
    )
    assert "checks.throughput.rates[0]" in error_of(tmp_path, text)


def test_wrong_types_and_absurd_sizes_are_refused_with_their_key(tmp_path: Path) -> None:
    assert "campaign.price_per_gpu_hour" in error_of(tmp_path, GOOD.replace("2.5", '"cheap"'))
    message = error_of(tmp_path, GOOD.replace('end = "1M"', 'end = "1000M"'))
    assert "checks.ramp.end" in message and "16777216" in message
    message = error_of(tmp_path, GOOD.replace("users = [1, 2, 4]", "users = [1, 2, 100000]"))
    assert "checks.ramp.users" in message
    message = error_of(tmp_path, GOOD.replace('end = "1M"', 'end = "4K"'))
    assert "shorter than start" in message
    message = error_of(
        tmp_path, GOOD.replace("[checks.ramp]", "[checks.throughput]\nclient_processes = 0\n\n[checks.ramp]")
    )
    assert "checks.throughput.client_processes" in message and "1" in message


def test_names_with_path_separators_or_dots_are_refused(tmp_path: Path) -> None:
    for bad in ("../../etc", "a/b", "..hidden"):
        message = error_of(tmp_path, GOOD.replace('name = "qwen-tp4"', f'name = "{bad}"'))
        assert "deployments[0].name" in message and "directory name" in message


def test_unknown_keys_and_checks_are_named(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("compile_cache =", "compile_cahce ="))
    assert "compile_cahce" in message and "unknown key" in message
    message = error_of(tmp_path, GOOD.replace("[deployments.checks.ramp]", "[deployments.checks.rampp]"))
    assert "unknown check 'rampp'" in message
    message = error_of(
        tmp_path,
        GOOD.replace('[deployments.checks.ramp]\nend = "256K"', '[deployments.checks.ramp]\nturns = "many"'),
    )
    assert "deployments[1].checks.ramp.turns" in message


def test_gpus_that_do_not_split_into_replicas_and_unknown_comparisons(tmp_path: Path) -> None:
    assert "split evenly" in error_of(tmp_path, GOOD.replace("replicas = 4", "replicas = 3"))
    assert "not a deployment" in error_of(tmp_path, GOOD.replace('b = "qwen-replicas"', 'b = "nope"'))
    twice = error_of(tmp_path, GOOD.replace('name = "qwen-replicas"', 'name = "qwen-tp4"'))
    first = GOOD.splitlines().index('name = "qwen-tp4"') + 1  # (GOOD starts with a newline: lines as written)
    second = GOOD.splitlines().index('name = "qwen-replicas"') + 1
    where = f"campaign.toml:{second}: deployments[1].name:"
    assert f"{where} 'qwen-tp4' is already the name of deployments[0] (line {first})" in twice, twice


def test_a_misspelt_table_is_named_with_the_key_it_meant(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("[campaign]", "[campaing]"))
    assert "unknown key 'campaing'; did you mean 'campaign'?" in message, message
    assert ":2: campaing:" in message  # its line


def test_unreadable_file_and_unknown_deployment_flag(tmp_path: Path) -> None:
    with pytest.raises(CampaignFileError, match="cannot read"):
        load_campaign(tmp_path / "absent.toml")
    campaign = load_campaign(write(tmp_path, GOOD))
    with pytest.raises(CampaignFileError, match="did you mean 'qwen-replicas'"):
        campaign.select(["replicas"])


def test_gpu_index_not_present_is_named(tmp_path: Path) -> None:
    from ctxbench.campaigns.preflight import check_gpus

    campaign = load_campaign(write(tmp_path, GOOD))
    with pytest.raises(CampaignFileError, match=r"deployments\[1\].gpus .*GPU 4 is not present.*4 GPU"):
        check_gpus(campaign, list(campaign.deployments), 4)
    with pytest.raises(CampaignFileError, match="no NVIDIA GPU"):
        check_gpus(campaign, list(campaign.deployments), 0)
    check_gpus(campaign, list(campaign.deployments), 8)


def test_the_shipped_examples_load(tmp_path: Path) -> None:
    root = Path(__file__).parents[2] / "examples"
    for path in sorted(root.glob("*.toml")):
        campaign = load_campaign(path, check_paths=False)
        assert campaign.deployments, path


SHAPED = """
[campaign]
name = "one-million"

[checks.needle]
lengths = ["256K", "1M"]
depths_at = { "1M" = [0.5] }

[[deployments]]
name = "random"
engine = "llamacpp"
model = "ctxbench:tiny"
tiny_model = { n_layer = 4, n_embd = 1024, n_head = 16, n_head_kv = 4, context_length = "2M" }
"""


def test_a_tiny_model_shape_and_depths_for_one_length_load_and_reach_the_specs(tmp_path: Path) -> None:
    from ctxbench.engines.deployment import plan_deployment
    from ctxbench.engines.models import TinyModelSpec, tiny_model_dir

    campaign = load_campaign(write(tmp_path, SHAPED))
    (deployment,) = campaign.deployments
    needle = campaign.checks_for(deployment).needle
    assert (
        needle is not None
        and needle.depths_for(1 << 20) == (0.5,)
        and needle.depths_for(1 << 18) == (0.1, 0.5, 0.9)
    )
    assert needle.trial_count() == 3 + 4  # the 1K control at each depth, then the grid
    spec = TinyModelSpec(n_layer=4, n_embd=1024, n_head=16, n_head_kv=4, context_length=1 << 21)
    assert plan_deployment(deployment, resolve=False).model == str(tiny_model_dir(spec) / "tiny-llama.gguf")


def test_the_shipped_gpu_campaigns_load() -> None:
    root = Path(__file__).parents[2] / "docs" / "gpu-validation"
    for path in sorted(root.glob("*/campaign*.toml")):
        assert load_campaign(path, check_paths=False).deployments, path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('depths_at = { "1M" = [0.5] }', "depths_at names '1M', which is not one of lengths"),
        ('depths_at = { "2K" = [] }', "depths_at['2K'] is empty"),
        ('depths_at = { "lots" = [0.5] }', "'lots' is not a token count"),
    ],
)
def test_depths_for_a_length_must_name_a_listed_length(tmp_path: Path, change: str, message: str) -> None:
    text = SHAPED.replace(
        'lengths = ["256K", "1M"]\ndepths_at = { "1M" = [0.5] }', f'lengths = ["2K"]\n{change}'
    )
    error = error_of(tmp_path, text)
    assert "checks.needle" in error and message in error, error


def test_a_tiny_model_shape_needs_the_tiny_model_and_heads_that_divide(tmp_path: Path) -> None:
    wrong_model = SHAPED.replace('model = "ctxbench:tiny"', 'model = "{model}"')
    assert 'needs model = "ctxbench:tiny"' in error_of(tmp_path, wrong_model)
    odd_heads = SHAPED.replace("n_head_kv = 4", "n_head_kv = 3")
    assert "n_head (16) must be a multiple of n_head_kv (3)" in error_of(tmp_path, odd_heads)


def test_each_file_a_check_reads_is_checked_at_its_line(tmp_path: Path) -> None:
    """`Check.local_files`: GSM8K's data may be a directory holding it (a datasets cache); a trace must be a
    file; a missing one is named at its line with what to give."""
    cache = tmp_path / "gsm8k-cache"
    cache.mkdir()
    quality = f'[checks.quality]\ndata = "{cache}"\n'
    assert load_campaign(write(tmp_path, quality + GOOD)).checks.model_dump()["quality"]["data"] == cache
    message = error_of(tmp_path, quality.replace(str(cache), str(tmp_path / "absent")) + GOOD)
    assert re.search(r"campaign.toml:2: checks.quality.data: '.*absent' does not exist\. Get GSM8K", message)
    trace = f'[checks.trace]\nfile = "{cache}"\n'
    assert re.search(
        r"campaign.toml:2: checks.trace.file: '.*gsm8k-cache' is not a file", error_of(tmp_path, trace + GOOD)
    )
