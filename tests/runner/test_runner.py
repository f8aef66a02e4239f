"""The validation matrix itself: which cases exist, their ids, and how the wrong normalization is chosen."""

from modelval.models import get_entry, list_models
from modelval.runner.cases import build_cases, wrong_normalization


def test_every_entry_appears_under_both_normalizations():
    cases = build_cases("all")
    assert len(cases) == 2 * len(list_models())
    by_model = {}
    for case in cases:
        by_model.setdefault(case.model, set()).add((case.role, case.normalization))
    for entry in list_models():
        assert by_model[entry.name] == {("correct", "model"), ("wrong", wrong_normalization(entry))}


def test_wrong_normalization_is_the_other_common_one():
    assert wrong_normalization(get_entry("efficientnet_lite0")) == "imagenet"


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
