"""Entry point that only declares the pytest_tokaudit_* hooks.

Separate from the plugin so that `-p no:tokaudit` turns the audit off while a
conftest.py implementing these hooks still loads ("unknown hook" otherwise).
"""

from __future__ import annotations

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    hookspecs.register(pluginmanager)
