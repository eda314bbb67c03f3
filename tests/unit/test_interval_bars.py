"""The page's many-users figures draw each percentile's recorded 95% interval as error bars (an end too few
requests give is drawn as none), and nothing for figures recorded before intervals were."""

from __future__ import annotations

import pytest

from ctxbench.render.figure_layout import interval_bars


def test_a_percentiles_interval_becomes_its_error_bars() -> None:
    bars = interval_bars([(1.0, (0.8, 1.5)), (2.0, (1.9, None)), (None, None)])
    assert bars["error_y"]["array"] == [0.5, None, None]
    low = bars["error_y"]["arrayminus"]
    assert low[:2] == [pytest.approx(0.2), pytest.approx(0.1)] and low[2] is None
    assert bars["error_y"]["symmetric"] is False
    assert interval_bars([(1.0, None), (2.0, None)]) == {}  # recorded before intervals: no bars
