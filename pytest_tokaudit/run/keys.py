"""The stash keys a pytest run's plugins share: pytest's, so they live here, above the
layers that never import pytest (the audit itself, usable without it: pytest_tokaudit.api).
Light: the outputs import it on every pytest run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..engine.observers import Meter, Sink
    from ..model.result import RunResult

# The run result the controller builds once every verdict is in; every output reads it.
RESULT = pytest.StashKey["RunResult"]()

# Set on an audit item's stash around its call by the outputs that want them (progress,
# --tokaudit-failures); the item hands them to its pass.
METER = pytest.StashKey["Meter"]()
SINK = pytest.StashKey["Sink"]()

# Whether this run's audits compute the HTML report's figures (FileSummary.plotted): true
# when an output draws them (outputs.configure asks each), the same on every xdist worker.
FIGURES = pytest.StashKey[bool]()
