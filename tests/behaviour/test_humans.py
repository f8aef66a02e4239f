"""Error consistency against scikit-learn, a hand-computed case, and the published human raw data."""

from __future__ import annotations

import csv
import dataclasses
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import get_dataset
from modelval.behaviour.humans import (
    compare_with_humans,
    error_consistency,
    human_agreement,
    human_ceiling,
    human_shape_fractions,
    kappa_from_consistency,
    load_human_panel,
    texture_despite_humans,
)
from modelval.behaviour.raw_names import short_image_name
from modelval.behaviour.trials import aligned, dataset_of, read_trials
from modelval.errors import DataError
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(cohen_kappa_score,) = reference_names("sklearn.metrics", "cohen_kappa_score")

EXPERIMENTS = ("cue-conflict", "edges", "filled-silhouettes")
VGG_FILES = {
    "cue-conflict": "style-transfer-512-nomask-experiment_vgg16_session-1.csv",
    "edges": "edge-experiment_vgg_session_1.csv",
    "filled-silhouettes": "silhouette-filled-experiment_vgg_session_1.csv",
}


# --- the formula ---------------------------------------------------------------------------------


def test_hand_computed_ten_trials():
    a = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]  # p1 = 0.7
    b = [1, 1, 1, 1, 1, 0, 0, 0, 0, 1]  # p2 = 0.6
    # agree on trials 1-5 (both right) and 8-9 (both wrong): c_obs = 7/10
    # c_exp = 0.7 * 0.6 + 0.3 * 0.4 = 0.54; kappa = (0.7 - 0.54) / 0.46 = 8/23
    result = error_consistency(a, b)
    assert result.observed == pytest.approx(0.7)
    assert result.expected == pytest.approx(0.54)
    assert result.kappa == pytest.approx(8 / 23)
    assert result.trials == 10


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [10, 160, 1280])
def test_equals_sklearn_cohen_kappa(seed, n):
    rng = np.random.default_rng(seed)
    a = rng.random(n) < rng.uniform(0.1, 0.9)
    # b copies a on some trials: from unrelated to strongly consistent errors
    b = np.where(rng.random(n) < rng.uniform(0, 0.9), a, rng.random(n) < rng.uniform(0.1, 0.9))
    if len(set(a)) == 1 and len(set(b)) == 1:
        pytest.skip("degenerate draw")
    assert error_consistency(a, b).kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=300))
def test_equals_sklearn_for_any_vectors(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ours = error_consistency(a, b).kappa
    if (a == b).all():
        assert ours == 1.0  # model-vs-human: perfect agreement is kappa 1, also when c_exp == 1
        return
    assert ours == pytest.approx(cohen_kappa_score(a, b), abs=1e-9)


def test_perfect_agreement_is_one_even_when_chance_agreement_is_one():
    # both always right: c_exp = 1 and the formula is 0/0; model-vs-human returns 1.0
    assert error_consistency([True] * 5, [True] * 5).kappa == 1.0
    assert error_consistency([False] * 5, [False] * 5).kappa == 1.0
    assert kappa_from_consistency(1.0, 1.0) == 1.0
    # always right vs always wrong: c_obs = 0, c_exp = 0 -> kappa 0
    assert error_consistency([True] * 5, [False] * 5).kappa == 0.0


def test_bad_vectors_are_errors():
    with pytest.raises(ValueError, match="equal length"):
        error_consistency([True, False], [True])
    with pytest.raises(ValueError, match="at least one"):
        error_consistency([], [])


# --- reading and aligning --------------------------------------------------------------------------


def test_image_key_drops_the_session_prefix():
    assert short_image_name("0001_edg_s01_0_oven_00_oven10.png") == "oven10.png"
    assert short_image_name("0001_sif_dnn_0_airplane_00_airplane1.png") == "airplane1.png"
    assert short_image_name("0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png") == "airplane1-bicycle2.png"
    assert Decision("airplane1-bicycle2.png", "airplane", "bicycle", "na").image == "airplane1-bicycle2.png"


@pytest.mark.parametrize("dataset", EXPERIMENTS)
def test_dataset_read_from_the_image_names(modelval_reference_dir, dataset):
    trials = read_trials(modelval_reference_dir / VGG_FILES[dataset])
    assert dataset_of(trials) == dataset
    bare = [dataclasses.replace(t, imagename=t.image) for t in trials]
    if dataset == "cue-conflict":
        assert dataset_of(bare) == "cue-conflict"
    else:
        with pytest.raises(DataError, match="--dataset"):
            dataset_of(bare)
        assert dataset_of(bare, filename=f"{get_dataset(dataset).file_prefix}_mine.csv") == dataset


def test_na_counts_as_wrong(modelval_reference_dir):
    trials = read_trials(modelval_reference_dir / "edge-experiment_subject-09_session_1.csv")
    na = [t for t in trials if t.response == "na"]
    assert na, "subject-09 has unanswered edge trials in the published data"
    assert not any(t.correct for t in na)


def test_files_on_different_images_are_an_error(modelval_reference_dir):
    edges = read_trials(modelval_reference_dir / VGG_FILES["edges"])
    with pytest.raises(DataError, match=r"do not cover the same images.*only in A"):
        aligned(edges, edges[:-3])
    sil = read_trials(modelval_reference_dir / VGG_FILES["filled-silhouettes"])
    changed = [dataclasses.replace(t, shape="bear" if t.category != "bear" else "cat") for t in sil]
    with pytest.raises(DataError, match="disagree on the category"):
        aligned(sil, changed)


def test_reader_names_the_bad_row(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("subj,object_response,category,imagename\nx,dog,dog,dog1.png\nx,wolf,dog,dog2.png\n")
    with pytest.raises(DataError, match=r"line 3.*'wolf'"):
        read_trials(path)


# --- the published human data ------------------------------------------------------------------------


def _independent_correctness(path: Path) -> dict[str, bool]:
    """Read a raw-data file with nothing but csv: image (after the last '_') -> response == category."""
    with path.open(newline="") as handle:
        rows = csv.DictReader(handle)
        return {row["imagename"].split("_")[-1]: row["object_response"] == row["category"] for row in rows}


def _human_paths(modelval_reference_dir: Path, dataset: str) -> list[Path]:
    return sorted(modelval_reference_dir.glob(f"{get_dataset(dataset).file_prefix}_subject-*_session_1.csv"))


#: Mean kappa over the 45 pairs of the 10 human observers, computed from the published raw data.
HUMAN_CEILINGS = {"cue-conflict": 0.3311, "edges": 0.3184, "filled-silhouettes": 0.4757}
#: The 10 observers' accuracies (response == category; cue-conflict: the shape), mean over observers.
HUMAN_ACCURACY = {"cue-conflict": 0.7755, "edges": 0.8713, "filled-silhouettes": 0.7531}


@pytest.mark.parametrize("dataset", EXPERIMENTS)
def test_human_ceiling_from_the_raw_data(modelval_reference_dir, dataset):
    panel = load_human_panel(modelval_reference_dir, dataset)
    assert len(panel.observers) == 10
    ceiling = human_ceiling(panel)
    assert len(ceiling.pairs) == 45 and all(a != b for a, b in ceiling.pairs)
    # independently: csv + scikit-learn over every pair of distinct observers
    vectors = [_independent_correctness(p) for p in _human_paths(modelval_reference_dir, dataset)]
    images = sorted(vectors[0])
    kappas = [cohen_kappa_score([a[i] for i in images], [b[i] for i in images]) for a, b in combinations(vectors, 2)]
    assert ceiling.mean == pytest.approx(float(np.mean(kappas)), abs=1e-12)
    assert round(ceiling.mean, 4) == HUMAN_CEILINGS[dataset]
    low, high = ceiling.range
    assert low <= ceiling.mean <= high


@pytest.mark.parametrize("dataset", EXPERIMENTS)
def test_the_ten_observers_accuracies(modelval_reference_dir, dataset):
    panel = load_human_panel(modelval_reference_dir, dataset)
    independent = {
        p.name.split("_subject-")[1].split("_")[0]: np.mean(list(_independent_correctness(p).values()))
        for p in _human_paths(modelval_reference_dir, dataset)
    }
    ours = panel.accuracies()
    assert {name.removeprefix("subject-") for name in ours} == set(independent)
    for name, value in ours.items():
        assert value == pytest.approx(independent[name.removeprefix("subject-")])
    assert round(float(np.mean(list(ours.values()))), 4) == HUMAN_ACCURACY[dataset]


@pytest.mark.parametrize("dataset", EXPERIMENTS)
def test_vgg16_against_the_humans(modelval_reference_dir, dataset):
    panel = load_human_panel(modelval_reference_dir, dataset)
    vgg = read_trials(modelval_reference_dir / VGG_FILES[dataset])
    result = compare_with_humans(vgg, panel, n_bootstrap=300)
    assert result.excluded_self is None and len(result.observers) == 10
    mine = _independent_correctness(modelval_reference_dir / VGG_FILES[dataset])
    images = sorted(mine)
    expected = np.mean(
        [
            cohen_kappa_score([mine[i] for i in images], [h[i] for i in images])
            for h in map(_independent_correctness, _human_paths(modelval_reference_dir, dataset))
        ]
    )
    assert result.error_consistency == pytest.approx(expected, abs=1e-12)
    assert result.accuracy == pytest.approx(np.mean([mine[i] for i in images]))
    low, high = result.ci95
    assert low < result.error_consistency < high
    # far below the human ceiling: VGG-16 errs on other images than humans do
    assert result.error_consistency < result.agreement.mean  # far below what humans agree among themselves


def test_bootstrap_is_seeded(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    vgg = read_trials(modelval_reference_dir / VGG_FILES["edges"])
    first = compare_with_humans(vgg, panel, n_bootstrap=200, seed=3).ci95
    assert compare_with_humans(vgg, panel, n_bootstrap=200, seed=3).ci95 == first
    assert compare_with_humans(vgg, panel, n_bootstrap=200, seed=4).ci95 != first


def test_a_human_is_never_compared_with_itself(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    me = read_trials(modelval_reference_dir / "edge-experiment_subject-03_session_1.csv")
    result = compare_with_humans(me, panel, n_bootstrap=0)
    assert result.excluded_self == "subject-03"
    assert set(result.observers) == {f"subject-{i:02d}" for i in range(1, 11)} - {"subject-03"}
    assert all(not math.isclose(c.kappa, 1.0) for c in result.observers.values())
    ceiling = human_ceiling(panel)
    assert result.error_consistency == pytest.approx(ceiling.per_observer["subject-03"])


def test_images_where_the_model_chose_texture_but_humans_shape(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "cue-conflict")
    fractions = human_shape_fractions(panel)
    assert len(fractions) == 1200  # conflict images only
    vgg = read_trials(modelval_reference_dir / VGG_FILES["cue-conflict"])
    found = texture_despite_humans(vgg, fractions)
    # independently: count humans choosing the shape per image with csv only
    shape_votes: dict[str, int] = {}
    for path in _human_paths(modelval_reference_dir, "cue-conflict"):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                image = row["imagename"].split("_")[-1]
                shape_votes[image] = shape_votes.get(image, 0) + (row["object_response"] == row["category"])
    expected = {
        t.image
        for t in vgg
        if t.response == t.image.split("-")[1].removesuffix(".png").rstrip("0123456789")
        and t.response != t.category
        and shape_votes[t.image] >= 9
    }
    assert {item.image for item in found} == expected
    assert all(item.humans_shape >= 9 and item.response == item.texture for item in found)
    with pytest.raises(DataError, match="only on cue-conflict"):
        human_shape_fractions(load_human_panel(modelval_reference_dir, "edges"))


def test_missing_human_files_say_how_to_get_them(tmp_path):
    with pytest.raises(DataError, match="data download --humans"):
        load_human_panel(tmp_path, "edges")


def test_human_shape_bias_is_the_papers_96_percent(modelval_reference_dir):
    from modelval.behaviour.shape_bias import compute_shape_bias

    panel = load_human_panel(modelval_reference_dir, "cue-conflict")
    biases = [compute_shape_bias(t, n_bootstrap=0).shape_bias for t in panel.observers.values()]
    assert round(float(np.mean(biases)), 3) == 0.958  # Geirhos et al. (ICLR 2019): "about 96%"


# --- issue 19: the reference, sessions, kappa_max, observers --------------------------------------------


def test_a_humans_reference_leaves_its_own_pairs_out(modelval_reference_dir):
    """subject-03 against the others is set beside the 36 pairs among the other nine, not all 45."""
    panel = load_human_panel(modelval_reference_dir, "edges")
    me = read_trials(modelval_reference_dir / "edge-experiment_subject-03_session_1.csv")
    result = compare_with_humans(me, panel, n_bootstrap=0)
    assert len(result.agreement.pairs) == 36 and all("subject-03" not in pair for pair in result.agreement.pairs)
    others = [
        _independent_correctness(p) for p in _human_paths(modelval_reference_dir, "edges") if "subject-03" not in p.name
    ]
    images = sorted(others[0])
    kappas = [cohen_kappa_score([a[i] for i in images], [b[i] for i in images]) for a, b in combinations(others, 2)]
    assert result.agreement.mean == pytest.approx(float(np.mean(kappas)), abs=1e-12)
    assert result.to_dict()["human_error_consistency_pairs"] == 36
    # a model's reference keeps all 45 pairs
    vgg = compare_with_humans(read_trials(modelval_reference_dir / VGG_FILES["edges"]), panel, n_bootstrap=0)
    assert len(vgg.agreement.pairs) == 45


def test_sessions_of_one_subject_are_pooled(modelval_reference_dir, tmp_path):
    """A subject whose trials come in two session files is one observer, as model-vs-human pools by subj."""
    prefix = get_dataset("edges").file_prefix
    for path in _human_paths(modelval_reference_dir, "edges"):
        if "subject-04" not in path.name:
            (tmp_path / path.name).symlink_to(path)
    lines = (modelval_reference_dir / f"{prefix}_subject-04_session_1.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    (tmp_path / f"{prefix}_subject-04_session_1.csv").write_text("\n".join([header, *rows[:70]]) + "\n")
    (tmp_path / f"{prefix}_subject-04_session_2.csv").write_text("\n".join([header, *rows[70:]]) + "\n")
    split = load_human_panel(tmp_path, "edges")
    whole = load_human_panel(modelval_reference_dir, "edges")
    assert len(split.files["subject-04"]) == 2 and len(split.observers["subject-04"]) == 160
    assert human_ceiling(split).mean == pytest.approx(human_ceiling(whole).mean, abs=1e-15)
    # the same image in two sessions is an error, not a silent replacement
    (tmp_path / f"{prefix}_subject-04_session_2.csv").write_text("\n".join([header, *rows[60:]]) + "\n")
    with pytest.raises(DataError, match=r"subject-04 answered .* in two session files"):
        load_human_panel(tmp_path, "edges")


def test_kappa_max_beside_kappa(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "cue-conflict")
    vgg = read_trials(modelval_reference_dir / VGG_FILES["cue-conflict"])
    result = compare_with_humans(vgg, panel, n_bootstrap=0)
    for name, c in result.observers.items():
        p1, p2 = c.accuracy_a, c.accuracy_b
        c_exp = p1 * p2 + (1 - p1) * (1 - p2)
        assert c.kappa_max == pytest.approx((1 - abs(p1 - p2) - c_exp) / (1 - c_exp))
        assert c.kappa <= c.kappa_max
        assert p2 == pytest.approx(panel.accuracies()[name])
    payload = result.to_dict()
    assert payload["kappa_max"]["mean"] == pytest.approx(np.mean([c.kappa_max for c in result.observers.values()]))
    assert payload["kappa_max"]["mean"] < payload["human_error_consistency"]  # VGG-16 at 11.9% accuracy
    assert "not a ceiling" in payload["human_error_consistency_meaning"]
    # model-vs-human's accuracy difference: mean squared difference to each human
    expected = np.mean([(result.accuracy - a) ** 2 for a in result.human_accuracies.values()])
    assert payload["accuracy_difference"]["mean_squared"] == pytest.approx(expected)


def test_observers_can_be_resampled(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "edges")
    vgg = read_trials(modelval_reference_dir / VGG_FILES["edges"])
    fixed = compare_with_humans(vgg, panel, n_bootstrap=400, seed=2)
    drawn = compare_with_humans(vgg, panel, n_bootstrap=400, seed=2, resample_observers=True)
    assert drawn.ci95 == compare_with_humans(vgg, panel, n_bootstrap=400, seed=2, resample_observers=True).ci95
    assert drawn.ci95[1] - drawn.ci95[0] > fixed.ci95[1] - fixed.ci95[0]
    assert "held fixed" in fixed.to_dict()["error_consistency_ci95_observers"]
    assert "resampled" in drawn.to_dict()["error_consistency_ci95_observers"]
    assert fixed.to_dict()["error_consistency_ci95_resampling"] == "stimuli"  # edges have no shared sources


def test_cue_conflict_interval_resamples_texture_images_by_default(modelval_reference_dir):
    panel = load_human_panel(modelval_reference_dir, "cue-conflict")
    vgg = read_trials(modelval_reference_dir / VGG_FILES["cue-conflict"])
    default = compare_with_humans(vgg, panel, n_bootstrap=300)
    assert default.resampling == "texture"
    stimuli = compare_with_humans(vgg, panel, n_bootstrap=300, resample="stimuli")
    assert default.ci95 != stimuli.ci95
    with pytest.raises(DataError, match="no shared sources"):
        edges = read_trials(modelval_reference_dir / VGG_FILES["edges"])
        compare_with_humans(edges, load_human_panel(modelval_reference_dir, "edges"), resample="texture")


def test_no_answer_counts_and_exclusion(modelval_reference_dir):
    """On edges subject-09's 30 timeouts set the low end of the humans' band; '--na exclude' says how much."""
    panel = load_human_panel(modelval_reference_dir, "edges")
    assert panel.no_response()["subject-09"] == 30
    wrong = human_agreement(panel)
    excluded = human_agreement(panel, na_handling="exclude")
    assert min(wrong.per_observer, key=wrong.per_observer.__getitem__) == "subject-09"
    assert excluded.per_observer["subject-09"] > wrong.per_observer["subject-09"]
    vgg_trials = read_trials(modelval_reference_dir / VGG_FILES["edges"])
    vgg = compare_with_humans(vgg_trials, panel, n_bootstrap=0, na_handling="exclude")
    assert vgg.to_dict()["na_handling"]["mode"] == "exclude"
    assert vgg.observers["subject-09"].trials == 130
