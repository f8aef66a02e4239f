"""A skip or a failure of the plugin names a command the command line accepts (issue 42: the skip suggested
``modelval fetch X --modelval-checkpoint-dir ...``, which the CLI rejects)."""

from __future__ import annotations

import shlex

import pytest

from modelval.cli import build_parser
from modelval.models import weights_status
from modelval.pytest_plugin.settings import _in_plugin_words


@pytest.mark.parametrize("model", ["resnet50_in", "resnet50_sin", "deit_tiny_hub"])
def test_the_weights_skip_names_a_fetch_command_the_cli_takes(model, tmp_path):
    available, message = weights_status(model, tmp_path / "my-checkpoints")
    assert not available
    shown = _in_plugin_words(message)
    command = shown.split("Fetch them with: ", 1)[1]
    words = shlex.split(command)
    settings = [w for w in words if "=" in w and w.split("=")[0].isupper()]
    assert settings in ([], [f"MODELVAL_CHECKPOINT_DIR={tmp_path / 'my-checkpoints'}"])
    argv = words[len(settings) :]
    assert argv[0] == "modelval"
    parsed = build_parser().parse_args(argv[1:])  # argparse exits (SystemExit 2) on a flag the CLI rejects
    assert parsed is not None
