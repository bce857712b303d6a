"""The fixed cost of a tokenizer: process start to the first encode, three ways.

    python benchmarks/tokenizer_load.py [--tokenizer DIR] [--repeat 7] [--base SRC]

- `tokenizers`: `Tokenizer.from_file(tokenizer.json)`, what the reference scripts load;
- `tokaudit`: `pytest_tokaudit.tokenizers.hf.load_tokenizer(DIR)`, what the plugin loads;
- `transformers`: `AutoTokenizer.from_pretrained(DIR, local_files_only=True)`, what the
  plugin loaded before it read tokenizer.json itself (--base SRC: the same `tokaudit` row
  with another checkout's package first on sys.path, e.g. `git archive` of an older commit).

Each run is a fresh interpreter, timed from before its start to after `encode("hello")`;
medians of the runs, interleaved.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from run import default_tokenizer_dir

CODE = {
    "tokenizers": "from tokenizers import Tokenizer\n"
                  "t = Tokenizer.from_file({dir!r} + '/tokenizer.json')\n"
                  "t.encode('hello', add_special_tokens=False)\n",
    "tokaudit": "from pytest_tokaudit.tokenizer import load_tokenizer\n"
                "t = load_tokenizer({dir!r})\n"
                "t.backend_tokenizer.encode('hello', add_special_tokens=False)\n",
    "transformers": "from transformers import AutoTokenizer\n"
                    "t = AutoTokenizer.from_pretrained({dir!r}, local_files_only=True)\n"
                    "t.encode('hello', add_special_tokens=False)\n",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=default_tokenizer_dir())
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--base", help="a directory holding an older pytest_tokaudit package")
    a = ap.parse_args()
    rows = {name: [] for name in CODE}
    if a.base:
        rows["tokaudit (--base)"] = []
    for _ in range(a.repeat):
        for name in rows:
            env = dict(os.environ)
            if name.endswith("(--base)"):
                env["PYTHONPATH"] = a.base
            code = CODE[name.split()[0]].format(dir=a.tokenizer)
            t0 = time.perf_counter()
            env.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # no PyTorch advisory
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            rows[name].append(time.perf_counter() - t0)
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {a.repeat}\n")
    print("| load | median s | min s |\n|---|---|---|")
    for name, times in rows.items():
        print(f"| {name} | {statistics.median(times):.2f} | {min(times):.2f} |")


if __name__ == "__main__":
    main()
