"""Saved outputs and re-scoring: a model's raw outputs on a stimulus set, written once, analysed again without it.

``modelval shape-bias --model M --save-outputs DIR`` (or :func:`save_outputs`) writes::

    DIR/outputs.npy    the model's raw outputs, (N, K) float32, in stimulus order
    DIR/stimuli.json   the stimuli: relative path, shape and texture category, SHA-256 of each file
    DIR/run.json       format and version, the model spec, the label map, the protocol and the provenance
                       record (docs/provenance.md), and the SHA-256 of outputs.npy and of stimuli.json

Reading checks everything before a number is computed: both digests, that the outputs are finite floats of one
row per stimulus, that each listed stimulus's categories are the ones its file name states, and that each
file's SHA-256 is the published one (the set's manifest). A swapped or edited listing is refused by name.

Each row is bound to its stimulus (format 3): the listing keeps, per stimulus, the SHA-256 of its path, its
file's SHA-256 and its row of outputs (:func:`row_digest`). The two file digests of ``run.json`` only show that
a file is whole; rows reordered against the listing (rotated by one, every row still a real stimulus and both
digests recomputed) passed them and rescored 1.0 for a true 0.2162. A row that is not the one saved for its
stimulus is refused by number. Folders of formats 1 and 2 are still read, and the re-score's provenance says
that their rows are not bound (``not_covered``).

``modelval shape-bias --outputs DIR`` (or :func:`rescore`) recomputes the shape bias from the stored outputs under
another aggregation, label map or subset of the 16 categories, with the same code that maps a fresh run's outputs,
so it equals a fresh run exactly, and reports REFINED-BIAS's mean reciprocal ranks over all outputs too
(:mod:`modelval.behaviour.refined_bias`; ``rescore(..., ranks=True)``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from modelval import jsonio
from modelval.atomic import replacing, write_text
from modelval.errors import DataError

if TYPE_CHECKING:
    from modelval.api.pipeline import ModelRun
    from modelval.behaviour.categories import LabelMap
    from modelval.behaviour.cue_conflict import Stimulus
    from modelval.behaviour.refined_bias import RankSensitivity
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.records.run_store import RunStore

FORMAT = "modelval-saved-outputs"
FORMAT_VERSION = 3
#: Versions read: 1 had no digest of stimuli.json (its rows are still checked against names and the manifest);
#: 2 no digest binding each row of outputs to its stimulus.
READABLE_VERSIONS = (1, 2, 3)
#: What a folder of an older format cannot show, in the re-score's provenance.
UNBOUND = ("format {version}: the rows of outputs.npy are not bound to their stimuli, so rows reordered against "
           "the listing with the digests recomputed are not detected; write the folder again with --save-outputs")


def row_digest(relpath: str, sha256: object, row: np.ndarray) -> str:
    """The SHA-256 binding one row of outputs to its stimulus: its path, its file's SHA-256 and the row's bytes.

    Parameters
    ----------
    relpath
        The stimulus's relative path.
    sha256
        The SHA-256 of its file (``None`` when unknown).
    row
        Its row of outputs.
    """
    import hashlib

    from modelval.records.store import array_digest

    return hashlib.sha256(f"{relpath}|{sha256}|{array_digest(row)}".encode()).hexdigest()


def save_outputs(run: ModelRun, folder: str | os.PathLike[str]) -> Path:
    """Write a run's raw outputs, its stimuli and its provenance into a folder, for :func:`rescore` later.

    ``outputs.npy`` (the model's raw outputs, float32, in stimulus order), ``stimuli.json`` (each stimulus with
    its categories and SHA-256) and ``run.json`` (the model, label map, aggregation, the provenance record and
    the SHA-256 of ``outputs.npy``); each file is replaced atomically.

    Parameters
    ----------
    run
        A :class:`ModelRun` (:func:`run_model`, or ``report.run`` of :func:`shape_bias`).
    folder
        The folder (made if missing; a file standing there is refused).

    Returns
    -------
    pathlib.Path
        The folder.

    Examples
    --------
    >>> import modelval
    >>> options = modelval.EvaluationOptions(data_root=SUBSET, allow_modified_stimuli=True, bootstrap=0)
    >>> folder = modelval.save_outputs(modelval.run_model("efficientnet_lite0", options=options), FOLDER)
    >>> sorted(path.name for path in folder.iterdir())
    ['outputs.npy', 'run.json', 'stimuli.json']
    >>> import json, numpy as np
    >>> np.load(folder / "outputs.npy").shape, len(json.loads((folder / "stimuli.json").read_text())["stimuli"])
    ((32, 1000), 32)
    """
    from modelval.records.provenance import file_digest

    evaluation = run.evaluation
    if evaluation.outputs is None:
        raise DataError("this evaluation kept no raw outputs to save")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"--save-outputs {folder}: a file stands there; give a folder")
    folder.mkdir(parents=True, exist_ok=True)
    digests = run.stimulus_digests
    with replacing(folder / "outputs.npy", binary=True) as handle:
        np.save(handle, evaluation.outputs, allow_pickle=False)
    stimuli = {
        "dataset": run.stimulus_dataset,
        "stimuli": [
            [s.relpath, s.shape, s.texture, digests.get(s.relpath), row_digest(s.relpath, digests.get(s.relpath), row)]
            for s, row in zip(evaluation.stimuli, evaluation.outputs, strict=True)
        ],
        "columns": ["relpath", "shape", "texture", "sha256", "row_sha256"],
    }
    write_text(folder / "stimuli.json", json.dumps(stimuli))  # before run.json, which holds its digest
    label_map = run.model_options.read_label_map()
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": run.model,
        "label_map": None if label_map is None else {k: list(v) for k, v in label_map.indices.items()},
        "aggregation": evaluation.aggregation,
        "outputs_sha256": file_digest(folder / "outputs.npy"),
        "stimuli_sha256": file_digest(folder / "stimuli.json"),
        "provenance": run.provenance(),
    }
    write_text(folder / "run.json", jsonio.dumps(record, indent=1))
    return folder


@dataclass
class SavedOutputs:
    """What :func:`save_outputs` wrote, read back and checked."""

    folder: Path
    outputs: np.ndarray
    stimuli: list[Stimulus]
    dataset: str
    model: str
    aggregation: str
    label_map: LabelMap | None
    provenance: dict[str, Any]
    #: What this folder cannot show (an older format's unbound rows); ``None``: every row is bound.
    not_covered: str | None = None


def load_saved_outputs(folder: str | os.PathLike[str]) -> SavedOutputs:
    """Read a folder written by :func:`save_outputs` (``--save-outputs``), checked.

    The format and its version, the outputs' SHA-256 against ``run.json``, the stimuli listing and the label map
    are checked; every problem is one line naming the file.

    Parameters
    ----------
    folder
        The saved-outputs folder.

    Returns
    -------
    SavedOutputs
        ``.outputs`` (N, K), ``.stimuli``, ``.model``, ``.aggregation``, ``.label_map``, ``.provenance``.

    Raises
    ------
    modelval.errors.DataError
        A folder that is not (or no longer) what :func:`save_outputs` wrote.

    Examples
    --------
    >>> import modelval
    >>> options = modelval.EvaluationOptions(data_root=SUBSET, allow_modified_stimuli=True, bootstrap=0)
    >>> _ = modelval.save_outputs(modelval.run_model("efficientnet_lite0", options=options), FOLDER)
    >>> saved = modelval.api.load_saved_outputs(FOLDER)
    >>> saved.model, saved.outputs.shape, saved.aggregation
    ('efficientnet_lite0', (32, 1000), 'mean')
    """
    from modelval.behaviour.cue_conflict import Stimulus
    from modelval.records.provenance import file_digest

    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder of saved outputs (write one with --save-outputs DIR)")
    try:
        record = json.loads((folder / "run.json").read_text())
        listing = json.loads((folder / "stimuli.json").read_text())
    except FileNotFoundError as error:
        raise DataError(f"{folder}: {Path(error.filename).name} is missing; not a --save-outputs folder") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{folder}: cannot read run.json / stimuli.json ({error})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise DataError(f"{folder / 'run.json'}: not a modelval saved-outputs record (format {FORMAT!r})")
    if record.get("format_version") not in READABLE_VERSIONS:
        raise DataError(f"{folder / 'run.json'}: format version {record.get('format_version')!r}; "
                        f"this modelval reads versions {', '.join(map(str, READABLE_VERSIONS))}")  # fmt: skip
    if record.get("format_version", 0) >= 2 and file_digest(folder / "stimuli.json") != record.get("stimuli_sha256"):
        raise DataError(f"{folder / 'stimuli.json'}: its SHA-256 differs from run.json's: the stimulus listing was "
                        "changed; write the folder again with --save-outputs")  # fmt: skip
    outputs_path = folder / "outputs.npy"
    try:
        if file_digest(outputs_path) != record.get("outputs_sha256"):
            raise DataError(f"{outputs_path}: its SHA-256 differs from run.json's: the outputs were changed or cut")
        outputs = np.load(outputs_path, allow_pickle=False)
    except OSError as error:
        raise DataError(f"{outputs_path}: cannot read it ({error.strerror or error})") from None
    except ValueError as error:
        raise DataError(f"{outputs_path}: not a numeric array ({error})") from None
    try:
        rows = listing["stimuli"]
        if not all(isinstance(row, list) and len(row) >= 4 for row in rows):
            raise TypeError
        stimuli = [Stimulus(str(row[0]), str(row[1]), str(row[2])) for row in rows]
        digests = {str(row[0]): row[3] for row in rows}
        dataset = str(listing["dataset"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{folder / 'stimuli.json'}: not a stimulus listing of --save-outputs") from None
    _check_listing(folder / "stimuli.json", stimuli, digests, dataset)
    if outputs.ndim != 2 or len(outputs) != len(stimuli):
        raise DataError(f"{outputs_path}: {outputs.shape} outputs for {len(stimuli)} stimuli")
    if not np.issubdtype(outputs.dtype, np.floating):
        raise DataError(f"{outputs_path}: outputs of type {outputs.dtype}; a model's raw outputs are floats (logits)")
    bad = np.flatnonzero(~np.isfinite(outputs).all(axis=1))
    if len(bad):
        shown = ", ".join(stimuli[i].name for i in bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise DataError(f"{outputs_path}: NaN or infinite outputs for {len(bad)} stimuli ({shown}); such a row is no "
                        "decision (its argmax would be 'airplane'): evaluate the model again")  # fmt: skip
    version = int(record.get("format_version", 1))
    if version >= 3:
        _check_rows(folder, rows, outputs)
    label_map = _saved_label_map(record.get("label_map"), folder / "run.json")
    return SavedOutputs(
        folder, outputs, stimuli, dataset, str(record.get("model")), str(record.get("aggregation", "mean")),
        label_map, record.get("provenance") or {}, None if version >= 3 else UNBOUND.format(version=version),
    )  # fmt: skip


def _check_rows(folder: Path, rows: list[list[Any]], outputs: np.ndarray) -> None:
    """Each row of outputs is the one saved for the stimulus listed beside it (its :func:`row_digest`)."""
    for number, row in enumerate(rows):
        bound = row[4] if len(row) > 4 else None
        if bound != row_digest(str(row[0]), row[3], outputs[number]):
            raise DataError(
                f"{folder / 'stimuli.json'}: row {number + 1} ({row[0]}): outputs.npy's row {number + 1} is not the "
                "one saved for it (rows reordered or edited against the listing); write the folder again with "
                "--save-outputs"
            )


def _check_listing(path: Path, stimuli: list[Stimulus], digests: dict[str, object], dataset: str) -> None:
    """Each row's categories are the ones its file name states, and each file's SHA-256 is the published one."""
    from modelval.behaviour.experiments import EXPERIMENTS
    from modelval.datasets.manifest import load_manifest

    entry = EXPERIMENTS.get(dataset)  # an unknown dataset name: only the folders are checked
    published: dict[str, str] = {}
    try:
        if entry is not None and entry.manifest is not None:
            published = load_manifest(dataset=dataset)
    except DataError:  # no published checksums here: the names are still checked
        published = {}
    for number, stimulus in enumerate(stimuli, start=1):
        folder = stimulus.relpath.rsplit("/", 1)[0] if "/" in stimulus.relpath else None
        # the file name states the categories (the folder, where the dataset is unknown)
        stated: tuple[str | None, str | None] = entry.label_of(stimulus.name) if entry is not None else (folder, None)
        shape, texture = stated
        if (shape is not None and shape != stimulus.shape) or (texture is not None and texture != stimulus.texture):
            raise DataError(
                f"{path}: row {number} lists {stimulus.relpath} with shape {stimulus.shape!r} and texture "
                f"{stimulus.texture!r}, but its name states {shape!r} and {texture or stimulus.texture!r}: "
                "the listing was edited; write the folder again with --save-outputs"
            )
        digest = digests.get(stimulus.relpath)
        if stimulus.relpath in published and digest is not None and digest != published[stimulus.relpath]:
            raise DataError(
                f"{path}: row {number} ({stimulus.relpath}): its SHA-256 is not the published file's ({dataset} "
                "manifest); these outputs are of another image"
            )


def _saved_label_map(saved: object, path: Path) -> LabelMap | None:
    from modelval.behaviour.categories import LabelMap

    if saved is None:
        return None
    try:
        if not isinstance(saved, dict) or not all(isinstance(v, list) for v in saved.values()):
            raise TypeError
        return LabelMap({str(k): tuple(v) for k, v in saved.items()}, origin=str(path))
    except (TypeError, ValueError) as error:
        detail = f" ({error})" if str(error) else ""
        raise DataError(f"{path}: its label_map is not a map of category -> output indices{detail}") from None


@dataclass
class RescoreReport:
    """The shape bias recomputed from saved outputs, and (optionally) REFINED-BIAS's ranks."""

    model: str
    aggregation: str
    result: ShapeBiasResult
    categories: tuple[str, ...]
    label_map: str
    ranks: RankSensitivity | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    decisions: list[Any] = field(default_factory=list, repr=False)

    @property
    def shape_bias(self) -> float:
        return self.result.shape_bias

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "aggregation": self.aggregation,
            "categories": list(self.categories),
            "label_map": self.label_map,
            **self.result.to_dict(),
        }
        if self.ranks is not None:
            payload["rank_sensitivity"] = self.ranks.to_dict()
        payload["provenance"] = self.provenance
        return payload

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text.

        Parameters
        ----------
        indent
            JSON indentation (``None``: one line).
        """
        return jsonio.dumps(self.to_dict(), indent=indent)


def rescore(
    saved: SavedOutputs | str | os.PathLike[str],
    *,
    aggregation: str | None = None,
    label_map: LabelMap | str | os.PathLike[str] | None = None,
    categories: Sequence[str] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    resample: str | None = None,
    ranks: bool = False,
    run_store: RunStore | None = None,
) -> RescoreReport:
    """The shape bias of saved outputs under another aggregation, label map or subset of the 16 categories.

    The same code maps a fresh run's outputs, so a re-score equals a fresh run exactly. With ``categories``,
    each decision is the best of those categories only, and the shape bias counts the conflict images whose
    shape and texture categories are both among them (a texture outside the subset could never be decided).
    ``ranks`` adds REFINED-BIAS's mean reciprocal ranks of the shape and texture labels over all outputs.

    Parameters
    ----------
    saved
        A :class:`SavedOutputs`, or the folder :func:`save_outputs` wrote.
    aggregation
        ``"mean"``, ``"sum"`` or ``"max"`` over each category's classes (default: the saved one).
    label_map
        A :class:`~modelval.behaviour.categories.LabelMap` or its JSON file (default: the saved one, else
        ImageNet-1k).
    categories
        A subset of the 16 categories (default: all).
    bootstrap
        Bootstrap resamples of the 95% interval (0: none).
    seed
        The bootstrap's seed.
    resample
        The bootstrap's unit (default: texture images).
    ranks
        Add the mean reciprocal ranks (REFINED-BIAS); ``modelval shape-bias --outputs`` always does.
    run_store
        Record the re-score there; ``None`` records nothing.

    Returns
    -------
    RescoreReport
        ``.result`` (the shape bias and its hits), the ranks, ``.decisions`` and ``.provenance``.

    Examples
    --------
    The bundled model's outputs on ``SUBSET``, scored again with **sum** aggregation instead of mean:

    >>> import modelval
    >>> options = modelval.EvaluationOptions(data_root=SUBSET, allow_modified_stimuli=True, bootstrap=0)
    >>> _ = modelval.save_outputs(modelval.run_model("efficientnet_lite0", options=options), FOLDER)
    >>> report = modelval.rescore(FOLDER, aggregation="sum", bootstrap=0)
    >>> report.result.shape_hits, report.result.texture_hits, report.result.shape_bias
    (3, 9, 0.25)
    """
    from modelval.behaviour.categories import AGGREGATIONS, CATEGORIES, Aggregation, CategoryMapper
    from modelval.behaviour.label_map import read_label_map
    from modelval.behaviour.refined_bias import rank_sensitivity
    from modelval.behaviour.resampling import DEFAULT_RESAMPLING
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.evaluation import decisions_from_probabilities, probabilities_from_outputs
    from modelval.records.provenance import environment

    saved = saved if isinstance(saved, SavedOutputs) else load_saved_outputs(saved)
    aggregation = aggregation or saved.aggregation
    if isinstance(label_map, str | os.PathLike):
        label_map = read_label_map(Path(label_map))
    mapping = label_map if label_map is not None else saved.label_map
    chosen = tuple(CATEGORIES) if categories is None else tuple(dict.fromkeys(categories))
    unknown = [c for c in chosen if c not in CATEGORIES]
    if unknown or not chosen:
        raise DataError(f"--categories: unknown {', '.join(map(repr, unknown)) or 'empty list'}; "
                        f"choose among: {', '.join(CATEGORIES)}")  # fmt: skip
    if aggregation not in AGGREGATIONS:
        raise DataError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    chosen_aggregation = cast(Aggregation, aggregation)
    mapper = CategoryMapper(chosen_aggregation, mapping)
    probabilities = probabilities_from_outputs(saved.outputs, {chosen_aggregation: mapper})[chosen_aggregation]
    stimuli = saved.stimuli
    if len(chosen) < len(CATEGORIES):
        outside = [i for i, name in enumerate(CATEGORIES) if name not in chosen]
        probabilities = probabilities.copy()
        probabilities[:, outside] = -np.inf
        keep = [i for i, s in enumerate(stimuli) if s.shape in chosen and s.texture in chosen]
        stimuli, probabilities = [stimuli[i] for i in keep], probabilities[keep]
    decisions = decisions_from_probabilities(stimuli, probabilities)
    result = compute_shape_bias(decisions, n_bootstrap=bootstrap, seed=seed, resample=resample or DEFAULT_RESAMPLING)
    rank_result = None
    if ranks:
        rank_result = rank_sensitivity(saved.outputs, saved.stimuli, mapper.label_map)
    provenance = {
        **environment(),
        "saved_outputs": str(saved.folder),
        "saved_run": saved.provenance,
        **({"not_covered": saved.not_covered} if saved.not_covered else {}),
        "bootstrap": {"resamples": bootstrap, "seed": seed, "unit": result.ci_resampling},
    }
    report = RescoreReport(
        saved.model, aggregation, result, chosen, mapper.label_map.origin, rank_result, provenance, decisions
    )
    if run_store is not None:
        from modelval.records.run_store import record_run

        payload = result.to_dict()
        summary = {key: payload[key] for key in ("shape_bias", "ci95", "shape_hits", "texture_hits", "other")}
        if rank_result is not None:
            summary.update(shape_mrr=rank_result.shape_mrr, texture_mrr=rank_result.texture_mrr)
        label = f"{saved.dataset}: rescore aggregation={aggregation} categories={len(chosen)}"
        record_run(run_store, "rescore", model=saved.model, dataset=saved.dataset, summary=summary,
                   provenance=provenance, decisions={d.imagename: [d.shape, d.response] for d in decisions},
                   label=label)  # fmt: skip
    return report
