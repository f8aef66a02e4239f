"""``modelval compare``: every statistic is printed with its unit, the inputs take labels (issue 32, point 6).

Real decisions throughout: the committed per-image baselines of EfficientNet-Lite0 and -Lite1 (two runs the
project made on the 1280 published stimuli) and texture-vs-shape's published ResNet-50 decisions.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from modelval.behaviour.decisions import read_decisions
from modelval.behaviour.paired import compare_paired
from modelval.behaviour.trials import read_trials
from modelval.cli import main
from modelval.cli.compare import disagreement_note, format_summary
from modelval.paths import package_data

LITE0 = package_data("baselines/efficientnet_lite0.csv")
LITE1 = package_data("baselines/efficientnet_lite1.csv")


def test_labels_name_the_inputs_instead_of_the_subj_column(capsys, tmp_path):
    # two copies of one run have the same subj column: without labels they were "A: efficientnet_lite0" and
    # "B: efficientnet_lite0"
    copy = tmp_path / "run=2" / "lite0.csv"  # a folder name with "=": an existing file is taken whole
    copy.parent.mkdir()
    copy.write_bytes(LITE0.read_bytes())
    assert main(["compare", f"first run={LITE0}", str(copy), "--bootstrap", "50", "--permutations", "200"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "A = first run, B = efficientnet_lite0 on cue-conflict (1200 conflict images)"
    assert main(["compare", f"Lite1={LITE1}", f"Lite0={LITE0}", "--json", "--bootstrap", "50"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["a"], payload["b"]) == ("Lite1", "Lite0")


def test_a_label_without_a_file_is_bad_usage(capsys):
    assert main(["compare", "Lite0=", str(LITE1)]) == 2
    assert "LABEL=FILE" in capsys.readouterr().err


def test_the_interval_and_the_p_value_each_name_their_unit(capsys):
    assert main(["compare", str(LITE1), str(LITE0), "--bootstrap", "200", "--permutations", "500"]) == 0
    out = capsys.readouterr().out
    assert "95% CI [" in out and "(paired bootstrap over texture images, 200 resamples" in out
    assert "paired permutation test of the shape bias difference over these 1200 conflict images: p = " in out
    assert "discordant decisions" in out


def _lite1_vs_lite0():
    return compare_paired(read_trials(LITE1), read_trials(LITE0), dataset="cue-conflict", n_bootstrap=200,
                          permutations=500, names=("Lite1", "Lite0"))  # fmt: skip


def test_an_interval_holding_zero_beside_a_small_p_is_explained():
    """Lite0 under ImageNet normalization vs its own: +3.26 pp, 95% CI [-0.22, +7.06] over texture images and
    p = 0.0062 over the stimuli. The same reading is forced here on real decisions by the interval and p."""
    real = _lite1_vs_lite0()
    assert disagreement_note(real) is None  # -0.21 pp, p = 0.86: the interval holds 0 and p is large, no note
    seeming = dataclasses.replace(real, ci95=(-0.0022, 0.0706), test=dataclasses.replace(real.test, p=0.0062))
    note = disagreement_note(seeming)
    assert note is not None and "the interval holds 0 while p = 0.0062: not a contradiction" in note
    assert "  note: the interval holds 0" in format_summary(seeming)
    other_way = dataclasses.replace(real, ci95=(0.001, 0.03), test=dataclasses.replace(real.test, p=0.2))
    assert "excludes 0 while p = 0.2" in (disagreement_note(other_way) or "")


def test_a_run_against_itself_reads_without_a_note():
    result = compare_paired(read_trials(LITE0), read_trials(package_data("baselines/efficientnet_lite0.csv")),
                            dataset="cue-conflict", n_bootstrap=50, permutations=100)  # fmt: skip
    assert result.difference == 0 and disagreement_note(result) is None
    assert len(read_decisions(LITE0)) == 1280


@pytest.mark.parametrize("command", ["humans", "benchmark"])
def test_the_multi_observer_commands_take_one_file_per_flag_and_say_so(command, capsys):
    """The usage once read ``--decisions [LABEL[:DATASET]=]FILE ...``; each flag takes one file, repeated."""
    from modelval.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "one decision CSV per --decisions; repeat the option for each observer" in help_text
    assert "one per --model; repeat the option for each model" in help_text
    argv = [command, "--decisions", f"A={LITE0}", "--decisions", f"B={LITE1}", "--model", "x", "--model", "y"]
    if command == "human-figures":
        argv += ["--report-dir", "figures"]
    args = build_parser().parse_args(argv)
    assert [label for label, _, _ in args.decisions] == ["A", "B"] and args.model == ["x", "y"]
    with pytest.raises(SystemExit):  # two files after one flag: refused, not silently half-read
        build_parser().parse_args([command, "--decisions", str(LITE0), str(LITE1)])
