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
from modelval.behaviour.shape_bias import ShapeBiasResult, bootstrap_interval, compute_shape_bias

__all__ = [
    "AGGREGATIONS",
    "CATEGORIES",
    "EXPECTED_CONFLICTS",
    "EXPECTED_IMAGES",
    "Aggregation",
    "CategoryMapper",
    "Decision",
    "ShapeBiasResult",
    "Stimulus",
    "aggregation_matrix",
    "bootstrap_interval",
    "by_stimulus",
    "category_index",
    "compute_shape_bias",
    "map_to_categories",
    "parse_stimulus_name",
    "read_decisions",
    "write_decisions",
]
