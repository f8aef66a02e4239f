"""modelval's pytest plugin (:mod:`modelval.pytest_plugin.plugin`, a ``pytest11`` entry point), its settings
and its pytest-xdist scheduler. A shell above the front door: its cases run through the validation runner."""
