"""``modelval plan-trials``: the trial planner on the command line, through ``api.plan_trials``; the worked
example of docs/benchmark.md is run here and must print what the page says."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from modelval.api.benchmark import plan_trials
from modelval.behaviour.consistency import kappa_cells, kappa_range, trials_for_kappa_difference
from modelval.cli import main
from modelval.errors import ModelvalError

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmark.md"


def _doc_session() -> list[tuple[list[str], str]]:
    """Each ``$ modelval plan-trials ...`` line of the page's console block and the line printed after it."""
    block = re.search(r"```console\n(\$ modelval plan-trials.*?)```", DOC.read_text(), re.S)
    assert block, "docs/benchmark.md has no plan-trials example"
    lines = block.group(1).splitlines()
    return [(shlex.split(line[2:])[1:], lines[k + 1]) for k, line in enumerate(lines) if line.startswith("$ ")]


def test_the_documented_example_prints_what_the_page_says(capsys):
    session = _doc_session()
    assert len(session) == 3
    for argv, printed in session:
        status = main(argv)
        captured = capsys.readouterr()
        if printed.startswith("modelval: error:"):
            assert status == 2 and captured.err.strip() == printed and not captured.out
        else:
            assert status == 0 and captured.out.strip() == printed


def test_json_is_the_plan_of_the_behaviour_function(capsys):
    argv = ["plan-trials", "--accuracy", "0.7", "0.75", "--kappa", "0.1", "--difference", "0.1", "--power", "0.9"]
    assert main([*argv, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    expected = trials_for_kappa_difference(0.7, 0.75, 0.1, 0.1, power=0.9)
    assert payload == expected.to_dict()
    assert payload["trials"] > 1687  # more power, more trials


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--accuracy", "0.7", "1.0", "--kappa", "0", "--difference", "0.1"], "accuracy must lie strictly"),
        (["--accuracy", "0", "0.7", "--kappa", "0", "--difference", "0.1"], "accuracy must lie strictly"),
        (["--accuracy", "0.7", "0.75", "--kappa", "0", "--difference", "0.1", "--power", "1"], "power must lie"),
        (["--accuracy", "0.7", "0.75", "--kappa", "0", "--difference", "0.1", "--alpha", "0"], "alpha must lie"),
        (["--accuracy", "0.7", "0.75", "--kappa", "0.9", "--difference", "0.1"], "kappa 0.9 is impossible"),
        (["--accuracy", "0.7", "0.75", "--kappa", "0.8", "--difference", "0.1"], "difference = 0.9 is impossible"),
        (["--accuracy", "0.7", "0.75", "--kappa", "-0.5", "--difference", "0.1"], "kappa -0.5 is impossible"),
        (["--accuracy", "0.7", "0.75", "--kappa", "0.1", "--difference", "0"], "difference is not 0"),
    ],
)
def test_impossible_inputs_are_one_line_and_exit_2(extra, message, capsys):
    assert main(["plan-trials", *extra, "--json"]) == 2
    captured = capsys.readouterr()
    assert not captured.out
    assert len(captured.err.strip().splitlines()) == 1 and message in captured.err


def test_the_feasible_range_is_where_a_2x2_table_exists():
    """The ends of kappa_range are kappas of valid 2x2 tables, and a step past either end is none."""
    for p1, p2 in ((0.7, 0.75), (0.9, 0.3), (0.5, 0.5), (0.2, 0.95)):
        low, high = kappa_range(p1, p2)
        for kappa in (low, high):
            cells = kappa_cells(p1, p2, kappa)
            assert cells.sum() == pytest.approx(1) and cells.min() >= 0
        for kappa in (low - 1e-3, high + 1e-3):
            with pytest.raises(ValueError):
                kappa_cells(p1, p2, kappa)
            with pytest.raises(ModelvalError, match="impossible"):
                plan_trials((p1, p2), kappa, 1e-3 if kappa > high else -1e-3)
