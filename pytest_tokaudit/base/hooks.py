"""The hook markers: pluggy's for the project "pytest", which is what `pytest.hookimpl` and
`pytest.hookspec` are. The checks and the hook specs mark themselves with these, so they
(and the public API, pytest_tokaudit.api) load where pytest is not imported."""

from __future__ import annotations

import pluggy

hookimpl = pluggy.HookimplMarker("pytest")
hookspec = pluggy.HookspecMarker("pytest")
