"""pytest-xdist scheduling that keeps each model's validation cases on one worker, and only those.

A model is evaluated once per process; if its cases were spread over workers, each worker would load and
run it again. Switching a user's ``-n N`` run to xdist's ``--dist loadgroup`` would change how *their*
tests are scheduled (and under pytest 9 xdist's ``loadgroup`` no longer groups at all: it renames items
through an attribute pytest stopped reading). So the session's ``--dist`` is never rewritten; under
``--dist load`` (the default of ``-n``) the plugin hands xdist :class:`ModelvalScheduling`, which

* schedules exactly like xdist's ``load`` when no modelval case was collected;
* otherwise schedules in work units: one unit per model (all its cases, recognised by their exact
  parameter id, which the controller computes from the models file and the registry as the workers do),
  and every other test a unit of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _case_parameter(nodeid: str) -> str | None:
    """``lite0-model-norm`` of ``test_zoo.py::test_my_zoo[lite0-model-norm]``; ``None`` without parameters."""
    tail = nodeid.rsplit("::", 1)[-1]
    _, bracket, params = tail.partition("[")
    return params[:-1] if bracket and params.endswith("]") else None


def _scope_of(nodeid: str, models: Mapping[str, str]) -> str:
    """The work unit of a test: ``modelval:<model>`` for a case of ``models`` (case id -> model), else itself."""
    model = models.get(_case_parameter(nodeid) or "")
    return f"modelval:{model}" if model is not None else nodeid


def _grouping_scheduler(config: Any, log: Any, models: Mapping[str, str]) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ModelGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope_of(nodeid, models)

    return ModelGroupScheduling(config, log)


class ModelvalScheduling:
    """xdist's ``load``, or one work unit per model once the collection turns out to hold modelval cases.

    Both candidate schedulers receive every node and collection until :meth:`schedule` picks one; from
    then on only the chosen one is used.
    """

    def __init__(self, config: Any, log: Any, models: Mapping[str, str]) -> None:
        from xdist.scheduler import LoadScheduling

        self._models = models
        self._candidates = (LoadScheduling(config, log), _grouping_scheduler(config, log, models))
        self._chosen: Any = None

    @property
    def _active(self) -> Any:
        return self._chosen if self._chosen is not None else self._candidates[0]

    def add_node(self, node: Any) -> None:
        """xdist's scheduler protocol: a worker joined (passed to the scheduler in use, or to both candidates).

        Parameters
        ----------
        node
            The worker.
        """
        for scheduler in self._candidates if self._chosen is None else (self._chosen,):
            scheduler.add_node(node)

    def add_node_collection(self, node: Any, collection: Any) -> None:
        """xdist's scheduler protocol: a worker's collection (passed on as :meth:`add_node`).

        Parameters
        ----------
        node
            The worker.
        collection
            Its collected test ids.
        """
        for scheduler in self._candidates if self._chosen is None else (self._chosen,):
            scheduler.add_node_collection(node, collection)

    def remove_node(self, node: Any) -> Any:
        """xdist's scheduler protocol: a worker left; the test it was running, if any.

        Parameters
        ----------
        node
            The worker.
        """
        if self._chosen is not None:
            return self._chosen.remove_node(node)
        load, grouping = self._candidates
        crashed = load.remove_node(node)  # both forget the node; load answers, the stand-in until the choice
        grouping.remove_node(node)
        return crashed

    def schedule(self) -> None:
        if self._chosen is None:
            load, grouping = self._candidates
            # Every worker collected the same tests (xdist checks that); look at any one collection.
            collections = list(load.node2collection.values())
            grouped = bool(collections) and any(_case_parameter(n) in self._models for n in collections[0])
            self._chosen = grouping if grouped else load
        self._chosen.schedule()

    def __getattr__(self, name: str) -> Any:
        # nodes, collection_is_completed, tests_finished, has_pending, mark_test_complete, ...: the active one's
        return getattr(self._active, name)
