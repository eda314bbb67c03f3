"""Two answers compared token by token (`fidelity.compare`), and the rule that fails a deployment whose cache
changed an answer the engine computes identically cold (`FidelityFile.failures`, `status_of`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.checks.fidelity import FIDELITY
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.measure.fidelity import compare, smallest_margin
from ctxbench.records import TokenLogprob
from ctxbench.results.evidence import Facts, status_of
from ctxbench.store.run_dir import RunDir


def answer(*tokens: tuple[int, float, float]) -> list[TokenLogprob]:
    """(id, chosen logprob, runner-up logprob) per position; the runner-up is token id + 1000."""
    return [
        TokenLogprob(
            token=f"t{i}", id=i, logprob=lp, top=((f"t{i}", i, lp), (f"t{i + 1000}", i + 1000, second))
        )
        for i, lp, second in tokens
    ]


COLD = answer((1, -0.5, -2.0), (2, -0.7, -0.75), (3, -0.2, -3.0))


def test_the_same_answer_bit_for_bit_is_bitwise_identical() -> None:
    found = compare(COLD, list(COLD), tolerance=0.1)
    assert found.bitwise and found.verdict == "bitwise identical" and found.first_divergence is None
    assert found.identical_fraction == 1.0 and found.max_logprob_diff == 0.0 and found.top_overlap == 1.0


def test_a_small_drift_is_within_the_tolerance_and_a_large_one_is_not() -> None:
    small = compare(COLD, answer((1, -0.501, -2.0), (2, -0.7, -0.75), (3, -0.2, -3.0)), tolerance=0.1)
    assert small.verdict == "same tokens, within tolerance" and small.holds
    assert small.max_logprob_diff == pytest.approx(0.001)
    large = compare(COLD, answer((1, -0.9, -2.0), (2, -0.7, -0.75), (3, -0.2, -3.0)), tolerance=0.1)
    assert large.verdict == "drifted" and not large.holds
    assert large.text() == "drifted: logprob drift up to 0.4 (over the tolerance 0.1)"


def test_a_drift_before_a_divergence_is_the_drift() -> None:
    shifted = answer((1, -0.9, -2.0), (99, -0.7, -0.75))
    found = compare(COLD, shifted, tolerance=0.1)
    assert (found.verdict, found.first_divergence) == (
        "drifted",
        1,
    ) and "then diverged at token 1" in found.text()


def test_a_token_the_cold_answer_never_ranked_is_a_divergence_at_its_position() -> None:
    altered = [COLD[0], TokenLogprob(token="zz", id=77, logprob=-0.1), COLD[2]]
    found = compare(COLD, altered, tolerance=0.1)
    assert (found.verdict, found.first_divergence, found.text()) == ("diverged", 1, "diverged at token 1")
    assert not found.holds and found.identical_fraction == pytest.approx(2 / 3)


def test_the_cold_runner_up_within_the_tolerance_is_a_near_tie_not_a_cache_fault() -> None:
    # Position 1: the cold answer chose t2 at -0.7 over t1002 at -0.75; taking t1002 is numerics at a tie.
    flipped = [COLD[0], TokenLogprob(token="t1002", id=1002, logprob=-0.69), COLD[2]]
    found = compare(COLD, flipped, tolerance=0.1)
    assert found.verdict == "diverged at a near tie" and found.holds and found.tie_gap == pytest.approx(0.05)
    assert compare(COLD, flipped, tolerance=0.01).verdict == "diverged"
    # The token taken, but with a log-probability the cold answer did not give it: not numerics at a tie.
    off = [COLD[0], TokenLogprob(token="t1002", id=1002, logprob=-1.25), COLD[2]]
    assert compare(COLD, off, tolerance=0.1).verdict == "diverged"


def test_an_answer_cut_short_diverges_where_it_ends() -> None:
    assert compare(COLD, COLD[:2], tolerance=0.1).first_divergence == 2


def test_the_smallest_margin_is_the_closest_call() -> None:
    assert smallest_margin(COLD) == pytest.approx(0.05)


def fidelity(cold: str, warm: str) -> FidelityFile:
    def path(name: str, verdict: str) -> dict[str, object]:
        return {
            "path": name,
            "request_id": name,
            "reference_id": "cold-1",
            "cached_tokens": 500,
            "prompt_tokens": 512,
            "verdict": verdict,
            "bitwise": verdict == "bitwise identical",
            "text": verdict,
        }

    paths = [path("cold", cold), path("warm", warm), path("load", "diverged")]
    return FidelityFile.model_validate(
        {"spec": {}, "lengths": [{"length": 512, "smallest_margin": 0.1, "paths": paths}]}
    )


def judged(data: FidelityFile, tmp_path: Path, random_weights: bool) -> tuple[str, tuple[str, ...]]:
    """The status a run with this fidelity.json gets from the check's own judgement (`Check.judge`)."""
    run = RunDir.create(tmp_path, f"r-{random_weights}")
    data.save(run.path)
    judgement = FIDELITY.judge(run, random_weights)
    return status_of(Facts(judgements=[judgement]), random_weights=random_weights)


def test_a_cached_path_that_diverged_fails_the_deployment_where_cold_is_deterministic(tmp_path: Path) -> None:
    data = fidelity("bitwise identical", "diverged")
    assert data.failures() == ["warm at 512 tokens: diverged"]  # the load path is batching, reported apart
    status, reasons = judged(data, tmp_path, random_weights=False)
    assert status == "failed" and reasons[0].startswith("the cache changed the answer: warm at 512 tokens")
    # Random weights: nearly flat answers, where numerics flip tokens (an H100 at 256K and 1M): reported, no
    # verdict on the cache.
    status, reasons = judged(data, tmp_path, random_weights=True)
    assert status == "provisional" and reasons[0].startswith(
        "the cache did not give the cold answer: warm at 512"
    )


def test_where_cold_is_not_deterministic_the_comparisons_are_no_verdict(tmp_path: Path) -> None:
    data = fidelity("same tokens, within tolerance", "diverged")
    assert data.failures() == [] and data.cold_noise() == ["512 tokens: same tokens, within tolerance"]
    status, reasons = judged(data, tmp_path, random_weights=False)
    assert status == "provisional" and any(r.startswith("not deterministic cold at 512") for r in reasons)
