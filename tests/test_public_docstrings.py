"""Every public function of ``modelval`` and ``modelval.api`` documents itself in one style, numpydoc (issue 27).

What ``help()`` and the mkdocstrings pages show: a one-line summary, what the function computes, a
``Parameters`` section listing every parameter of the signature in order, ``Returns``, and ``Examples`` that
run as written (here, as doctests) and show a number. The examples may use five folders the harness provides:
``STIMULI`` (the 1280 published cue-conflict images), ``SUBSET`` (the first two of each category, symlinked),
``REFERENCE`` (texture-vs-shape's published decision files), ``VLM_SHAPEBIAS`` (Gavrikov et al.'s published
response files, ``raw-data/``) and ``FOLDER`` (an empty temporary folder). An
example that uses ``STIMULI`` evaluates the whole set, so its test is ``slow``; the form check is always fast.
"""

from __future__ import annotations

import doctest
import inspect
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import modelval
from modelval import api

#: What the examples may use, each the name of the fixture that provides it.
EXAMPLE_FOLDERS = {
    "STIMULI": "modelval_data_root",
    "REFERENCE": "modelval_reference_dir",
    "SUBSET": "stimulus_subset",
    "FOLDER": "tmp_path",
    "VLM_SHAPEBIAS": "vlm_shapebias_dir",
}
SECTIONS = ("Parameters", "Returns", "Examples")
#: A number standing on its own in an example's output (``0.2207``, ``(162, 572)``, ``-1e-05``), not a digit
#: inside a name (``airplane1-bicycle2.png``, ``stimuli-2``).
NUMBER = re.compile(r"(?<![\w.\-/])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w/])")


def public_functions() -> list[tuple[str, Callable[..., Any]]]:
    """``(public name, function)`` of every function in ``modelval.__all__`` and ``modelval.api.__all__``, each
    once (a front-door function re-exported at the top level goes by its top-level name)."""
    found: dict[int, tuple[str, Callable[..., Any]]] = {}
    for module in (modelval, api):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                found.setdefault(id(value), (f"{module.__name__}.{name}", value))
    return sorted(found.values(), key=lambda item: item[0])


FUNCTIONS = public_functions()


def _params(slow_when_it_uses_stimuli: bool) -> list[Any]:
    params = []
    for name, function in FUNCTIONS:
        marks = []
        if slow_when_it_uses_stimuli and "STIMULI" in (function.__doc__ or ""):
            marks.append(pytest.mark.slow)
        params.append(pytest.param(function, id=name, marks=marks))
    return params


def signature_names(function: Callable[..., Any]) -> list[str]:
    """The parameters as a docstring lists them: ``*args`` and ``**settings`` keep their stars."""
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return [stars.get(p.kind, "") + p.name for p in inspect.signature(function).parameters.values()]


def section(doc: str, title: str) -> str:
    """The text of one numpydoc section (up to the next ``Title\\n-----`` heading)."""
    body = re.split(rf"^{title}\n-{{{len(title)}}}\n", doc, maxsplit=1, flags=re.M)[1]
    return re.split(r"^\S[^\n]*\n-{3,}$", body, maxsplit=1, flags=re.M)[0]


def listed_parameters(doc: str) -> list[str]:
    """The names under ``Parameters``: each unindented line, ``name`` or ``name : type``."""
    return re.findall(r"^(\*{0,2}\w+)(?: : .*)?$", section(doc, "Parameters"), flags=re.M)


def check_numpydoc_form(function: Callable[..., Any]) -> None:
    """A one-line summary, the sections, and under Parameters the signature's parameters in order."""
    doc = inspect.getdoc(function) or ""
    lines = doc.splitlines()
    assert lines and lines[0].strip(), "no summary line"
    assert len(lines) == 1 or not lines[1].strip(), f"the summary is more than one line: {lines[:2]}"
    missing = [title for title in SECTIONS if not re.search(rf"^{title}\n-{{{len(title)}}}$", doc, flags=re.M)]
    assert not missing, f"no numpydoc section {', '.join(missing)} (a title underlined with dashes)"
    listed, names = listed_parameters(doc), signature_names(function)
    assert listed == names, f"Parameters lists {listed}; the signature has {names}, in this order"


@pytest.mark.parametrize("function", _params(slow_when_it_uses_stimuli=False))
def test_numpydoc_form_lists_every_parameter(function):
    check_numpydoc_form(function)


@pytest.mark.parametrize("function", _params(slow_when_it_uses_stimuli=True))
def test_examples_run_and_show_a_number(function, request):
    """The whole promise: the form (checked first, so an undocumented function fails fast) and examples that run."""
    check_numpydoc_form(function)
    doc = function.__doc__ or ""
    if re.search(r"\bSTIMULI\b", doc):  # the whole set: the session's caches, shared with the docs' pages
        request.getfixturevalue("session_caches")
    # Fresh globals: only the folders the examples name (a fixture that is not needed is not set up).
    globs: dict[str, Any] = {}
    for name, fixture in EXAMPLE_FOLDERS.items():
        if re.search(rf"\b{name}\b", doc):
            value = request.getfixturevalue(fixture)
            if name == "SUBSET":
                value = value(2)
            elif name == "FOLDER":
                value = Path(value) / "folder"
                value.mkdir()
            globs[name] = value
    tests = doctest.DocTestFinder(recurse=False).find(function, globs=globs)
    examples = [example for test in tests for example in test.examples]
    assert examples, "no example"
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test, out=report.write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, report.getvalue()[-4000:]
    shown = [example.want for example in examples if example.exc_msg is None]
    assert any(NUMBER.search(want) for want in shown), "no example shows a number"


def test_the_examples_are_checked():
    """The checks can fail: a wrong number, a parameter left out, and an example without output are caught."""

    def documented(threshold: float, *, seed: int = 0, **settings: Any) -> float:
        """Twice the threshold.

        What it computes.

        Parameters
        ----------
        threshold
            A number.
        seed
            Unused.
        **settings
            Unused.

        Returns
        -------
        float
            Twice ``threshold``.

        Examples
        --------
        >>> documented(0.25)
        0.5
        """
        return 2 * threshold

    doc = inspect.getdoc(documented) or ""
    assert listed_parameters(doc) == signature_names(documented) == ["threshold", "seed", "**settings"]
    assert listed_parameters(doc.replace("seed\n    Unused.\n", "")) != signature_names(documented)

    def failures(docstring: str) -> int:
        documented.__doc__ = docstring
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        for test in doctest.DocTestFinder(recurse=False).find(documented, globs={"documented": documented}):
            runner.run(test, out=lambda text: None)
        return runner.summarize(verbose=False).failed

    original = documented.__doc__ or ""
    assert failures(original) == 0
    assert failures(original.replace("0.5\n", "0.6\n")) == 1
    assert not NUMBER.search("'airplane/airplane1-bicycle2.png'")
    assert NUMBER.search("(162, 572)") and NUMBER.search("0.2207") and NUMBER.search("[-1e-05]")


def _undocumented_below_the_doors() -> list[str]:
    """Every public function and method of every public module of the package that takes parameters and whose
    docstring (inherited from a base class where it overrides one, as ``help()`` shows it) has no Parameters
    section. pytest's hooks and the plugin's fixtures are pytest's to call: their parameters are pytest's."""
    import importlib
    import pkgutil

    missing = []
    for info in pkgutil.walk_packages(modelval.__path__, "modelval."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            members = [(name, value)] if inspect.isfunction(value) else []
            if inspect.isclass(value):
                members = [(f"{name}.{n}", m) for n, m in vars(value).items() if not n.startswith("_")]
                members = [(n, getattr(value, n.split(".")[1])) for n, m in members if inspect.isfunction(m)
                           or isinstance(m, classmethod | staticmethod)]  # fmt: skip
            for qualname, function in members:
                if name.startswith("pytest_") or hasattr(function, "_fixture_function_marker"):
                    continue
                fixture = getattr(function, "__pytest_wrapped__", None) or "pytest_fixture" in repr(function)
                if fixture:
                    continue
                parameters = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
                if parameters and "Parameters\n" not in (inspect.getdoc(function) or ""):
                    missing.append(f"{module.__name__}.{qualname}")
    return missing


def test_every_public_function_says_its_parameters():
    """Issue 39: every public function that takes parameters has a numpydoc Parameters section."""
    missing = _undocumented_below_the_doors()
    assert not missing, f"{len(missing)} without a Parameters section: {', '.join(missing[:40])}"
