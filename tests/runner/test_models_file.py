"""Values in a models file (a shared, committed file): each bad one is one line naming the table and the key."""

from __future__ import annotations

import pytest

from modelval.errors import DataError
from modelval.runner.models_file import read_models_file


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'checkpoint = "/etc/passwd"',
            r"\[models\.a\]: 'checkpoint' '/etc/passwd' is outside the models file's folder",
        ),
        ('checkpoint = "../../../etc/shadow"', r"'checkpoint' '\.\./\.\./\.\./etc/shadow' is outside"),
        ('checkpoint = "~/weights/best.pt"', r"'checkpoint' '~/weights/best.pt' is outside"),
        ('label_map = "../maps/ten.json"', r"'label_map' '\.\./maps/ten.json' is outside"),
        ('baseline = "/tmp/decisions.csv"', r"'baseline' '/tmp/decisions.csv' is outside"),
        ("input_size = 1000000000", r"'input_size': 1000000000 is out of range; the input size is 16 to 4096"),
        ("std = [0, 0, 0]", r"\[models\.a\]: std must be positive"),
        ("mean = [nan, 0.5, 0.5]", r"\[models\.a\]: 'mean': 'nan,0.5,0.5': expected three finite"),
        ("checkpoint_key = 3", r"'checkpoint_key' must be a non-empty string, got 3"),
        ('strip_prefix = ""', r"'strip_prefix' must be a non-empty string"),
    ],
)
def test_a_bad_value_names_the_table_and_key(line, message, tmp_path):
    path = tmp_path / "project" / "modelval.toml"
    path.parent.mkdir()
    path.write_text(f'[models.a]\nspec = "nets.py:build"\n{line}\n')
    with pytest.raises(DataError, match=message) as caught:
        read_models_file(path)
    assert "\n" not in str(caught.value)


def test_paths_inside_the_folder_and_checkpoint_layout_keys_are_read(tmp_path):
    path = tmp_path / "modelval.toml"
    path.write_text(
        '[models.a]\nspec = "nets.py:build"\ncheckpoint = "runs/../runs/best.ckpt"\n'
        'checkpoint_key = "state_dict_ema"\nstrip_prefix = "model."\ninput_size = 4096\n'
    )
    (model,) = read_models_file(path)
    assert model.checkpoint == tmp_path / "runs" / "best.ckpt"
    assert (model.checkpoint_key, model.strip_prefix, model.overrides.input_size) == ("state_dict_ema", "model.", 4096)


def test_a_binary_file_is_no_models_file(tmp_path):
    path = tmp_path / "modelval.toml"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(DataError, match=r"not a text \(UTF-8\) file; a config file is TOML"):
        read_models_file(path)


def test_expectations_keyed_by_device_and_dtype_are_read(tmp_path):
    from modelval.judgement.expected import RunSetting

    path = tmp_path / "modelval.toml"
    path.write_text(
        '[models.a]\nspec = "nets.py:build"\nexpected = 0.30\ntolerance = 0.015\nflip_budget = 2\n'
        '[models.a.expectations]\n"cuda/bf16" = { tolerance = 0.03, flip_budget = 12 }\n'
        '"cuda:9.0/bf16" = { expected = 0.31 }\n'
    )
    (model,) = read_models_file(path)
    assert (model.expected, model.tolerance, model.flip_budget) == (0.30, 0.015, 2)
    h100 = model.expectation.for_setting(RunSetting("cuda", "9.0", "bf16"))
    assert (h100.value, h100.tolerance, h100.flip_budget, h100.entry) == (0.31, 0.03, 12, "cuda:9.0/bf16")
    cpu = model.expectation.for_setting(RunSetting())
    assert (cpu.value, cpu.flip_budget, cpu.entry, cpu.named("PASS")) == (0.30, 2, "default", "PASS [default]")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("flip_budget = 1.5", r"\[models\.a\]: 'flip_budget' is a number of decisions"),
        ('[models.a.expectations]\n"tpu" = { flip_budget = 1 }', r"\[models\.a\]: an expectations key is DEVICE"),
        ('[models.a.expectations]\n"cuda" = { expected = 21.39 }', r"'expected' is a fraction between 0 and 1"),
        ('expectations = ["cuda"]', r"'expectations' must be a table"),
    ],
)
def test_a_bad_expectation_names_the_table(tmp_path, lines, message):
    path = tmp_path / "modelval.toml"
    path.write_text(f'[models.a]\nspec = "nets.py:build"\n{lines}\n')
    with pytest.raises(DataError, match=message) as caught:
        read_models_file(path)
    assert "\n" not in str(caught.value)
