"""Vision-language models on the cue-conflict stimuli: a VLM of your own asked one or more prompts, and the
paper's published prompt search, as ``modelval shape-bias --vlm`` runs them.

A VLM is any callable ``(PIL image, prompt) -> str``, given as ``file.py:fn`` or ``module.path:fn`` (as model
factories are) or passed from Python. Each prompt's answers are parsed to decisions
(:mod:`modelval.behaviour.answers`), scored (shape bias, cue-conflict accuracy, abstentions) and, with several
prompts, compared pairwise on the same stimuli with paired bootstrap intervals. Answers are cached, keyed by
the model (the SHA-256 of the files that define the callable: its function's, or its class's for a wrapper
object), the prompt and each stimulus's bytes, and served only after a few of them, asked again, agree
(:mod:`modelval.records.answer_cache`). A callable with no source file of its own (a builtin, a
``functools.partial`` of one) cannot be identified, so its answers are not cached, and the JSON says so in one line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.options import EvaluationOptions, resolve_options
from modelval.api.recording import JSONResult
from modelval.errors import DataError, ModelvalError, user_code

if TYPE_CHECKING:
    from modelval.behaviour.answers import PromptDifference, PromptSearchRow
    from modelval.behaviour.decisions import Decision
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.judgement.verdict import Verdict
    from modelval.records.run_store import RunStore

VLM = Callable[[Any, str], str]

ABSTENTION_RULE = (
    "an answer with no class (a refusal, an unparsable answer, several classes) is an abstention: neither a shape "
    "nor a texture hit, so it leaves the shape bias out and counts against the cue-conflict accuracy, which is over "
    "all conflict stimuli"
)


@dataclass
class PromptRun:
    """One prompt's answers, decisions, scores and verdict (the sanity gate of every observer: below 30%
    cue-conflict accuracy, abstentions included, no shape bias is a result)."""

    name: str
    text: str
    parser: str
    answers: list[str]
    decisions: list[Decision]
    result: ShapeBiasResult
    verdict: Verdict
    cached: int = 0
    cache_check: str = "off"

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        withheld = jsonio.Undefined(f"withheld: {self.verdict.reason}") if self.verdict.withheld else None
        return {
            "prompt": self.name,
            "parser": self.parser,
            "shape_bias": withheld or r.shape_bias,
            "ci95": [withheld, withheld] if withheld else [r.ci_low, r.ci_high],
            "ci95_resampling": r.ci_resampling,
            "cue_accuracy": r.cue_accuracy,
            "abstentions": r.abstentions,
            "shape_hits": r.shape_hits,
            "texture_hits": r.texture_hits,
            "other": r.other,
            "conflict_images": r.conflict_images,
            "answers_from_cache": self.cached,
            "answer_cache_check": self.cache_check,
            "text": self.text,
            **self.verdict.to_dict(),
        }


@dataclass
class PromptSweepReport(JSONResult):
    """A VLM asked one or more prompts: one row per prompt, and each prompt against the first (paired)."""

    vlm: str
    prompts: list[PromptRun]
    differences: list[PromptDifference]
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "vlm": self.vlm,
            "prompts": [run.to_dict() for run in self.prompts],
            "differences": [difference.to_dict() for difference in self.differences],
            "abstention_rule": ABSTENTION_RULE,
            **self.details,
        }

    def table(self) -> str:
        """Shape bias, cue-conflict accuracy and abstentions per prompt; then each prompt minus the first."""
        from modelval.judgement.rows import signed_pp

        def pct(value: float) -> str:
            return "n/a" if value != value else f"{value:.2%}"

        lines = [f"{'prompt':<14} {'shape bias':>11} {'95% CI':>19} {'cue acc.':>9} {'abstentions':>11}  parser"]
        for run in self.prompts:
            r = run.result
            withheld = run.verdict.withheld
            bias = "withheld" if withheld else pct(r.shape_bias)
            interval = "" if withheld else f"[{pct(r.ci_low)}, {pct(r.ci_high)}]"
            lines.append(
                f"{run.name:<14} {bias:>11} {interval:>19} {pct(r.cue_accuracy):>9} {r.abstentions:>11}  {run.parser}"
            )
        lines += [f"{run.name}: {run.verdict.reason}; no shape bias" for run in self.prompts if run.verdict.withheld]
        for d in self.differences:
            lines.append(
                f"{d.a} - {d.b}: shape bias {signed_pp(d.shape_bias_difference)} "
                f"[{signed_pp(d.shape_bias_ci95[0])}, {signed_pp(d.shape_bias_ci95[1])}], cue accuracy "
                f"{signed_pp(d.accuracy_difference)} [{signed_pp(d.accuracy_ci95[0])}, {signed_pp(d.accuracy_ci95[1])}]"
                f" (paired, {d.resampling} resamples)"
            )
        lines.append(f"abstentions: {ABSTENTION_RULE}")
        return "\n".join(lines)


def _resolve_prompt(prompt: str) -> tuple[str, str, str]:
    """``(name, text, default parser)`` of a named prompt (``vqa16``, ``shape16``, ``texture16``, ``caption``) or
    of a prompt file (its whole text; its answers read with ``vqa``)."""
    from modelval.behaviour.answers import PROMPT_PARSERS, PROMPTS

    if prompt in PROMPTS:
        return prompt, PROMPTS[prompt], PROMPT_PARSERS[prompt]
    path = Path(prompt).expanduser()
    if not path.is_file():
        raise DataError(f"prompt {prompt!r}: not one of {', '.join(PROMPTS)} and no such file")
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"prompt file {path} cannot be read: {error}") from None
    if not text:
        raise DataError(f"prompt file {path} is empty")
    return path.stem, text, "vqa"


def vlm_shape_bias(
    vlm: str | VLM,
    prompts: Sequence[str] = ("vqa16",),
    *,
    parse: str | None = None,
    options: EvaluationOptions | None = None,
    name: str | None = None,
    run_store: RunStore | None = None,
    **settings: Any,
) -> PromptSweepReport:
    """Shape bias, cue-conflict accuracy and abstentions of a vision-language model, for each of its prompts.

    Every cue-conflict stimulus (found and verified as for any model) is shown to ``vlm`` as a PIL image with
    each prompt; each answer is parsed to one of the 16 categories or to no class (an abstention, which counts
    as neither a shape nor a texture hit). With several prompts, each later prompt is compared with the first on
    the same stimuli: the difference of the shape bias and of the accuracy, with paired bootstrap intervals.

    Parameters
    ----------
    vlm
        A callable ``(PIL.Image.Image, prompt: str) -> str``, or its spec ``file.py:fn`` / ``module.path:fn``.
    prompts
        Named prompts (``vqa16``: the paper's 16-option question; ``shape16`` and ``texture16``: the same options
        asked about the shape or the texture; ``caption``: a short caption) or prompt files.
    parse
        The parser of every prompt's answers (``vqa``, ``caption-judge``, ``caption-names``); ``None``: each
        named prompt's own (``caption-names`` for ``caption``, else ``vqa``).
    options
        The stimuli and statistics (``data_root``, ``allow_modified_stimuli``, ``bootstrap``, ``seed``,
        ``resample``) and the caches (``cache``: the answers are reused and stored, as a classifier's outputs are);
        the protocol fields of a classifier do not apply.
    name
        The name of the VLM in the report (default: the spec, or the callable's name).
    run_store
        Record each prompt's run there (``modelval runs``); ``None`` records nothing.
    **settings
        Single fields of ``options`` (``data_root=...``, ``bootstrap=0``).

    Returns
    -------
    PromptSweepReport
        ``.prompts`` (per prompt: ``.result`` with ``shape_bias``, ``cue_accuracy``, ``abstentions``; the
        answers and decisions), ``.differences`` (each prompt minus the first), ``.table()``; ``.to_dict()`` is
        ``modelval shape-bias --vlm ... --json``.

    Raises
    ------
    modelval.ModelvalError
        Missing stimuli, an unknown prompt or parser, a spec that names no callable, or a VLM that raises or
        returns something other than a string (one line each).

    Examples
    --------
    A stub VLM that answers "B" (bear) to every question but refuses the texture question, on ``SUBSET`` (the first
    two stimuli of each category: 30 conflicts, ten of them with a bear texture, one bear-shaped):

    >>> import modelval
    >>> def stub(image, prompt):
    ...     return "Sorry, I cannot tell." if "texture" in prompt else "B"
    >>> report = modelval.vlm_shape_bias(stub, ["vqa16", "texture16"], data_root=SUBSET,
    ...                                  allow_modified_stimuli=True, bootstrap=0, cache=False)
    >>> [(run.name, run.result.shape_hits, run.result.texture_hits, run.result.abstentions) for run in report.prompts]
    [('vqa16', 1, 10, 0), ('texture16', 0, 0, 30)]
    >>> round(report.differences[0].accuracy_difference, 4)  # texture16 - vqa16: every answer lost
    -0.3667
    """
    from modelval.api.loading import load_stimuli
    from modelval.behaviour.answers import abstentions_of, parse_answer, prompt_difference
    from modelval.behaviour.decisions import NO_RESPONSE, Decision
    from modelval.behaviour.resampling import resolve_unit
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.judgement.sanity import sanity_check
    from modelval.judgement.verdicts import Case, judge
    from modelval.records.answer_cache import NOT_COVERED, AnswerCache
    from modelval.records.provenance import environment
    from modelval.records.run_store import record_run
    from modelval.records.store import cache_on as caching

    options, _ = resolve_options(options, None, settings)
    resolved = _checked_request(options, prompts, parse)
    function, identity = _vlm_callable(vlm)
    label = name or identity["spec"]
    stimuli = load_stimuli(options)
    provenance = {**environment(), "vlm": identity, "stimuli": stimuli.provenance()}
    unit = resolve_unit(options.resample, cue_conflict=True)
    cache_on = caching(options.cache)
    cache_state = "on" if cache_on else "off"
    if cache_on and not identity.get("sources"):
        cache_on, cache_state = False, (
            f"off: the VLM {label} has no source file of its own to identify it by (a builtin, or a wrapper of one); "
            "its answers are not cached"
        )
    start = time.perf_counter()
    runs = []
    for prompt_name, text, default_parser in resolved:
        parser = parse or default_parser
        cache = AnswerCache(identity, text) if cache_on else None
        answers = _answers(function, label, stimuli, text, cache)
        decisions = [
            Decision(s.name, s.shape, s.texture, parse_answer(answer, parser) or NO_RESPONSE)
            for s, answer in zip(stimuli.stimuli, answers, strict=True)
        ]
        result = compute_shape_bias(decisions, n_bootstrap=options.bootstrap, seed=options.seed, resample=unit)
        assert result.abstentions == abstentions_of(decisions)
        # One judge for every observer: the sanity gate (abstentions count against the accuracy), as a model's.
        verdict = judge(Case(f"{label} ({prompt_name})", result, decisions, sanity=sanity_check(result)))
        run = PromptRun(prompt_name, text, parser, answers, decisions, result, verdict, cache.hits if cache else 0,
                        cache.check if cache else cache_state)  # fmt: skip
        runs.append(run)
        summary = {key: value for key, value in run.to_dict().items() if key not in ("text", "prompt", "parser")}
        record_run(
            run_store, "shape-bias", model=label, dataset=options.dataset, summary=jsonio.strict(summary),
            provenance={**provenance, "prompt": text, "parser": parser},
            decisions=None if verdict.withheld else {d.imagename: [d.shape, d.response] for d in decisions},
            label=f"vlm prompt={prompt_name}",
        )  # fmt: skip
    differences = [
        prompt_difference(
            run.decisions,
            runs[0].decisions,
            names=(run.name, runs[0].name),
            n_bootstrap=options.bootstrap,
            seed=options.seed,
            resample=unit,
        )
        for run in runs[1:]
    ]
    details = {
        "images": len(stimuli),
        "stimuli": stimuli.verification,
        "answer_cache": cache_state,
        "answer_cache_not_covered": NOT_COVERED,
        "seconds": round(time.perf_counter() - start, 2),
        "provenance": provenance,
    }
    return PromptSweepReport(label, runs, differences, details)


def _checked_request(
    options: EvaluationOptions, prompts: Sequence[str], parse: str | None
) -> list[tuple[str, str, str]]:
    """Each prompt's ``(name, text, default parser)``, once the dataset, the parser and the prompts were checked."""
    from modelval.behaviour.answers import PARSERS
    from modelval.datasets.registry import get_dataset

    if not get_dataset(options.dataset).has_conflicts:
        raise ModelvalError("a VLM is asked about the cue-conflict stimuli; other datasets are not supported yet")
    if parse is not None and parse not in PARSERS:
        raise DataError(f"unknown parser {parse!r}; use one of {', '.join(PARSERS)}")
    if not prompts:
        raise DataError("no prompt: give at least one (vqa16, shape16, texture16, caption, or a prompt file)")
    resolved = [_resolve_prompt(prompt) for prompt in prompts]
    names = [entry[0] for entry in resolved]
    if len(set(names)) != len(names):
        raise DataError(f"the prompts {', '.join(names)} repeat a name; each prompt once")
    return resolved


def _answers(function: VLM, label: str, stimuli: Any, text: str, cache: Any) -> list[str]:
    """The VLM's answer to ``text`` on each stimulus: from the answer cache where stored and confirmed (a few stored
    ones asked again agree, :mod:`modelval.records.answer_cache`), else asked (and kept)."""
    digests = stimuli.digests or {}
    keys = [(stimulus.relpath, digests.get(stimulus.relpath, stimulus.relpath)) for stimulus in stimuli.stimuli]
    fresh: dict[int, str] = {}
    if cache is not None:
        stored = [index for index, (relpath, digest) in enumerate(keys) if cache.stored(relpath, digest) is not None]
        for index in cache.sample(stored):
            fresh[index] = _ask(function, label, stimuli.images[index], text, keys[index][0])
        cache.confirm({keys[index][0]: (keys[index][1], answer) for index, answer in fresh.items()})
    answers = []
    for index, (relpath, digest) in enumerate(keys):
        answer = fresh.get(index)
        if answer is None and cache is not None:
            answer = cache.get(relpath, digest)
        if answer is None:
            answer = _ask(function, label, stimuli.images[index], text, relpath)
            if cache is not None:
                cache.put(relpath, digest, answer)
        answers.append(answer)
    if cache is not None:
        cache.flush()
    return answers


def _source_files(function: Any) -> dict[str, str]:
    """``path -> SHA-256`` of the files that define a VLM: its function's, or its class's for a wrapper object (a
    ``functools.partial`` is its function's); none for what the standard library or a builtin defines."""
    import functools
    import inspect
    import sysconfig

    from modelval.download import sha256_of

    target = function.func if isinstance(function, functools.partial) else function
    library = {os.path.realpath(sysconfig.get_paths()[name]) for name in ("stdlib", "platstdlib")}
    files: dict[str, str] = {}
    for candidate in (target, type(target)):
        try:
            where = inspect.getsourcefile(candidate)
        except TypeError:  # a builtin, or an instance: its class is tried next
            continue
        if where is None or not os.path.isfile(where) or where in files:
            continue
        if any(os.path.realpath(where).startswith(folder + os.sep) for folder in library):
            continue  # functools.partial's class says nothing of the VLM
        files[where] = sha256_of(where)
    return files


def _vlm_callable(vlm: str | VLM) -> tuple[VLM, dict[str, Any]]:
    """The callable and its identity (spec, name, the SHA-256 of its source files; ``sources`` empty: none)."""
    import inspect

    if isinstance(vlm, str):
        from modelval.models.files import import_callable

        function, named = import_callable(vlm)
        return function, {**named, "sources": _source_files(function)}
    if not callable(vlm):
        raise ModelvalError(f"vlm must be a callable (image, prompt) -> str or its spec, not {type(vlm).__name__}")
    qualname = getattr(vlm, "__qualname__", type(vlm).__qualname__)
    identity: dict[str, Any] = {"spec": qualname, "callable": qualname, "sources": _source_files(vlm)}
    try:
        where = inspect.getsourcefile(vlm)
    except TypeError:
        where = None
    if where is not None and where in identity["sources"]:
        identity.update(file=where, sha256=identity["sources"][where])
    return vlm, identity


def _ask(function: VLM, label: str, image: Any, prompt: str, stimulus: str) -> str:
    """One answer: the uint8 (3, H, W) image as a PIL RGB image, the prompt; a string back, or one error line."""
    from PIL import Image

    picture = Image.fromarray(image.permute(1, 2, 0).contiguous().numpy(), mode="RGB")
    with user_code(f"the VLM {label} (on {stimulus})"):
        answer = function(picture, prompt)
    if not isinstance(answer, str):
        raise ModelvalError(f"the VLM {label} returned {type(answer).__name__} for {stimulus}; a VLM returns a string")
    return answer


def prompt_search(path: str | os.PathLike[str], *, model: str | None = None) -> list[PromptSearchRow]:
    """The published prompt-search table of Gavrikov et al. (``prompt_search_results.csv``), optionally one model's.

    Parameters
    ----------
    path
        The CSV file (``Model, accuracy, shape_bias, prompt``).
    model
        Keep only this model's rows (``llava_1_6_vicuna_7b``, ``internvl_chat``, ...).

    Returns
    -------
    list of PromptSearchRow
        ``model``, ``prompt``, ``accuracy`` and ``shape_bias`` per row; plot them with
        :func:`modelval.figures.shape_bias.plot_prompt_search`.

    Examples
    --------
    >>> import modelval
    >>> rows = modelval.prompt_search(VLM_SHAPEBIAS / "prompt_search_results.csv", model="internvl_chat")
    >>> len(rows), round(max(row.shape_bias for row in rows), 3)
    (81, 0.822)
    """
    from modelval.behaviour.answers import read_prompt_search

    rows = read_prompt_search(path)
    if model is not None:
        known = sorted({row.model for row in rows})
        rows = [row for row in rows if row.model == model]
        if not rows:
            raise DataError(f"{path}: no rows of the model {model!r}; it has {', '.join(known)}")
    return rows
