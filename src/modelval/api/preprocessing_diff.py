"""The front door of a preprocess diff: two pipelines, one model, the same stimuli, compared stage by stage."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.judgement.preprocess_diff import PreprocessDiff

PipelineLike = Any  # a spec string, a modelval Pipeline, or a callable PIL image -> tensor


def preprocess_diff(
    a: PipelineLike,
    b: PipelineLike,
    *,
    model: Any = "efficientnet_lite0",
    stimuli: Sequence[str] | str = ("288",),
    limit: int | None = None,
    data_root: str | os.PathLike[str] | None = None,
    allow_modified_stimuli: bool = False,
    device: str = "auto",
    offline: bool | None = None,
    model_options: ModelOptions | None = None,
    seed: int = 0,
    progress: bool = False,
) -> PreprocessDiff:
    """Two preprocessing pipelines on the same stimuli: where they first diverge, and what it does to the answers.

    Both run on every stimulus and are compared after every stage (:mod:`modelval.evaluation.preprocess_diff`);
    then the model answers both (:mod:`modelval.judgement.preprocess_diff`).

    Parameters
    ----------
    a
        The pipeline before: a spec (``model``, ``model+backend=tensor``, ``timm:NAME``, ``hf:NAME``,
        ``file.py:NAME``; see :mod:`modelval.evaluation.pipeline_specs`), a
        :class:`~modelval.evaluation.pipelines.Pipeline`, or a callable from a PIL image to a (3, H, W) tensor.
    b
        The pipeline after, in the same forms.
    model
        The classifier both feed: a registry name or spec, or a loaded model; ``model`` in a spec is its declared
        preprocessing.
    stimuli
        The stimulus copies: ``original`` (224 px), ``256`` and ``288`` (bicubic upscales), ``jpeg`` (the 288 px
        upscale as a quality-90 JPEG with 4:2:0 chroma).
    limit
        Use this many of the 1,280 stimuli, spread over the set (``None``: all).
    data_root
        The cue-conflict folder (default: the data home's).
    allow_modified_stimuli
        Run on a folder that is not the published set (a subset).
    device
        Where the forwards run, unless a pipeline names its own.
    offline
        Never download (``None``: the ``offline`` setting).
    model_options
        How the model is loaded.
    seed
        The seed of the bootstrap and the permutation test.
    progress
        A progress bar on stderr.

    Returns
    -------
    PreprocessDiff
        ``passed``/``status``/``reason``, and per stimulus copy each stage's differences, the logits' shift, the
        flips and the paired changes of shape bias and cue-conflict accuracy.

    Examples
    --------
    The bundled EfficientNet-Lite0 fed BGR: the pipelines diverge at the channel order.

    >>> import modelval
    >>> diff = modelval.preprocess_diff("model", "model+channels=bgr", limit=32, data_root=STIMULI, device="cpu")
    >>> diff.status, diff.variants[0].first_stage, diff.variants[0].images
    ('differs', 'channel order', 32)
    """
    from modelval.api.loading import load, load_stimuli
    from modelval.evaluation.pipelines import check_variants
    from modelval.runtime import resolve_device

    start = time.perf_counter()
    variants = check_variants(stimuli)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        from modelval.errors import InputValidationError

        raise InputValidationError(f"limit must be a positive int or None, got {limit!r}")
    target = resolve_device(device)
    loaded, name = load(model, model_options=model_options, device=target)
    pipelines = [_pipeline(p, loaded.config.preprocess) for p in (a, b)]
    found = load_stimuli(EvaluationOptions(data_root=data_root, progress=progress,
                                                allow_modified_stimuli=allow_modified_stimuli), offline=offline)
    chosen = _spread(len(found.stimuli), limit)
    chosen_stimuli = [found.stimuli[i] for i in chosen]
    files = [found.root / s.relpath for s in chosen_stimuli]
    result = PreprocessDiff(pipelines[0].name, pipelines[1].name, name)
    for variant in variants:
        result.variants.append(_one_variant(loaded, pipelines, chosen_stimuli, files, variant, target, seed, progress))
    result.seconds = time.perf_counter() - start
    return result


def _pipeline(given: PipelineLike, config: Any) -> Any:
    from modelval.evaluation.pipeline_specs import pipeline_from_spec
    from modelval.evaluation.pipelines import Pipeline

    if isinstance(given, Pipeline):
        return given
    if isinstance(given, str):
        return pipeline_from_spec(given, config)
    if callable(given):
        return Pipeline(given)
    from modelval.errors import InputValidationError

    raise InputValidationError(f"a pipeline is a spec, a Pipeline or a callable; got {type(given).__name__}")


def _spread(total: int, limit: int | None) -> list[int]:
    if limit is None or limit >= total:
        return list(range(total))
    return sorted({int(i) for i in np.linspace(0, total - 1, limit)})


def _one_variant(loaded: Any, pipelines: list[Any], stimuli: list[Any], files: list[Any], variant: str,
                 target: Any, seed: int, progress: bool) -> Any:  # fmt: skip
    from tqdm.auto import tqdm

    from modelval.behaviour.categories import Aggregation, CategoryMapper
    from modelval.evaluation import decisions_from_probabilities
    from modelval.evaluation.forward import probabilities_from_outputs
    from modelval.evaluation.preprocess_diff import run_pipelines
    from modelval.judgement.preprocess_diff import judge_variant

    items: list[Callable[[], Any]] = [functools.partial(_read_and_derive, path, variant) for path in files]
    with tqdm(total=len(items), desc=f"diff ({variant})", unit="img", disable=not progress, leave=False) as bar:
        run = run_pipelines(loaded.model, pipelines[0], pipelines[1], items, device=target,
                            progress=lambda done: bar.update(done - bar.n))  # fmt: skip
    mapper: dict[Aggregation, CategoryMapper] = {"mean": CategoryMapper("mean", None)}
    decisions = [decisions_from_probabilities(stimuli, probabilities_from_outputs(logits, mapper)["mean"])
                 for logits in (run.logits_a, run.logits_b)]  # fmt: skip
    names = (pipelines[0].name, pipelines[1].name)
    return judge_variant(variant, run, decisions[0], decisions[1], names, seed=seed)


def _read_and_derive(path: Any, variant: str) -> Any:
    from modelval.evaluation.pipelines import derive

    return derive(path.read_bytes(), variant)
