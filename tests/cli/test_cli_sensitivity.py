"""``modelval sensitivity`` end to end on a stimulus subset: a registry name and a model spec."""

from __future__ import annotations

import json

import pytest

from modelval.cli import main


@pytest.mark.slow  # a sensitivity card of a real model
def test_registry_model_card_and_plot(stimulus_subset, tmp_path, capsys):
    subset = stimulus_subset(2)
    plot = tmp_path / "card.png"
    argv = ["sensitivity", "--model", "efficientnet_lite0", "--data-root", str(subset), "--allow-modified-stimuli"]
    assert main([*argv, "--device", "cpu", "--out", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "moves the number most:" in out and f"wrote {plot}" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_a_spec_with_a_label_map_and_an_override(stimulus_subset, ten_way_head, capsys):
    subset = stimulus_subset(2)
    argv = ["sensitivity", "--model", ten_way_head.spec, "--label-map", str(ten_way_head.label_map)]
    argv += ["--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--data-root", str(subset), "--allow-modified-stimuli"]
    assert main([*argv, "--device", "cpu", "--json"]) == 0
    card = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert {"reference", "variants", "forwards", "top_factor"} <= set(card)
    assert card["model"] == ten_way_head.spec and card["forwards"] >= 2
    # Without the map, the 10-way head is refused with its size.
    assert main([argv[0], argv[1], argv[2], *argv[5:], "--device", "cpu"]) == 2
    assert "head has 10 outputs" in capsys.readouterr().err
