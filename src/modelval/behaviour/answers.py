"""What a vision-language model's answer means: free text -> one of the 16 categories, or no class.

A VLM does not give 16 scores; it answers a question in words. Gavrikov et al. (ICLR 2025, "Can We Talk
Models Into Seeing the World Differently?", github.com/paulgavrikov/vlm_shapebias) asked VLMs which of the
16 categories, offered as options A-P in alphabetical order, best describes each cue-conflict stimulus
(*VQA*), or asked for a short caption and had an LLM judge name the categories it mentions (*captioning*).
Their published response files (``image, response, pred_label, ...``, one row per stimulus, the image name
without folder and without ``.png``) read here as :class:`~modelval.behaviour.decisions.Decision` lists:

- by ``pred_label`` as published (the authors' own parse; ``None`` is no class), or
- by re-parsing the raw ``response`` column with one of :data:`PARSERS`:

  ``vqa``
      The authors' rule (their ``clf_vqa.py``): drop one trailing ``.``; keep what follows ``The answer is ``
      or ``Answer: ``; strip; a bare category name is that category; ``BLOCKED`` (refused) is no class;
      otherwise the first character is the option letter when the second is one of ``.`` ``)`` ``,`` ``:``,
      a space or a full-width colon (or the answer is the letter alone); anything else is no class.
  ``caption-judge``
      The LLM judge's letters (the ``pred_llm_judge`` column of a captioning file, or any answer in that
      form): ``X`` or no letter is no class, exactly one category is that category, and *several*
      categories (``H, I``, ``G. car\\nP. truck``, ``DI``) are no class too: the caption names more than
      one, and picking one of them would be a decision the model never made. An item may write the name
      beside its letter (``E. boat``, ``E) boat``, ``E (boat)``, ``Boat (E)``); a name that is one of the 16
      counts as a category of its own, so a letter and a name that **contradict** each other
      (``E. elephant``: E is boat) name two categories and are no class, for the same reason (the judge
      said both). ``Truck (P)`` is truck. A name that is not one of the 16 (``G. automobile``) leaves the
      letter alone; an item that is neither a letter A-P, a run of them, nor a category name (the judge's
      ``T``, ``Water Truck``) names nothing and is skipped.
  ``caption-names``
      A caption read directly, for a VLM of your own without a judge: the one category whose name (or
      plural) the caption contains as a word; none or several are no class.

**Abstentions.** An answer with no class is an *abstention* (written ``na`` in a decision file, as a human's
missing answer is). It counts as neither a shape nor a texture hit: the shape bias (shape hits / (shape +
texture hits)) leaves it out, and the cue-conflict accuracy ((shape + texture hits) / conflict stimuli) is
over *all* conflict stimuli, so abstaining lowers the accuracy and never the shape bias. The number of
abstentions is reported beside every shape bias.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.decisions import NO_RESPONSE, Decision, reading_csv
from modelval.errors import DataError

#: The options of the paper's VQA question: the 16 categories in alphabetical order, A to P.
OPTIONS: dict[str, str] = dict(zip("ABCDEFGHIJKLMNOP", CATEGORIES, strict=True))

#: How the raw answers can be read (see the module docstring); ``None`` takes ``pred_label`` as published.
PARSERS: tuple[str, ...] = ("vqa", "caption-judge", "caption-names")

#: The published columns (the first one is required, and one of the others).
RESPONSE_COLUMNS: tuple[str, ...] = ("image", "response", "pred_label", "pred_llm_judge")

_OPTION_LINES = "\n".join(f"{letter}. {name}" for letter, name in OPTIONS.items())
_ANSWER = "Answer with the option's letter from the given choices directly."

#: Named prompts of a VLM run (``--prompt NAME``); a prompt file gives one prompt of your own.
PROMPTS: dict[str, str] = {
    # Gavrikov et al.'s VQA question
    "vqa16": f"Which option best describes the image?\n{_OPTION_LINES}\n{_ANSWER}",
    # steering prompts in the spirit of the paper's: the same options, asked about shape or texture
    "shape16": f"Identify the primary shape in the image.\n{_OPTION_LINES}\n{_ANSWER}",
    "texture16": f"Identify the primary texture in the image.\n{_OPTION_LINES}\n{_ANSWER}",
    # the paper's captioning question
    "caption": "Describe the image. Keep your response short.",
}

#: The parser each named prompt's answers need; a prompt file's answers are read with ``vqa`` unless told.
PROMPT_PARSERS: dict[str, str] = {"vqa16": "vqa", "shape16": "vqa", "texture16": "vqa", "caption": "caption-names"}

_LETTER_FOLLOWERS = (".", ")", ",", ":", " ", "\uff1a")  # the last is the full-width colon


def parse_vqa(response: str) -> str | None:
    """The category a VQA answer names (Gavrikov et al.'s rule, see the module docstring), or ``None``.

    Parameters
    ----------
    response
        The VLM's answer.

    Examples
    --------
    >>> from modelval.behaviour.answers import parse_vqa
    >>> parse_vqa("K. dog."), parse_vqa("J."), parse_vqa("The answer is H"), parse_vqa("truck")
    ('dog', 'clock', 'cat', 'truck')
    >>> parse_vqa("BLOCKED"), parse_vqa("Sorry, no."), parse_vqa("Q")
    (None, None, None)

    The rule is literal: an answer that starts with a letter and a space is that option.

    >>> parse_vqa("I cannot tell")
    'chair'
    """
    option = response
    if option.endswith("."):
        option = option[:-1]
    if "The answer is " in option:
        option = option.split("The answer is ")[-1]
    if "Answer: " in option:
        option = option.split("Answer: ")[-1]
    option = option.strip()
    if option.lower() in CATEGORIES:
        return option.lower()
    if option == "BLOCKED":
        return None
    letter = option.upper().strip()
    if len(letter) > 1 and letter[0] in OPTIONS and letter[1] in _LETTER_FOLLOWERS:
        letter = letter[0]
    return OPTIONS.get(letter)


_JUDGE_ITEM = re.compile(r"^([A-P])\s*(?:[.):\uff1a]\s*([a-z ]*)|\s\(\s*([a-z ]+?)\s*\))?$", re.IGNORECASE)
#: ``Truck (P)``: a name, then its letter in brackets.
_NAMED_LETTER = re.compile(r"^([a-z ]+?)\s*\(\s*([A-P])\s*\)$", re.IGNORECASE)
_LETTER_RUN = re.compile(r"^[A-P]{2,16}$")


def _judge_categories(letters: str) -> tuple[str, ...]:
    """The categories an LLM judge's answer names (``"H, I"`` -> cat, chair; ``"X"`` -> none), in order.

    Items are separated by commas, semicolons or line breaks; an item is an option letter (``I``, ``I.``,
    ``I. chair``, ``I (chair)``, ``Chair (I)``), a run of letters (``DI``) or a bare category name; anything else
    (``X``, prose) names none. A written name that is one of the 16 names its category beside the letter's, so
    ``E. elephant`` names boat and elephant (see the module docstring).
    """
    found: list[str] = []
    for item in re.split(r"[,;\n]+", letters):
        item = item.strip().rstrip(".").strip()
        if not item:
            continue
        names: list[str] = []
        if item.lower() in CATEGORIES:
            names = [item.lower()]
        elif _LETTER_RUN.match(item):
            names = [OPTIONS[c] for c in item]
        elif match := _JUDGE_ITEM.match(item):
            written = (match.group(2) or match.group(3) or "").strip().lower()
            names = [OPTIONS[match.group(1).upper()], *([written] if written in CATEGORIES else [])]
        elif match := _NAMED_LETTER.match(item):
            written = match.group(1).strip().lower()
            names = [OPTIONS[match.group(2).upper()], *([written] if written in CATEGORIES else [])]
        found += [name for name in dict.fromkeys(names) if name not in found]
    return tuple(found)


def parse_caption_judge(letters: str) -> str | None:
    """The one category an LLM judge's letters name; ``None`` for ``X``, nothing, or several categories.

    Parameters
    ----------
    letters
        The judge's letters.

    Examples
    --------
    >>> from modelval.behaviour.answers import parse_caption_judge
    >>> parse_caption_judge("I"), parse_caption_judge("F. bottle"), parse_caption_judge("X")
    ('chair', 'bottle', None)
    >>> parse_caption_judge("H, I"), parse_caption_judge("DI")  # several: no class
    (None, None)
    >>> parse_caption_judge("Truck (P)"), parse_caption_judge("E. elephant")  # E is boat: two categories
    ('truck', None)
    """
    found = _judge_categories(letters)
    return found[0] if len(found) == 1 else None


def _caption_categories(caption: str) -> tuple[str, ...]:
    """The categories whose name (or plural, ``-s``/``-es``) a caption contains as a word, in the order of the 16."""
    words = set(re.findall(r"[a-z]+", caption.lower()))
    return tuple(c for c in CATEGORIES if c in words or f"{c}s" in words or f"{c}es" in words)


def _parse_caption_names(caption: str) -> str | None:
    """The one category a caption names as a word; ``None`` when it names none or several.

    Examples
    --------
    >>> from modelval.behaviour.answers import _parse_caption_names
    >>> _parse_caption_names("A blurry photo of a bicycle."), _parse_caption_names("Two cats on a chair.")
    ('bicycle', None)
    """
    found = _caption_categories(caption)
    return found[0] if len(found) == 1 else None


def parse_answer(answer: str, parser: str) -> str | None:
    """``answer`` read with the named parser (:data:`PARSERS`): a category or ``None`` (no class).

    Parameters
    ----------
    answer
        The VLM's answer.
    parser
        One of :data:`PARSERS`.
    """
    if parser == "vqa":
        return parse_vqa(answer)
    if parser == "caption-judge":
        return parse_caption_judge(answer)
    if parser == "caption-names":
        return _parse_caption_names(answer)
    raise DataError(f"unknown parser {parser!r}; use one of {', '.join(PARSERS)}")


def is_response_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a CSV in the published response format (an ``image`` column, no ``imagename``).

    Parameters
    ----------
    path
        A CSV file.
    """
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return "image" in header and "imagename" not in header


def read_responses(path: str | os.PathLike[str], *, parse: str | None = None) -> list[Decision]:
    """The decisions of a published VLM / CLIP response file (Gavrikov et al.'s ``raw-data`` format).

    Parameters
    ----------
    path
        The CSV file (``image, response, pred_label, ...``; ``image`` without folder or ``.png``).
    parse
        ``None`` (the default) takes ``pred_label`` as published (``None``, empty or not one of the 16 is no
        class); ``"vqa"`` and ``"caption-names"`` re-parse ``response``; ``"caption-judge"`` reads
        ``pred_llm_judge`` when the file has it, else ``response`` (see the module docstring).

    Returns
    -------
    list of Decision
        One per row, in the file's order, ``imagename`` with ``.png``; no class is the response ``"na"``;
        ``answer`` is the text the class was read from.

    Raises
    ------
    modelval.errors.DataError
        A missing file or column, an image name that is no cue-conflict stimulus, two rows for one image,
        an unknown parser, or no rows (one line naming the file).

    Examples
    --------
    GPT-4V's published VQA answers: 131 of the 1,280 have no class.

    >>> from modelval.behaviour.answers import read_responses
    >>> decisions = read_responses(VLM_SHAPEBIAS / "vlm/vqa/20240228_002836_openai_vision.csv")
    >>> len(decisions), sum(d.response == "na" for d in decisions)
    (1280, 131)
    """
    path = Path(path)
    if parse is not None and parse not in PARSERS:
        raise DataError(f"unknown --parse {parse!r}; use one of {', '.join(PARSERS)}")
    with reading_csv(path, what="response file") as reader:
        columns = list(reader.fieldnames or [])
        if "image" not in columns:
            raise DataError(
                f"{path}: no 'image' column; a published response file has {', '.join(RESPONSE_COLUMNS[:3])}, ..."
            )
        source = "pred_label" if parse is None else "response"
        if parse == "caption-judge" and "pred_llm_judge" in columns:
            source = "pred_llm_judge"
        if source not in columns:
            raise DataError(f"{path}: no {source!r} column to read the answers from (it has {', '.join(columns)})")
        rows = []
        seen: dict[str, int] = {}
        for line, row in enumerate(reader, start=2):
            if None in row or None in row.values():
                raise DataError(f"{path}, line {line}: the row has more or fewer fields than the header")
            image = (row["image"] or "").strip()
            name = image if image.endswith(".png") else f"{image}.png"
            try:
                shape, texture = parse_stimulus_name(name)
            except DataError as error:
                raise DataError(f"{path}, line {line}: {error}") from None
            first = seen.setdefault(name, line)
            if first != line:
                raise DataError(f"{path}: two rows for the image {image!r} (lines {first} and {line})")
            answer = row[source] or ""
            label = (answer.strip() if parse is None else parse_answer(answer, parse)) or NO_RESPONSE
            response = label if label in CATEGORIES else NO_RESPONSE
            rows.append(Decision(name, shape, texture, response, answer=answer))
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def abstentions_of(decisions: Sequence[Decision]) -> int:
    """How many conflict stimuli got no class (``na``): neither a shape nor a texture hit.

    Parameters
    ----------
    decisions
        The decisions.
    """
    return sum(d.is_conflict and d.response == NO_RESPONSE for d in decisions)


@dataclass(frozen=True)
class PromptSearchRow:
    """One row of the paper's automated prompt search: a model, the instruction, its accuracy and shape bias."""

    model: str
    prompt: str
    accuracy: float
    shape_bias: float


def read_prompt_search(path: str | os.PathLike[str]) -> list[PromptSearchRow]:
    """The published prompt-search table (``prompt_search_results.csv``: ``Model, accuracy, shape_bias, prompt``).

    Parameters
    ----------
    path
        The file.

    Examples
    --------
    >>> from modelval.behaviour.answers import read_prompt_search
    >>> rows = read_prompt_search(VLM_SHAPEBIAS / "prompt_search_results.csv")
    >>> len(rows), sorted({row.model for row in rows})[0]
    (367, 'internvl_chat')
    """
    path = Path(path)
    rows = []
    with reading_csv(path, what="prompt-search table") as reader:
        missing = [c for c in ("Model", "accuracy", "shape_bias", "prompt") if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} of the published prompt-search table")
        for line, row in enumerate(reader, start=2):
            try:
                accuracy, bias = float(row["accuracy"]), float(row["shape_bias"])
            except (TypeError, ValueError):
                raise DataError(f"{path}, line {line}: accuracy and shape_bias must be numbers") from None
            rows.append(PromptSearchRow(row["Model"], row["prompt"], accuracy, bias))
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


@dataclass(frozen=True)
class PromptDifference:
    """Prompt A - prompt B on the same conflict stimuli: shape bias and cue-conflict accuracy, paired intervals."""

    a: str
    b: str
    images: int
    shape_bias_difference: float
    shape_bias_ci95: tuple[float, float]
    accuracy_difference: float
    accuracy_ci95: tuple[float, float]
    abstentions_difference: int
    resampling: str
    n_bootstrap: int
    seed: int

    def to_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "images": self.images,
            "shape_bias_difference": self.shape_bias_difference,
            "shape_bias_ci95": list(self.shape_bias_ci95),
            "cue_accuracy_difference": self.accuracy_difference,
            "cue_accuracy_ci95": list(self.accuracy_ci95),
            "abstentions_difference": self.abstentions_difference,
            "ci95_method": f"paired percentile bootstrap, {self.n_bootstrap} resamples, seed {self.seed}, "
            f"unit {self.resampling}: the same resamples for both prompts",
        }


def prompt_difference(
    a: Sequence[Decision],
    b: Sequence[Decision],
    *,
    names: tuple[str, str] = ("A", "B"),
    n_bootstrap: int = 1000,
    seed: int = 0,
    resample: str = "texture",
) -> PromptDifference:
    """A - B of the shape bias and of the cue-conflict accuracy of two prompts' decisions on the same stimuli.

    Both intervals come from one set of bootstrap weights over the shared conflict stimuli (by default the
    texture images they were made from, :mod:`modelval.behaviour.resampling`), applied to both prompts.

    Parameters
    ----------
    a
        Prompt A's decisions.
    b
        Prompt B's decisions on the same stimuli.
    names
        The stimuli's file names, in the order of the values.
    n_bootstrap
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resamples.
    resample
        The bootstrap's unit (``None``: texture images).
    """
    import numpy as np

    from modelval.behaviour.resampling import bootstrap_weights, percentile_interval, resampling_for, weighted_ratio

    left = {d.stimulus_name: d for d in a if d.is_conflict}
    right = {d.stimulus_name: d for d in b if d.is_conflict}
    if set(left) != set(right):
        raise DataError(
            f"prompts {names[0]!r} and {names[1]!r} were answered on different stimuli "
            f"({len(set(left) ^ set(right))} differ); a paired comparison needs the same ones"
        )
    images = sorted(left)
    shape_a = np.array([left[i].response == left[i].shape for i in images])
    hits_a = shape_a | np.array([left[i].response == left[i].texture for i in images])
    shape_b = np.array([right[i].response == right[i].shape for i in images])
    hits_b = shape_b | np.array([right[i].response == right[i].texture for i in images])
    ones = np.ones(len(images))

    def ratio(num: np.ndarray, den: np.ndarray) -> float:
        return float(num.sum() / den.sum()) if den.sum() else float("nan")

    bias, accuracy = [], []
    for weights in bootstrap_weights(len(images), resampling_for(images, resample), n_bootstrap=n_bootstrap, seed=seed):
        bias.append(weighted_ratio(weights, shape_a, hits_a) - weighted_ratio(weights, shape_b, hits_b))
        accuracy.append(weighted_ratio(weights, hits_a, ones) - weighted_ratio(weights, hits_b, ones))
    nan = (float("nan"), float("nan"))
    return PromptDifference(
        a=names[0],
        b=names[1],
        images=len(images),
        shape_bias_difference=ratio(shape_a, hits_a) - ratio(shape_b, hits_b),
        shape_bias_ci95=percentile_interval(np.concatenate(bias)) if bias else nan,
        accuracy_difference=ratio(hits_a, ones) - ratio(hits_b, ones),
        accuracy_ci95=percentile_interval(np.concatenate(accuracy)) if accuracy else nan,
        abstentions_difference=abstentions_of(list(left.values())) - abstentions_of(list(right.values())),
        resampling=resample,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
