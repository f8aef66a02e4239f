"""The docstrings of the calibration door's questions about prediction files (modelval.api.calibration) and of the
metrics wing's top-level re-exports say what they compute, list every parameter, and carry an example that runs as
written."""

from __future__ import annotations

import doctest
import inspect
import re

import pytest

import modelval
from modelval.api import calibration

#: modelval.api.calibration: one function per question about a file of predictions.
FRONT_DOOR = ("ece_of_artifacts", "reliability", "recalibrate", "prediction_metrics")
#: The metrics wing's names re-exported at the top level (``modelval.expected_calibration_error``, ...).
TOP_LEVEL_METRICS = (
    "expected_calibration_error",
    "reliability_bins",
    "fit_temperature",
    "precision_recall_f1",
    "reweighted_accuracy",
)
DOCUMENTED = [getattr(calibration, name) for name in FRONT_DOOR] + [getattr(modelval, n) for n in TOP_LEVEL_METRICS]


def run_examples(function: object) -> doctest.TestResults:
    """The examples in one function's docstring, run with fresh globals (nothing of this module leaks in)."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder(recurse=False).find(function, globs={}):
        runner.run(test)
    return runner.summarize(verbose=False)


def test_the_front_doors_examples_run():
    results = [run_examples(getattr(calibration, name)) for name in FRONT_DOOR]
    assert sum(result.failed for result in results) == 0
    assert all(result.attempted >= 5 for result in results)  # several checked lines per function


@pytest.mark.parametrize("function", DOCUMENTED, ids=lambda f: f.__name__)
def test_each_example_runs_and_shows_a_number(function):
    result = run_examples(function)
    assert result.failed == 0, function.__name__
    assert result.attempted > 0, f"{function.__name__} has no example"
    outputs = [
        example.want for test in doctest.DocTestFinder(recurse=False).find(function) for example in test.examples
    ]
    assert any(re.search(r"\d\.\d", want) for want in outputs), f"{function.__name__}: no number is shown"


@pytest.mark.parametrize("function", DOCUMENTED, ids=lambda f: f.__name__)
def test_numpydoc_sections_list_every_parameter(function):
    doc = inspect.getdoc(function) or ""
    summary, _, rest = doc.partition("\n\n")
    assert summary and rest, f"{function.__name__}: a summary line, then what it computes"
    for section in ("Parameters", "Returns", "Examples"):
        assert re.search(rf"^{section}\n-{{{len(section)}}}$", doc, flags=re.M), f"{function.__name__}: {section}"
    parameters = doc.split("Parameters\n----------\n", 1)[1].split("\nReturns\n", 1)[0]
    listed = re.findall(r"^(\w+)$", parameters, flags=re.M)
    assert listed == list(inspect.signature(function).parameters), function.__name__
