"""Behaviour: what a classifier's answers mean on the paper's stimuli.

The 1000 -> 16 category mapping, the cue-conflict naming grammar, per-image decisions in the
published raw-data format, and the shape bias computed from them. Nothing here loads a model or
reads a stimulus folder; it imports only the shared ground.
"""

from modelval.behaviour.answers import parse_caption_judge, parse_vqa, read_responses
from modelval.behaviour.categories import (
    AGGREGATIONS,
    CATEGORIES,
    Aggregation,
    CategoryMapper,
    aggregation_matrix,
    category_index,
    map_to_categories,
)
from modelval.behaviour.consistency import KappaMatrix, kappa_matrix, kappa_max
from modelval.behaviour.cue_conflict import (
    EXPECTED_CONFLICTS,
    EXPECTED_IMAGES,
    Stimulus,
    parse_stimulus_name,
    stimulus_sources,
)
from modelval.behaviour.decisions import Decision, by_stimulus, read_decisions, write_decisions
from modelval.behaviour.experiments import DATASET_NAMES, EXPERIMENTS, Experiment, experiment, get_dataset
from modelval.behaviour.humans import (
    HumanAgreement,
    HumanCeiling,
    HumanComparison,
    HumanPanel,
    compare_with_humans,
    error_consistency,
    human_agreement,
    human_ceiling,
    load_human_panel,
)
from modelval.behaviour.label_map import IMAGENET_LABEL_MAP, LabelMap, read_label_map
from modelval.behaviour.paired import PairedComparison, compare_paired, mcnemar_exact
from modelval.behaviour.permutation import PermutationTest, exact_permutation_test, holm, permutation_test
from modelval.behaviour.resampling import RESAMPLING_UNITS, bootstrap_weights, resampling_for
from modelval.behaviour.shape_bias import ShapeBiasResult, bootstrap_interval, compute_shape_bias
from modelval.behaviour.trials import dataset_of, read_trials

__all__ = [
    "AGGREGATIONS",
    "CATEGORIES",
    "DATASET_NAMES",
    "EXPECTED_CONFLICTS",
    "EXPECTED_IMAGES",
    "EXPERIMENTS",
    "IMAGENET_LABEL_MAP",
    "RESAMPLING_UNITS",
    "Aggregation",
    "CategoryMapper",
    "Decision",
    "Experiment",
    "HumanAgreement",
    "HumanCeiling",
    "HumanComparison",
    "HumanPanel",
    "KappaMatrix",
    "LabelMap",
    "PairedComparison",
    "PermutationTest",
    "ShapeBiasResult",
    "Stimulus",
    "aggregation_matrix",
    "bootstrap_interval",
    "bootstrap_weights",
    "by_stimulus",
    "category_index",
    "compare_paired",
    "compare_with_humans",
    "compute_shape_bias",
    "dataset_of",
    "error_consistency",
    "exact_permutation_test",
    "experiment",
    "get_dataset",
    "holm",
    "human_agreement",
    "human_ceiling",
    "kappa_matrix",
    "kappa_max",
    "load_human_panel",
    "map_to_categories",
    "mcnemar_exact",
    "parse_caption_judge",
    "parse_stimulus_name",
    "parse_vqa",
    "permutation_test",
    "read_decisions",
    "read_label_map",
    "read_responses",
    "read_trials",
    "resampling_for",
    "stimulus_sources",
    "write_decisions",
]
