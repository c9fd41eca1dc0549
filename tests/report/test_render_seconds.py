"""The report rounds seconds for reading (report/render.py format_seconds), not to 3 decimals."""

from __future__ import annotations

import pytest

from report.render import _training_tables, format_seconds


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.0412, "0.04"), (0.5, "0.50"), (3.4449, "3.4"), (57.25, "57.2"), (99.94, "99.9"), (100.4, "100"),
     (1234.567, "1,235"), (42, "42.0"), ("", ""), ("—", "—"), (None, None)],
)  # fmt: skip
def test_format_seconds(seconds, shown):
    assert format_seconds(seconds) == shown


def test_training_table_rounds_wall_time_and_tokens_per_second():
    tr = {"step": [1, 2], "loss": [3.0, 2.5], "tokens_per_s": [1000.4, 2000.9], "tokens": [64, 128],
          "end": {"wall_s": 1234.5678, "tokens_per_s": 1500.66, "sample": "x"}}  # fmt: skip
    table = _training_tables(tr)["throughput"]
    assert "<td>1,501</td><td>1,501</td><td>1,235</td><td>128</td><td>x</td>" in table
    assert "1234.568" not in table and "1,500.660" not in table
