"""The round trip with a tiktoken-based remote-code tokenizer: the plugin's path against the
loops a user would write, side by side in one run (issue #23).

    python benchmarks/tiktoken_roundtrip.py REMOTE_TOKENIZER_DIR [--records 500]

REMOTE_TOKENIZER_DIR: a Kimi-shaped directory (tiktoken.model + tokenization_*.py with
auto_map), e.g. the one tests/tokenizers/test_tiktoken.py builds from the Qwen3 vocabulary
(its `remote_dir` fixture). Records are stdlib text as reasoning + </think> + content +
<|im_end|>, encoded by the tokenizer itself.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--records", type=int, default=500)
    a = ap.parse_args()
    load = ("import time, transformers; t = time.perf_counter(); "
            f"transformers.AutoTokenizer.from_pretrained({a.directory!r}, trust_remote_code=True, "
            "local_files_only=True); print(time.perf_counter() - t)")
    ours_load = ("import time; t = time.perf_counter(); from pytest_tokaudit.tokenizers.hf import "
                 f"load_tokenizer; load_tokenizer({a.directory!r}, True); print(time.perf_counter() - t)")
    cold = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()[-1])
            for code in (load, ours_load)]
    import transformers

    from pytest_tokaudit.tokenizers.hf import load_tokenizer, roundtrip
    from tokdata import sample_texts

    remote = transformers.AutoTokenizer.from_pretrained(a.directory, trust_remote_code=True, local_files_only=True)
    ours = load_tokenizer(a.directory, True)
    texts = sample_texts()
    lists = [remote.encode(f"{texts[i % len(texts)][:1500]}</think>{texts[(7 * i + 3) % len(texts)][:1500]}<|im_end|>")
             for i in range(a.records)]
    n = sum(map(len, lists))
    plain = best(lambda: [remote.encode(remote.decode(ids)) for ids in lists])
    kwargs = best(lambda: [remote.encode(remote.decode(ids, skip_special_tokens=False),
                                         add_special_tokens=False) for ids in lists], repeat=3)
    plugin = best(lambda: roundtrip(ours, lists))
    print(f"{a.records} records, {n:,} tokens; load average {os.getloadavg()[0]:.2f}; medians\n")
    print("| path | s | plain loop ÷ path |\n|---|---|---|")
    print(f"| plain loop `tok.encode(tok.decode(ids))` (the model card's calls) | {plain:.3f} | 1.00x |")
    print(f"| the same loop with keyword arguments (the plugin before #23) | {kwargs:.3f} | {plain / kwargs:.2f}x |")
    print(f"| the plugin's round trip (the Encoding, specials spliced back) | {plugin:.3f} | {plain / plugin:.2f}x |")
    print(f"\ncold load in a fresh process: AutoTokenizer {cold[0]:.2f} s, the plugin's load_tokenizer {cold[1]:.2f} s")


if __name__ == "__main__":
    main()
