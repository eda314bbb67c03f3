"""Each engine is one `Engine` object (engines/kinds.py): every kind of deployment a campaign file can name
has one, its counters map to ctxbench's common names (the plans' use of it: test_deployments.py)."""

from __future__ import annotations

from ctxbench.config.deployments import ENGINE_TAGS
from ctxbench.engines.kinds import ENGINES, engine, find_engine
from ctxbench.engines.prom import COMMON_METRICS, COMMON_NAMES, common_metrics


def test_every_deployment_kind_of_the_campaign_file_is_one_engine() -> None:
    assert tuple(e.name for e in ENGINES) == ENGINE_TAGS
    assert [engine(name) for name in ENGINE_TAGS] == list(ENGINES)
    assert find_engine("tgi") is None and find_engine(None) is None


def test_each_engines_counter_names_are_under_a_common_name_and_none_is_lost() -> None:
    for one in ENGINES:
        assert set(one.metric_names) <= set(COMMON_NAMES), one.name
        for common, sources in one.metric_names.items():
            assert set(sources) <= set(COMMON_METRICS[common]), (one.name, common)
    # llama.cpp counts only the prompt tokens it computed: under that name, not under "every prompt token"
    samples = {"llamacpp:prompt_tokens_total": 90.0, "llamacpp:prompt_tokens_cached_total": 10.0}
    common = common_metrics(samples)
    assert common["prompt_tokens_computed"] == 90.0 and "prompt_tokens_all" not in common
    assert common["cached_tokens"] == 10.0
