"""What the front door says about a user's files names the real problem (issue 42, a newcomer's first hour)."""

from __future__ import annotations

import pytest

import modelval
from modelval.errors import DataError


@pytest.mark.parametrize("parse", [None, "vqa", "caption-judge"])
def test_a_missing_decision_file_is_said_to_be_missing(tmp_path, parse):
    """With --parse it was called "a decision file in the raw-data format" instead."""
    with pytest.raises(DataError) as raised:
        modelval.shape_bias_of_decisions(tmp_path / "missing.csv", parse=parse)
    assert str(raised.value) == f"decision file not found: {tmp_path / 'missing.csv'}"
