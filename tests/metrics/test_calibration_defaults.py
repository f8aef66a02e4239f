"""One default bin count, 15, for every ECE of the library and every command's ``--bins`` (issue 32, point 7).

The artifact ECE (``modelval.metrics.artifacts.evaluate_file``) once defaulted to 4 bins, the setting of
one set of prediction artifacts, while ``expected_calibration_error`` and the CLI said 15.
"""

from __future__ import annotations

import inspect

import pytest

import modelval.api.calibration
import modelval.metrics
import modelval.metrics.artifacts
import modelval.metrics.predictions
import modelval.metrics.recalibration
from modelval.cli import build_parser
from modelval.metrics.calibration import DEFAULT_N_BINS, expected_calibration_error

MODULES = (
    modelval.metrics,
    modelval.metrics.artifacts,
    modelval.metrics.predictions,
    modelval.metrics.recalibration,
    modelval.api.calibration,
)


def _bin_defaults() -> dict[str, object]:
    found = {}
    for module in MODULES:
        for name, function in inspect.getmembers(module, inspect.isfunction):
            parameter = inspect.signature(function).parameters.get("n_bins")
            if parameter is not None and parameter.default is not inspect.Parameter.empty:
                found[f"{function.__module__}.{name}"] = parameter.default
    return found


def test_every_function_defaults_to_15_bins():
    defaults = _bin_defaults()
    assert "modelval.metrics.artifacts.evaluate_file" in defaults and len(defaults) > 15
    assert {name: value for name, value in defaults.items() if value != DEFAULT_N_BINS} == {}
    assert DEFAULT_N_BINS == 15


@pytest.mark.parametrize(
    "command", [["calibration", "ece"], ["calibration", "reliability"], ["calibration", "card"], ["metrics"],
                ["calibration", "temperature"]], ids=" ".join,
)  # fmt: skip
def test_every_command_defaults_to_the_same_bins(command):
    parser = build_parser()
    argv = ["--val", "v.npz", "--test", "t.npz"] if command[-1] == "temperature" else ["x"]
    assert parser.parse_args([*command, *argv]).bins == DEFAULT_N_BINS


def test_the_docstring_states_the_default():
    doc = expected_calibration_error.__doc__ or ""
    assert "default 15" in doc
    conf, correct = [0.1, 0.2, 0.6, 0.7], [0, 1, 1, 0]  # 15 bins: 0.5; 4 bins: 0.25
    assert expected_calibration_error(conf, correct) == expected_calibration_error(conf, correct, 15)
    assert expected_calibration_error(conf, correct) != expected_calibration_error(conf, correct, 4)
