"""Every public plot function and ``save`` document themselves in numpydoc, with examples that run.

The form check is :func:`test_public_docstrings.check_numpydoc_form` (a one-line summary, Parameters listing
the signature in order, Returns, Examples). Each plot's example draws into a figure of its own
(``fig, ax = plt.subplots()`` or ``fig, axes = ...``) and shows something checkable: a number of points or bars,
a title, a label. The examples may use ``REFERENCE`` (texture-vs-shape's published raw data),
``MODEL_VS_HUMAN`` (model-vs-human's raw data), ``SUBSET`` (two real stimuli per category; the example loads a
model, so its test is ``slow``) and ``FOLDER`` (an empty temporary folder).
"""

from __future__ import annotations

import doctest
import inspect
import io
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

import modelval.figures
from test_public_docstrings import NUMBER, check_numpydoc_form

EXAMPLE_FOLDERS = {
    "REFERENCE": "modelval_reference_dir",
    "MODEL_VS_HUMAN": "model_vs_human_raw_data",
    "SUBSET": "stimulus_subset",
    "FOLDER": "tmp_path",
}
DOCUMENTED = sorted(name for name in modelval.figures.__all__ if name.startswith("plot_") or name == "save")


def _params() -> list[Any]:
    params = []
    for name in DOCUMENTED:
        slow = "SUBSET" in (getattr(modelval.figures, name).__doc__ or "")
        params.append(pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else []))
    return params


@pytest.mark.parametrize("name", DOCUMENTED)
def test_numpydoc_form(name):
    check_numpydoc_form(getattr(modelval.figures, name))


@pytest.mark.parametrize("name", _params())
def test_examples_run_draw_into_a_new_figure_and_show_something(name, request):
    function = getattr(modelval.figures, name)
    doc = inspect.getdoc(function) or ""
    globs: dict[str, Any] = {}
    for folder, fixture in EXAMPLE_FOLDERS.items():
        if re.search(rf"\b{folder}\b", doc):
            value = request.getfixturevalue(fixture)
            if folder == "SUBSET":
                value = value(2)
            elif folder == "FOLDER":
                value = Path(value) / "folder"
                value.mkdir()
            globs[folder] = value
    tests = doctest.DocTestFinder(recurse=False).find(function, globs=globs)
    examples = [example for test in tests for example in test.examples]
    sources = "".join(example.source for example in examples)
    assert "plt.subplots(" in sources, "the example draws into a figure of its own"
    before = set(plt.get_fignums())
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.summarize(verbose=False).failed == 0, report.getvalue()[-4000:]
    assert set(plt.get_fignums()) == before, "the example closes its figure"
    shown = [example.want for example in examples if example.exc_msg is None and example.want.strip()]
    assert any(NUMBER.search(want) or "'" in want for want in shown), "no example shows a number or a text"
