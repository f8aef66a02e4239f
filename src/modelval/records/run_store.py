"""The run store: every run recorded in an embedded SQLite database, so two runs can be compared later.

A nightly job asks "what changed since last night?", a researcher "why does today's number differ from
last week's?". Each run (``shape-bias``, ``accuracy``, ``humans``, ``sensitivity``, ``rescore``, each case
of ``validate`` and of the pytest plugin, ``baseline compare``) is one row: its headline numbers, its
per-image decisions and its provenance record (docs/provenance.md). :mod:`~modelval.records.run_diff` says
which numbers moved, which decisions flipped (per category), and which provenance fields differ.

Location: ``$MODELVAL_RUNS_DB``, else ``runs.sqlite`` in the per-user data folder
(``platformdirs.user_data_dir("modelval")``); ``MODELVAL_NO_RUN_STORE=1`` records nothing. Recording is the
caller's choice: the command line and the pytest plugin pass the store to the front door, a library call records
nothing unless it is given one (as lm-evaluation-harness passes its ``evaluation_tracker`` in). SQLite in WAL
mode with a busy timeout: concurrent runs (pytest-xdist workers, Ray tasks, two shells) each add their row.
A run that cannot be recorded (read-only folder, full disk) is still reported, with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelval import jsonio, settings
from modelval.errors import DataError
from modelval.parsing import IntRange

RUNS_DB_ENV = settings.SETTINGS["runs_db"].env
SCHEMA_VERSION = 1

#: Provenance fields that differ between any two runs and say nothing about why numbers moved.
VOLATILE = frozenset(
    {"created", "command", "output_cache", "output_cache_key", "threads", "batch_size", "root", "session"}
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    command TEXT NOT NULL,
    model TEXT,
    dataset TEXT,
    label TEXT,
    summary TEXT NOT NULL,
    decisions TEXT,
    provenance TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_model ON runs (model, command, id);
"""


class RunStoreWarning(UserWarning):
    """A run could not be recorded (the result itself is fine)."""


def default_runs_db() -> Path:
    """``$MODELVAL_RUNS_DB`` (or the config file's ``runs_db``), else ``runs.sqlite`` in the user data folder."""
    override = settings.value("runs_db")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("modelval", appauthor=False)) / "runs.sqlite"


@dataclass
class RunRecord:
    """One recorded run."""

    id: int
    created: str
    command: str
    model: str | None
    dataset: str | None
    label: str | None
    summary: dict[str, Any]
    #: image name -> [category, response] (``None`` when the run kept no decisions)
    decisions: dict[str, list[str]] | None
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, *, decisions: bool = False) -> dict[str, Any]:
        """The record, JSON-ready.

        Parameters
        ----------
        decisions
            Also the per-image decisions (large).
        """
        payload = {
            "id": self.id,
            "created": self.created,
            "command": self.command,
            "model": self.model,
            "dataset": self.dataset,
            "label": self.label,
            "summary": self.summary,
            "provenance": self.provenance,
        }
        if decisions:
            payload["decisions"] = self.decisions
        return payload


class RunStore:
    """The SQLite file of recorded runs (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_runs_db()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=30.0)
        except (OSError, sqlite3.Error) as error:
            raise DataError(f"run store {self.path}: cannot open it ({error})") from None
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise DataError(f"run store {self.path}: schema version {version}; this modelval reads "
                                f"{SCHEMA_VERSION} (set {RUNS_DB_ENV} to another file)")  # fmt: skip
            connection.executescript(_SCHEMA)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            yield connection
            connection.commit()
        except sqlite3.DatabaseError as error:
            raise DataError(f"run store {self.path}: {error} (not a modelval run store?)") from None
        finally:
            connection.close()

    def record(
        self,
        command: str,
        *,
        model: str | None,
        dataset: str | None,
        summary: Mapping[str, Any],
        provenance: Mapping[str, Any],
        decisions: Mapping[str, Sequence[str]] | None = None,
        label: str | None = None,
    ) -> int:
        """Add a run; its id.

        Parameters
        ----------
        command
            The command that produced the run (``shape-bias``, ``baseline``, ...).
        model
            The model (or observer) it ran.
        dataset
            The stimulus set.
        summary
            Its numbers and verdict.
        provenance
            What produced it.
        decisions
            Per image, ``[shape, response]``.
        label
            What tells two runs of one command and model apart (the protocol).
        """
        created = str(provenance.get("created") or "")
        with self._connect() as connection:
            cursor = connection.execute(
                "INSERT INTO runs (created, command, model, dataset, label, summary, decisions, provenance) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    created, command, model, dataset, label, jsonio.dumps(dict(summary)),
                    None if decisions is None else json.dumps({k: list(v) for k, v in decisions.items()}),
                    jsonio.dumps(dict(provenance)),
                ),
            )  # fmt: skip
            return int(cursor.lastrowid or 0)

    def runs(
        self,
        *,
        model: str | None = None,
        command: str | None = None,
        limit: int = 20,
        skipped: Callable[[str], None] | None = None,
    ) -> list[RunRecord]:
        """The newest runs first (``limit`` of them), optionally of one model and command.

        A row modelval did not write is left out, and said so: to ``skipped`` (a function taking the one-line
        reason), else as a :class:`RunStoreWarning`.

        Parameters
        ----------
        model
            Only this model's runs.
        command
            Only this command's runs.
        limit
            At most this many.
        skipped
            Told the reason of each row left out.
        """
        query, values = "SELECT * FROM runs", []
        conditions = []
        if model is not None:
            conditions.append("model = ?")
            values.append(model)
        if command is not None:
            conditions.append("command = ?")
            values.append(command)
        if conditions:
            query += " WHERE " + " AND ".join(conditions)
        query += " ORDER BY id DESC LIMIT ?"
        values.append(str(RUN_LIMIT.check(limit, "limit")))
        with self._connect() as connection:
            rows = connection.execute(query, values).fetchall()
        records = []
        for row in rows:
            try:
                records.append(_record(row, self.path))
            except DataError as error:  # one foreign row does not hide the others
                if skipped is not None:
                    skipped(f"{error}; it is left out")
                else:
                    warnings.warn(f"{error}; it is left out", RunStoreWarning, stacklevel=2)
        return records

    def get(self, run_id: int) -> RunRecord:
        """Run ``run_id``; an unknown id is one DataError line.

        Parameters
        ----------
        run_id
            The run's id (``modelval runs list`` shows them).
        """
        _check_run_id(run_id)
        with self._connect() as connection:
            row = connection.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise DataError(f"no run {run_id} in {self.path} (`modelval runs list` shows the ids)")
        return _record(row, self.path)

    def window(self, command: str, *, since: str, until: int, session: str | None = None) -> list[RunRecord]:
        """The runs of ``command`` created at ``since`` (an ISO time, UTC as recorded) or later, up to run id
        ``until``, oldest first, and of one ``session`` (``provenance.session``) when given: one nightly's records,
        without their per-image decisions (a nightly of 1,300 models would read gigabytes). A row modelval did not
        write is a :class:`DataError`.

        Parameters
        ----------
        command
            The command.
        since
            The earliest creation time (ISO, UTC).
        until
            The last run id.
        session
            Only this session's runs.
        """
        query = f"SELECT {WITHOUT_DECISIONS} FROM runs WHERE command = ? AND created >= ? AND id <= ?"
        values: list[object] = [command, since, until]
        if session is not None:
            query += " AND json_extract(provenance, '$.session') = ?"
            values.append(session)
        with self._connect() as connection:
            rows = connection.execute(query + " ORDER BY id", values).fetchall()
        return [_record(row, self.path) for row in rows]

    def history(self, command: str, *, until: int) -> list[RunRecord]:
        """Every run of ``command`` up to run id ``until``, oldest first, without their per-image decisions (a
        trend over many nights reads thousands of records; their decisions would be gigabytes). A row modelval did
        not write is a :class:`DataError`.

        Parameters
        ----------
        command
            The command.
        until
            The last run id.
        """
        with self._connect() as connection:
            rows = connection.execute(
                f"SELECT {WITHOUT_DECISIONS} FROM runs WHERE command = ? AND id <= ? ORDER BY id", (command, until)
            ).fetchall()
        return [_record(row, self.path) for row in rows]

    def latest(self, command: str) -> RunRecord | None:
        """The newest run of ``command``, or ``None`` when there is none.

        Parameters
        ----------
        command
            The command.
        """
        with self._connect() as connection:
            row = connection.execute(
                "SELECT * FROM runs WHERE command = ? ORDER BY id DESC LIMIT 1", (command,)
            ).fetchone()
        return None if row is None else _record(row, self.path)

    def previous(self, run: RunRecord) -> RunRecord | None:
        """The last run before ``run`` of the same command, model and label (a nightly's "last night").

        Parameters
        ----------
        run
            A recorded run.
        """
        with self._connect() as connection:
            row = connection.execute(
                "SELECT * FROM runs WHERE command = ? AND model IS ? AND label IS ? AND id < ? "
                "ORDER BY id DESC LIMIT 1",
                (run.command, run.model, run.label, run.id),
            ).fetchone()
        return None if row is None else _record(row, self.path)


#: A run's columns with its decisions left out (read as ``None``).
WITHOUT_DECISIONS = "id, created, command, model, dataset, label, summary, NULL, provenance"
#: A run id is SQLite's INTEGER PRIMARY KEY: 1 to 2**63 - 1.
MAX_RUN_ID = 2**63 - 1
RUN_ID = IntRange(1, MAX_RUN_ID, f"a run id is 1 to {MAX_RUN_ID} (`modelval runs list` shows the ids)")
RUN_LIMIT = IntRange(1, 1_000_000, "`runs list --limit` shows 1 to 1000000 runs")


def _check_run_id(run_id: object) -> int:
    """``run_id`` when it can be a run's id (1 to 2**63 - 1); else one line (SQLite's OverflowError was exit 3)."""
    return RUN_ID.check(run_id, "run id")


def _record(row: tuple[Any, ...], path: Path) -> RunRecord:
    """A row as a :class:`RunRecord`; a row modelval did not write (its JSON unreadable or of the wrong kind, a
    field of the wrong type) is a :class:`DataError` naming the row, not a ``JSONDecodeError`` (exit 3)."""
    run_id = row[0] if row else "?"

    def foreign(why: str) -> DataError:
        return DataError(
            f"run store {path}: run {run_id} is not a run modelval recorded ({why}); delete that row "
            f"(sqlite3 {path} 'DELETE FROM runs WHERE id = {run_id}') or set {RUNS_DB_ENV} to another file"
        )

    if len(row) != 9:
        raise foreign(f"{len(row)} columns, not 9")
    run_id, created, command, model, dataset, label, summary, decisions, provenance = row
    texts = {"created": created, "command": command, "summary": summary, "provenance": provenance}
    optional = {"model": model, "dataset": dataset, "label": label, "decisions": decisions}
    if not isinstance(run_id, int):
        raise foreign(f"its id is {run_id!r}")
    for name, value in [*texts.items(), *((k, v) for k, v in optional.items() if v is not None)]:
        if not isinstance(value, str):
            raise foreign(f"{name} is {type(value).__name__}, not text")

    def parsed(name: str, text: str, kind: type) -> Any:
        try:
            value = json.loads(text)
        except ValueError:
            raise foreign(f"{name} is not JSON") from None
        if not isinstance(value, kind):
            raise foreign(f"{name} is a JSON {type(value).__name__}, not an object")
        return value

    per_image = None if decisions is None else parsed("decisions", decisions, dict)
    pairs = () if per_image is None else per_image.values()
    if not all(isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, str) for v in pair) for pair in pairs):
        raise foreign("its decisions are not image -> [category, response] pairs of text")
    return RunRecord(
        run_id, created, command, model, dataset, label, parsed("summary", summary, dict), per_image,
        parsed("provenance", provenance, dict),
    )  # fmt: skip


def default_run_store(enabled: bool | None = None) -> RunStore | None:
    """The per-user run store (``$MODELVAL_RUNS_DB``, else the user data folder), or ``None`` when recording is
    off (``enabled=False`` or ``$MODELVAL_NO_RUN_STORE``).

    What a shell passes to the front door: the command line and the pytest plugin record their runs; a library
    call records nothing unless the caller passes a store (``modelval.shape_bias(..., run_store=RunStore())``).

    Parameters
    ----------
    enabled
        Whether to record (``None``: unless ``$MODELVAL_NO_RUN_STORE`` says not to).
    """
    return RunStore() if settings.value("run_store", enabled) else None


def record_run(
    store: RunStore | None,
    command: str,
    *,
    model: str | None,
    dataset: str | None,
    summary: Mapping[str, Any],
    provenance: Mapping[str, Any],
    decisions: Mapping[str, Sequence[str]] | None = None,
    label: str | None = None,
) -> int | None:
    """Record a run in ``store`` (nothing when it is ``None``); its id. A store that cannot be written is a
    warning: the result itself is fine, only its record is missing.

    Parameters
    ----------
    store
        The run store, or ``None``.
    command, model, dataset, summary, provenance, decisions, label
        As :meth:`RunStore.record`.
    """
    if store is None:
        return None
    try:
        return store.record(
            command, model=model, dataset=dataset, summary=summary, provenance=provenance, decisions=decisions,
            label=label,
        )  # fmt: skip
    except DataError as error:
        warnings.warn(f"the run was not recorded: {error}", RunStoreWarning, stacklevel=2)
        return None
