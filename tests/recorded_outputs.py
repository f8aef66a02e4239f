"""The bundled EfficientNet-Lite0's real outputs on the 1280 cue-conflict stimuli, recorded once in
``tests/data/lite0-cue-conflict.npz``, so that tests whose subject is a metric, a comparison or a report (not the
forward path) read them instead of running the model.

What the file holds, and why it is enough: the stimuli (relative paths, in evaluation order) and, for each of the
two normalizations the tests use (``model``, the model's own mean/std; ``imagenet``), the (1280, 16)
mean-aggregated category probabilities in float32, exactly as :func:`modelval.evaluate` returns them. Everything
those tests read follows from them by modelval's own code: the decisions are their argmax
(:func:`~modelval.evaluation.decisions_from_probabilities`) and the shape bias is
:func:`~modelval.behaviour.shape_bias.compute_shape_bias` of the decisions, as in ``evaluate``. The 1000 ImageNet
logits are not stored (no such test reads them; 5 MB against about 0.2 MB). ``meta`` records how the file was
made: the preprocessing of each normalization, the weights digest, torch and modelval versions.

``test_the_recorded_outputs_are_the_models`` (tests/judgement/test_baseline.py, ``slow``) runs the real
forward and checks that the file still equals it; when the model, its preprocessing or the forward path changes
on purpose, regenerate the file with::

    PYTHONPATH=src python tests/recorded_outputs.py

(the data home as for the tests: ``$MODELVAL_DATA_HOME``, else ``../shared`` beside the checkout).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np

RECORDED = Path(__file__).resolve().parent / "data" / "lite0-cue-conflict.npz"
MODEL = "efficientnet_lite0"
NORMALIZATIONS = ("model", "imagenet")
#: The command that rewrites the file (printed when the slow check fails).
REGENERATE = "PYTHONPATH=src python tests/recorded_outputs.py"
#: The session's validation runner evaluates at batch 48 (modelval.pytest_plugin.plugin): the same here.
BATCH_SIZE = 48


@functools.cache
def _stored() -> dict[str, object]:
    with np.load(RECORDED, allow_pickle=False) as data:
        stored = {name: data[name] for name in data.files}
    stored["meta"] = json.loads(str(stored["meta"]))
    return stored


def recorded_meta() -> dict[str, object]:
    """How the file was made (see :func:`record`)."""
    return dict(_stored()["meta"])  # type: ignore[call-overload]


@functools.cache
def recorded_evaluation(normalization: str = "model"):
    """An :class:`~modelval.evaluation.Evaluation` of the bundled model under ``normalization``, built from the
    recorded category probabilities by the same steps as :func:`modelval.evaluate` after its forward (no
    ``outputs``; ``output_cache`` says where it came from). Cached: callers must not change it."""
    from modelval.api.options import EvaluationOptions
    from modelval.behaviour.cue_conflict import Stimulus, parse_stimulus_name
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.evaluation import Evaluation, decisions_from_probabilities
    from modelval.preprocessing import PreprocessConfig

    stored = _stored()
    meta = stored["meta"]
    assert isinstance(meta, dict)
    relpaths = str(stored["stimuli"]).split("\n")
    stimuli = [Stimulus(path, *parse_stimulus_name(path.rsplit("/", 1)[-1])) for path in relpaths]
    probabilities = np.asarray(stored[normalization])
    probabilities.setflags(write=False)
    settings = dict(meta["preprocessing"][normalization])
    settings.pop("normalization")  # a name derived from mean and std
    config = PreprocessConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    decisions = decisions_from_probabilities(stimuli, probabilities)
    options = EvaluationOptions()
    return Evaluation(
        model_name=MODEL,
        config=config,
        aggregation=str(meta["aggregation"]),
        stimuli=stimuli,
        category_probabilities=probabilities,
        decisions=decisions,
        result=compute_shape_bias(decisions, n_bootstrap=options.bootstrap, seed=options.seed),
        output_cache=f"off: recorded in {RECORDED.name}",
        provenance={"recorded": meta},
    )


def record(evaluations: dict[str, object], path: Path = RECORDED) -> Path:
    """Write the file from real evaluations (``{normalization: Evaluation}``) of the bundled model."""
    import torch

    import modelval

    first = evaluations[NORMALIZATIONS[0]]
    relpaths = [s.relpath for s in first.stimuli]  # type: ignore[attr-defined]
    for evaluation in evaluations.values():
        assert [s.relpath for s in evaluation.stimuli] == relpaths  # type: ignore[attr-defined]
    provenance = first.provenance  # type: ignore[attr-defined]
    meta = {
        "model": MODEL,
        "aggregation": first.aggregation,  # type: ignore[attr-defined]
        "preprocessing": {n: e.config.to_dict() for n, e in evaluations.items()},  # type: ignore[attr-defined]
        "weights_sha256": provenance.get("weights_sha256"),
        # the set's facts without the folder it was read from (a path of the machine that made the file)
        "stimuli": {k: v for k, v in dict(provenance.get("stimuli") or {}).items() if k != "root"},
        "forward_path": provenance.get("forward_path"),
        "batch_size": provenance.get("batch_size"),
        "precision": provenance.get("precision"),
        "device": provenance.get("device"),
        "torch": torch.__version__,
        "modelval": modelval.__version__,
        "made_by": REGENERATE,
    }
    arrays = {
        n: np.ascontiguousarray(e.category_probabilities, dtype=np.float32)  # type: ignore[attr-defined]
        for n, e in evaluations.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, stimuli=np.array("\n".join(relpaths)), meta=np.array(json.dumps(meta)), **arrays)
    return path


def main() -> int:
    """Run the bundled model on the 1280 stimuli under both normalizations, on the CPU, and write the file."""
    import os

    from modelval.api.options import EvaluationOptions, ModelOptions
    from modelval.api.pipeline import run_model
    from modelval.datasets.stimuli import DATA_HOME_ENV

    shared = Path(__file__).resolve().parents[2] / "shared"
    if not os.environ.get(DATA_HOME_ENV) and (shared / "cue-conflict").is_dir():
        os.environ[DATA_HOME_ENV] = str(shared)
    evaluations = {
        n: run_model(
            MODEL,
            options=EvaluationOptions(normalization=n, batch_size=BATCH_SIZE, cache=False, progress=False),
            model_options=ModelOptions(device="cpu"),
        ).evaluation
        for n in NORMALIZATIONS
    }
    path = record(evaluations)
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
