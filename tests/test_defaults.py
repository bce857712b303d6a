"""The defaults fit ordinary data: clean short and long answers, with a provider's noise and
its `<think>` framing, pass with no tokaudit key set; the regressions the README shows fail.

The data is made from real text and the real Qwen3 tokenizer: ids are the text as a local
rebuild encodes it (`reasoning</think>content<|im_end|>`), the billed count what a provider
billed: the same tokens, or with Qwen3's framing newlines (`<think>\\n...\\n</think>\\n\\n`,
3-4 tokens more), each record give or take 1-2 tokens of noise.
"""

from __future__ import annotations

import random
import re

import pytest

import forkrun
from conftest import TokProject, assert_no_crash, failure_section, rec, summary_rows
from pytest_tokaudit.tokenizers.hf import load_tokenizer
from tokdata import qwen_dir, sample_texts

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED
ONE_MODE = pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])


class Answers:
    """Responses of a kind (short ~60 tokens, long ~1,300), as a provider returns them."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.tok = load_tokenizer(qwen_dir())
        self.texts = sample_texts()
        self.k = 0

    def _piece(self, chars: int) -> str:
        text = self.texts[self.rng.randrange(len(self.texts))]
        at = self.rng.randrange(max(1, len(text) - chars))
        return text[at:at + chars].strip() or "ok"

    def _encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def noise(self) -> int:
        """Normal noise of a provider's count: mostly 0 or 1 token, at most 2 either way."""
        return max(-2, min(2, round(self.rng.gauss(0, 1.2))))

    def record(self, size: str, framing: bool, drift: float = 0.0, offset: int = 0) -> dict:
        chars = 120 if size == "short" else 4500
        reasoning, content = self._piece(chars), self._piece(chars)
        ids = self._encode(f"{reasoning}</think>{content}<|im_end|>")
        billed = (len(self._encode(f"<think>\n{reasoning}\n</think>\n\n{content}<|im_end|>"))
                  if framing else len(ids))
        billed = round(billed * (1 + drift)) + offset + self.noise()
        self.k += 1
        return {"sample_id": self.k, "completion_tokens": billed, "output_ids": ids}

    def file(self, n: int, size: str, framing: bool, **kw) -> list[dict]:
        return [self.record(size, framing, **kw) for _ in range(n)]


@pytest.fixture(scope="module")
def answers() -> Answers:
    return Answers(24)


def test_clean_short_and_long_answers_pass_with_the_defaults(project: TokProject, answers: Answers):
    project.ini()  # no tokaudit key: the defaults
    for k in range(6):
        project.jsonl(f"data/short/plain_{k}.jsonl", answers.file(40, "short", False))
        project.jsonl(f"data/short/framed_{k}.jsonl", answers.file(40, "short", True))
    for k in range(2):
        project.jsonl(f"data/long/plain_{k}.jsonl", answers.file(25, "long", False))
        project.jsonl(f"data/long/framed_{k}.jsonl", answers.file(25, "long", True))
    result = project.run()
    assert_no_crash(result)
    assert result.ret == OK, result.stdout.str()
    rows = summary_rows(result)
    means = {path: float(row[5].split()[0]) for path, row in rows.items() if path.startswith("data/")}
    # Not vacuous: the framed short answers are off by 3-4 tokens on average (5-7%), far over
    # the relative part alone (0.5% of ~60 tokens is 0.3), and under the absolute part (5).
    framed = [m for path, m in means.items() if "short/framed" in path]
    assert min(framed) > 3 and max(framed) < 5, means
    assert all(0.3 < m < 2 for path, m in means.items() if "plain" in path), means
    short_billed = [float(row[3]) for path, row in rows.items() if "short/" in path]
    assert 45 < min(short_billed) and max(short_billed) < 80, short_billed


@ONE_MODE
def test_three_hundred_files_of_short_noisy_answers_pass(project: TokProject):
    """Issue #24's report: 300 files of ~60-token answers, +-1-2 tokens of noise, were all red
    under the file-mean tolerance's 0.5% alone."""
    rng = random.Random(300)
    k = 0
    for f in range(300):
        rows = []
        for _ in range(20):
            k += 1
            n = rng.randint(45, 75)
            rows.append(rec(k, n, n + max(-2, min(2, round(rng.gauss(0, 1.2))))))
        project.jsonl(f"data/{f:03d}.jsonl", rows)
    project.ini()
    result = project.run("-q")
    assert result.ret == OK, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*301 passed*"])  # 300 files and the coverage check
    # The same data against the old default (no absolute part): every file fails.
    result = project.run("-q", "-o", "tokaudit_count_mean_abs=0")
    assert result.ret == FAILED
    result.stdout.fnmatch_lines(["*300 failed, 1 passed*"])


def test_the_readme_regressions_fail_with_the_defaults(project: TokProject, answers: Answers):
    """What the README's example shows going wrong, planted in clean data, fails with the
    defaults: a record billed for tokens it lacks (or the reverse), broken lines, and a
    drift every record hides inside its own tolerance but the file's mean does not."""
    project.ini()
    short = answers.file(40, "short", True)
    short[4]["completion_tokens"] = len(short[4]["output_ids"]) + 65  # README: line 5, -65
    short[9]["completion_tokens"] = len(short[9]["output_ids"]) - 40  # README: line 10, +120
    project.jsonl("data/counts.jsonl", short)
    broken = answers.file(10, "short", False)
    broken[2] = '{"sample_id": 3, "completion_tokens": 60, "output_ids": [1, 2'  # cut line
    del broken[5]["completion_tokens"]  # a missing field
    broken[7]["output_ids"][3] = str(broken[7]["output_ids"][3])  # a string id
    project.jsonl("data/broken.jsonl", broken)
    # A provider whose counts drift by 1.5%: 20-40 tokens a long record, inside max(8, 2%)
    # each, 7 times the mean tolerance's 0.5% on the file.
    project.jsonl("data/drift_long.jsonl", answers.file(20, "long", False, drift=0.015))
    # Short answers each billed 6 tokens more (with the noise, inside 8 each): an offset past 5.
    project.jsonl("data/offset_short.jsonl", answers.file(40, "short", False, offset=6))
    project.jsonl("data/clean.jsonl", answers.file(40, "short", True))
    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    result.assert_outcomes(passed=2, failed=4)  # clean.jsonl and coverage pass
    counts = failure_section(result, "data/counts.jsonl")
    assert [re.sub(r"\d+", "N", line.split(": ", 2)[2]) for line in counts[1:3]] == [
        "count: billed N, counted N (+N, +N.N%) > max(N, N%)",
        "count: billed N, counted N (-N, -N.N%) > max(N, N%)",
    ], counts
    checks = [re.match(r"data/broken\.jsonl:\d+: (?:sample_id=\d+: )?(\w+): ", line)
              for line in failure_section(result, "data/broken.jsonl")[1:4]]
    assert [m[1] for m in checks if m] == ["json", "schema", "schema"]
    for path in ("data/drift_long.jsonl", "data/offset_short.jsonl"):
        section = failure_section(result, path)
        assert section[0].startswith("mean |diff| ") and len(section) == 3, section
        assert section[1].startswith(f"{path}: count_mean: mean |diff| "), section
        assert section[2] == ("contract: default [tokaudit_count_mean_abs = 5, "
                              "tokaudit_count_mean_rel = 0.5%]"), section


def test_the_example_project_stays_red(pytester: pytest.Pytester):
    """The README's example run: the same four red verdicts with the defaults it relies on."""
    import shutil
    from pathlib import Path

    shutil.copytree(Path(__file__).parents[1] / "example_project", pytester.path, dirs_exist_ok=True)
    result = forkrun.runpytest(pytester, "--tokaudit", "-p", "no:xdist")
    assert result.ret == FAILED
    failed = sorted(re.findall(r"^FAILED (\S+)", result.stdout.str(), re.M))
    assert failed == ["data/api_batch_002.jsonl::tokaudit", "data/raw/openrouter_responses.jsonl::tokaudit",
                      "pytest.ini::tokaudit::expected_ids", "pytest.ini::tokaudit::unique_ids"], failed
