"""The validation matrix: every registered model entry x (correct, wrong) normalization x source.

Correct normalization: within the published value's tolerance (modelval/data/expected_shape_bias.toml),
or the committed baseline for the bundled model, or a recorded finding where nothing is published
(DeiT). Wrong normalization: the change must be detected. On failure the message names what is
implicated: calculation, preprocessing or model source.

Weight-needing cases skip with the exact `modelval models fetch` command (fail under --strict-weights).
Select families with --family resnet|deit|efficientnet|all.
"""

import pytest

from modelval.pytest_plugin.plugin import _case_param, _user_cases
from modelval.pytest_plugin.settings import find_models_file
from modelval.runner.cases import build_cases
from modelval.runner.matrix import cross_source_tolerance


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        # The built-in entries, then the models file's (a modelval.toml at the rootdir, or --models-file).
        family = metafunc.config.getoption("--family")
        cases = build_cases(family) if family != "none" else []
        if find_models_file(metafunc.config) is not None:
            cases += _user_cases(metafunc.config)
        metafunc.parametrize("case", [_case_param(case) for case in cases])
    if "deit_variant" in metafunc.fixturenames:
        from modelval.models import list_models

        family = metafunc.config.getoption("--family")
        variants = sorted({e.variant for e in list_models(family="deit")}) if family in ("deit", "all") else []
        metafunc.parametrize("deit_variant", [pytest.param(v, marks=pytest.mark.modelval_weights) for v in variants])


@pytest.mark.slow
def test_shape_bias(case, modelval_runner, modelval_require_weights):
    if case.user is None:
        modelval_require_weights(case.model)
    judgement = modelval_runner.run(case)
    assert judgement.passed, judgement.message


@pytest.mark.slow
def test_deit_sources_agree(deit_variant, modelval_runner, modelval_require_weights):
    """Same weights from torch.hub, HuggingFace and timm, each under its correct preprocessing, agree."""
    from modelval.models import list_models

    entries = [e for e in list_models(family="deit") if e.variant == deit_variant]
    for entry in entries:
        modelval_require_weights(entry.name)
    values = {e.source: modelval_runner.evaluate(e.name, "model").result.shape_bias for e in entries}
    spread = max(values.values()) - min(values.values())
    detail = ", ".join(f"{source} {value * 100:.2f}%" for source, value in sorted(values.items()))
    assert spread <= cross_source_tolerance(), (
        f"DeiT-{deit_variant}: sources disagree by {spread * 100:.2f} pp ({detail}); with identical weights this "
        "implicates the MODEL SOURCE (conversion or architecture differences): "
        "run tests/models/test_source_equivalence.py"
    )
