"""The mutation suite: seeded preprocessing regressions are caught with the stage they were born at, benign rewrites
are called the same (issue 40). On 48 stimuli spread over the set, the bundled model loaded once; the full set's flips
and shape-bias changes of each are printed by benchmarks/preprocess_mutations.py."""

from __future__ import annotations

import pytest

from mutations import mutations

pytestmark = pytest.mark.slow

MUTATIONS = mutations()


@pytest.fixture(scope="module")
def lite0():
    from modelval.api.loading import load

    return load("efficientnet_lite0")[0]


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_regression_is_named_at_its_stage_and_each_rewrite_is_the_same(mutation, lite0, modelval_data_root):
    import modelval

    diff = modelval.preprocess_diff(mutation.a, mutation.b, model=lite0, stimuli=[mutation.copy], limit=48,
                                    data_root=modelval_data_root, device="cpu")  # fmt: skip
    (variant,) = diff.variants
    if mutation.stage is None:
        assert diff.passed, diff.text()
        assert variant.first_stage is None and variant.flips.count == 0
        assert all(not stage.diverged for stage in variant.stages)
        return
    assert not diff.passed and diff.status == "differs"
    assert variant.first_stage == mutation.stage, diff.text()
    # Every stage before the named one agrees; the named stage and the model's inputs differ.
    named = [s.stage for s in variant.stages].index(mutation.stage)
    assert not any(s.diverged for s in variant.stages[:named] if s.stage != "device and batch"), diff.text()
    assert variant.stages[-1].diverged
    assert f"first diverges at {mutation.stage}" in diff.reason
