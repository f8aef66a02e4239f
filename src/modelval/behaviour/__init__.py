"""Behaviour: what a classifier's answers mean on the paper's stimuli.

The 1000 -> 16 category mapping, the cue-conflict naming grammar, per-image decisions in the
published raw-data format, and the shape bias computed from them. Nothing here loads a model or
reads a stimulus folder; it imports only the shared ground.
"""

from modelval.behaviour.categories import (
    AGGREGATIONS,
    CATEGORIES,
    Aggregation,
    CategoryMapper,
    aggregation_matrix,
    category_index,
    map_to_categories,
)
from modelval.behaviour.cue_conflict import EXPECTED_CONFLICTS, EXPECTED_IMAGES, Stimulus, parse_stimulus_name
from modelval.behaviour.decisions import Decision, by_stimulus, read_decisions, write_decisions
from modelval.behaviour.humans import (
    HumanCeiling,
    HumanComparison,
    HumanPanel,
    compare_with_humans,
    error_consistency,
    human_ceiling,
    load_human_panel,
)
from modelval.behaviour.label_map import IMAGENET_LABEL_MAP, LabelMap, read_label_map
from modelval.behaviour.paired import PairedComparison, compare_paired, mcnemar_exact
from modelval.behaviour.shape_bias import ShapeBiasResult, bootstrap_interval, compute_shape_bias
from modelval.behaviour.trials import DATASETS, Trial, dataset_of, read_trials, trials_from_decisions

__all__ = [
    "AGGREGATIONS",
    "CATEGORIES",
    "DATASETS",
    "EXPECTED_CONFLICTS",
    "EXPECTED_IMAGES",
    "IMAGENET_LABEL_MAP",
    "Aggregation",
    "CategoryMapper",
    "Decision",
    "HumanCeiling",
    "HumanComparison",
    "HumanPanel",
    "LabelMap",
    "PairedComparison",
    "ShapeBiasResult",
    "Stimulus",
    "Trial",
    "aggregation_matrix",
    "bootstrap_interval",
    "by_stimulus",
    "category_index",
    "compare_paired",
    "compare_with_humans",
    "compute_shape_bias",
    "dataset_of",
    "error_consistency",
    "human_ceiling",
    "load_human_panel",
    "map_to_categories",
    "mcnemar_exact",
    "parse_stimulus_name",
    "read_decisions",
    "read_label_map",
    "read_trials",
    "trials_from_decisions",
    "write_decisions",
]
