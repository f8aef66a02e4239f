"""The answer cache: a vision-language model's text answers, keyed by model, prompt and stimulus.

A VLM answers slowly and in text: one JSON file per (model, prompt) pair, ``<cache folder>/answers/<key>.json``,
by the rules every cache keeps (:mod:`modelval.records.store`). It maps each stimulus (its relative path and the
SHA-256 of its bytes) to the answer, so a stimulus whose bytes change is asked again; a file is served only when
its record names this model and prompt. It is rewritten whole every :data:`FLUSH_EVERY` answers and at the end.
The model's identity is the caller's (for a VLM: the spec, the callable's name and the SHA-256 of the files that
define it, :func:`modelval.api.vlm._vlm_callable`).

Why the key alone is not trusted: a VLM is usually a wrapper object whose checkpoint is an argument, an
environment variable or a helper module, none of which a digest of its file sees. So, as the output cache runs
its probe, an answer file is served only when

- **its digest holds**: the record keeps the SHA-256 of its answers (:data:`ANSWERS_DIGEST`); a file edited by
  hand fails it and is removed, never served;
- **the VLM, asked again, agrees**: before stored answers are used, :data:`RECHECK` of them, drawn at random
  from the operating system's entropy (a different draw every run, so no fixed set of stimuli can be dodged),
  are asked again (:meth:`AnswerCache.sample`, :meth:`AnswerCache.confirm`); one answer that differs discards
  every stored answer of the pair and the VLM is asked all of them. A VLM that samples (temperature above 0)
  thus never reuses answers, which is right: its answers cannot be shown to be the same.

What remains uncovered (:data:`NOT_COVERED`, in the run's JSON and docs/provenance.md): a change the key does not
see whose effect avoids the re-asked stimuli of every run that follows it.

The store keeps its size limit whenever a pair is opened, not only when one is written: a run that reads every
answer from the cache still evicts the least recently used files of other pairs.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from typing import Any, TypeVar

from modelval.errors import ModelvalError
from modelval.records.store import Store, key_of, read_record

#: Answers written to disk at least this often during a run (an interrupted run loses fewer).
FLUSH_EVERY = 16
#: Stored answers asked again before the others are served: each costs one VLM call per prompt and run.
RECHECK = 3
#: The record's field holding the SHA-256 of its answers (canonical JSON).
ANSWERS_DIGEST = "answers_sha256"
#: What the answer cache cannot show, stated in the run's JSON (``answer_cache_not_covered``).
NOT_COVERED = (
    "stored answers are keyed by the VLM's spec, name and source files, the prompt and each stimulus's bytes, and "
    f"served only after {RECHECK} of them, drawn at random each run, were asked again and agreed; a change the key "
    "cannot see (a wrapper's argument, an environment variable, a helper module, a checkpoint file) is caught only "
    "when it changes an answer on the re-asked stimuli"
)

T = TypeVar("T")


class AnswerStore(Store):
    """The answer files: ``<key>.json``, one per (model, prompt) pair."""

    folder = "answers"
    what = "VLM answer file"


class AnswerCache:
    """Answers of one (model, prompt) pair: ``get(stimulus, digest)``, ``put(...)``, ``flush()``.

    Parameters
    ----------
    model
        The model's identity (JSON-ready).
    prompt
        The prompt's text.
    root
        The store's folder (default: ``<cache folder>/answers``).
    max_bytes
        The store's size limit (default: ``$MODELVAL_CACHE_SIZE``).
    """

    def __init__(
        self,
        model: dict[str, Any],
        prompt: str,
        root: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
    ) -> None:
        self.store = AnswerStore(root, max_bytes=max_bytes)
        self.key = key_of({"model": model, "prompt": prompt})
        self.path = self.store.root / f"{self.key}.json"
        self.meta = {"key": self.key, "model": model, "prompt": prompt}
        self.answers: dict[str, dict[str, str]] = {}
        self.hits = 0
        #: What the check of the stored answers found, in words (the run's ``answer_cache_check``).
        self.check = "no stored answers"
        self._pending = 0
        self._load(model, prompt)
        self.store.evict()  # bounded even when this run writes nothing

    def _load(self, model: dict[str, Any], prompt: str) -> None:
        try:
            record = read_record(self.path, self.key)
        except (OSError, ValueError):
            return  # no entry yet, or a damaged or foreign one: asked again
        answers = record.get("answers")
        # the record must name this model and prompt: a file that does not is not this pair's
        if record.get("model") != model or record.get("prompt") != prompt or not isinstance(answers, dict):
            return
        if record.get(ANSWERS_DIGEST) != key_of(answers):
            self.path.unlink(missing_ok=True)  # edited by hand (or by a writer before digests): never served
            self.check = "the stored answer file failed its digest (edited?): removed, every answer asked again"
            return
        self.answers = answers
        self.store.touch(self.path)

    def stored(self, stimulus: str, digest: str) -> str | None:
        """The stored answer for this stimulus with these bytes, or ``None`` (not counted as a hit).

        Parameters
        ----------
        stimulus
            The stimulus's relative path.
        digest
            The SHA-256 of its bytes.
        """
        stored = self.answers.get(stimulus)
        if isinstance(stored, dict) and stored.get("sha256") == digest and isinstance(stored.get("answer"), str):
            return stored["answer"]
        return None

    @staticmethod
    def sample(candidates: Sequence[T], count: int = RECHECK) -> list[T]:
        """Up to ``count`` of ``candidates`` (the stimuli with a stored answer), drawn from the system's entropy.

        Parameters
        ----------
        candidates
            The stimuli whose stored answers could be served.
        count
            How many to ask again.
        """
        # Not seeded on purpose: a fixed draw is a set of stimuli a changed VLM could avoid run after run.
        return random.SystemRandom().sample(list(candidates), min(count, len(candidates)))

    def confirm(self, fresh: dict[str, tuple[str, str]]) -> bool:
        """Compare the answers just asked again with the stored ones: all agree, or every stored answer goes.

        Parameters
        ----------
        fresh
            ``stimulus -> (digest, the answer asked now)`` of the sampled stimuli.
        """
        if not fresh:
            return True
        differ = [stimulus for stimulus, (digest, answer) in fresh.items() if self.stored(stimulus, digest) != answer]
        if not differ:
            self.check = f"{len(fresh)} stored answers asked again, all agreed: the stored answers served"
            return True
        self.check = (
            f"{len(fresh)} stored answers asked again, {len(differ)} answered otherwise: the VLM is not the one "
            "that stored them; every stored answer discarded and asked again"
        )
        self.answers = {}
        self.path.unlink(missing_ok=True)
        for stimulus, (digest, answer) in fresh.items():
            self.put(stimulus, digest, answer)
        return False

    def get(self, stimulus: str, digest: str) -> str | None:
        """The stored answer for this stimulus with these bytes, or ``None``; a hit is counted.

        Parameters
        ----------
        stimulus
            The stimulus's relative path.
        digest
            The SHA-256 of its bytes.
        """
        answer = self.stored(stimulus, digest)
        self.hits += answer is not None
        return answer

    def put(self, stimulus: str, digest: str, answer: str) -> None:
        """Keep an answer (written with the next :meth:`flush`, at the latest after :data:`FLUSH_EVERY`).

        Parameters
        ----------
        stimulus
            The stimulus's relative path.
        digest
            The SHA-256 of its bytes.
        answer
            The model's text.
        """
        self.answers[stimulus] = {"sha256": digest, "answer": answer}
        self._pending += 1
        if self._pending >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the answers whole; a write that fails leaves the cache as it was."""
        if not self._pending:
            return
        record = {**self.meta, "answers": self.answers, ANSWERS_DIGEST: key_of(self.answers)}
        text = json.dumps(record, sort_keys=True) + "\n"
        try:
            self.store.write(self.path, lambda handle: handle.write(text.encode()))
        except (OSError, ModelvalError):
            return
        self._pending = 0
        self.store.evict()
