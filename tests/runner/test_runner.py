"""The validation matrix itself: which cases exist, their ids, and how the wrong normalization is chosen."""

from modelval.models import get_entry, list_models
from modelval.runner.cases import _wrong_normalization, build_cases


def test_every_entry_appears_under_both_normalizations():
    cases = build_cases("all")
    assert len(cases) == 2 * len(list_models())
    by_model = {}
    for case in cases:
        by_model.setdefault(case.model, set()).add((case.role, case.normalization))
    for entry in list_models():
        assert by_model[entry.name] == {("correct", "model"), ("wrong", _wrong_normalization(entry))}


def test_wrong_normalization_is_the_other_common_one():
    assert _wrong_normalization(get_entry("efficientnet_lite0")) == "imagenet"


def test_family_filter_and_readable_ids():
    cases = build_cases("efficientnet")
    assert {c.model for c in cases} == {"efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"}
    assert [c.id for c in cases] == [
        f"efficientnet-{variant}-pypi-{case}"
        for variant in ("lite0", "lite1", "lite2")
        for case in ("correct-model-norm", "wrong-imagenet-norm")
    ]
    assert all(c.family == "resnet50" for c in build_cases("resnet"))
    assert len({c.id for c in build_cases("all")}) == len(build_cases("all"))


COUNTING_NETS = """
from pathlib import Path

from efficientnet_lite_pytorch import EfficientNet


def lite0():
    calls = Path(__file__).with_name("calls.txt")
    calls.write_text(calls.read_text() + "built\\n" if calls.exists() else "built\\n")
    return EfficientNet.from_name("efficientnet-lite0")
"""


def test_a_model_is_built_once_for_both_normalizations_and_decides_as_a_fresh_load(
    tmp_path, stimulus_subset, bundled_model
):
    """The zoo's second normalization reuses the module (weights loaded and hashed once); its decisions and its
    preprocessing are exactly those of a model loaded afresh under that normalization."""
    import torch

    import modelval
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.runner.matrix import ValidationRunner
    from modelval.runner.models_file import read_models_file

    torch.save(bundled_model.model.state_dict(), tmp_path / "lite0.pt")
    (tmp_path / "nets.py").write_text(COUNTING_NETS)
    (tmp_path / "modelval.toml").write_text(
        '[models.mine]\nspec = "nets.py:lite0"\ncheckpoint = "lite0.pt"\nmean = [0.5, 0.5, 0.5]\n'
        'std = [0.5, 0.5, 0.5]\nnormalizations = ["model", "wrong"]\n'
    )
    folder = stimulus_subset(1)
    stimuli = StimulusSet.load(folder, allow_modified=True, progress=False)
    runner = ValidationRunner(stimuli=stimuli, device="cpu", cache=False)
    runner.add_user_models(read_models_file(tmp_path / "modelval.toml"))
    own, wrong = runner.model_run("mine", "model"), runner.model_run("mine", "wrong")
    assert (tmp_path / "calls.txt").read_text() == "built\n"
    assert wrong.loaded.model is own.loaded.model and wrong.loaded.config.normalization == "imagenet"
    fresh = modelval.shape_bias(
        f"{tmp_path / 'nets.py'}:lite0", checkpoint=tmp_path / "lite0.pt", normalization="imagenet",
        data_root=folder, allow_modified_stimuli=True, device="cpu", bootstrap=0, cache=False,
    )  # fmt: skip
    assert [d.response for d in wrong.evaluation.decisions] == [d.response for d in fresh.decisions]
    assert wrong.loaded.config.preprocess == fresh.run.loaded.config.preprocess
    assert wrong.loaded.config.preprocess_sources == fresh.run.loaded.config.preprocess_sources


BROKEN_NETS = """
import torch


def raises():
    raise RuntimeError("the factory fell over")


class NaNs(torch.nn.Module):
    def forward(self, x):
        return torch.full((x.shape[0], 1000), float("nan"))


def nans():
    return NaNs()
"""


def test_a_failed_case_records_its_class_from_the_errors_type(tmp_path, stimulus_subset):
    """The nightly's page shows each failed cell's class: taken from the exception's type when the case ran (a
    case met twice re-raises the same error), never read back from its message."""
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.runner.cases import build_user_cases
    from modelval.runner.matrix import ValidationRunner
    from modelval.runner.models_file import read_models_file

    (tmp_path / "nets.py").write_text(BROKEN_NETS)
    (tmp_path / "modelval.toml").write_text(
        '[models.raises]\nspec = "nets.py:raises"\nmean = [0.5, 0.5, 0.5]\nstd = [0.5, 0.5, 0.5]\n'
        'normalizations = ["model", "half"]\n'
        '[models.nans]\nspec = "nets.py:nans"\nmean = [0.5, 0.5, 0.5]\nstd = [0.5, 0.5, 0.5]\n'
    )
    stimuli = StimulusSet.load(stimulus_subset(1), allow_modified=True, progress=False)
    runner = ValidationRunner(stimuli=stimuli, device="cpu", cache=False)
    models = read_models_file(tmp_path / "modelval.toml")
    runner.add_user_models(models)
    rows = [runner.run(case).row for case in build_user_cases(models)]
    classes = {(row.model, row.normalization_case): (row.final_verdict.status, row.error_class) for row in rows}
    assert classes == {("raises", "model"): ("error", "load"), ("raises", "half"): ("error", "load"),
                       ("nans", "model"): ("error", "model outputs"),
                       ("nans", "wrong (not resolved)"): ("error", "model outputs")}  # fmt: skip
    assert all(row.summary()["error_class"] == row.error_class for row in rows)
