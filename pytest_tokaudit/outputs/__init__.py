"""Outputs: each one module that declares its options and registers itself.

An output reads the run result (model.result.RESULT) or, for what it shows while items run
(progress, the failures file), hands its observer to each audit item; none reads the
controller. A new output is one module plus one name in OUTPUTS; one that writes a file at
the end of the session is a session.SessionFile.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

import pytest

from ..run.keys import FIGURES

# In the order their terminal lines appear.
OUTPUTS = ("terminal", "jsonreport", "progress", "failures", "github", "markdown", "html")


def modules() -> list[ModuleType]:
    return [import_module(f"{__name__}.{name}") for name in OUTPUTS]


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    for module in modules():
        module.add_options(parser, group)


def ini_keys() -> list[str]:
    """The ini keys the outputs declare (each module's INI_KEYS, if any)."""
    return [key for module in modules() for key in getattr(module, "INI_KEYS", ())]


def path_options() -> list[tuple[str, str]]:
    """(flag, dest) of every option naming a file an output writes (each PATH_OPTIONS)."""
    return [opt for module in modules() for opt in getattr(module, "PATH_OPTIONS", ())]


def configure(config: pytest.Config) -> None:
    """With the audit on, after the controller: each output registers what it needs, and
    whether it draws the figures (its `draws(config)`, if any): if none does, the audits
    skip them (run/keys.FIGURES)."""
    for module in modules():
        module.configure(config)
    config.stash[FIGURES] = any(module.draws(config) for module in modules()
                                if hasattr(module, "draws"))
