"""The Ray engine's per-item overhead (issue #32), as a case of the kit.

ray_items   64 one-record files against 1, audited by `--tokaudit-engine=ray` on a local
            Ray instance the run starts (no RAY_ADDRESS): the 64-file run's ratio against
            the 1-file run's is the overhead of 63 items (1.00x: none); `-n 0` on the 64
            files for scale. Each Ray run pays the instance's start (seconds): for the
            per-item overhead against a running cluster, `python -m benchmarks.ray_engine
            --per-item`.
"""

from __future__ import annotations

import importlib.util
import json

from benchmarks.kit import Case, Context, Skip

# A loopback instance: Ray keeps 127.0.0.1, no token authentication, no usage report, a
# quick stop (as tests/run/test_ray.py starts its cluster).
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
           "RAY_ADDRESS": ""}


def ray_items(ctx: Context) -> Case:
    if importlib.util.find_spec("ray") is None:
        raise Skip("ray_items: ray is not installed (the [ray] extra)")
    inis = {}
    for name, n in (("one", 1), ("many", 64)):
        ini = ctx.ini(f"ray-{name}", "[pytest]\n")
        data = ini.parent / "data"
        data.mkdir(exist_ok=True)
        for i in range(n):
            (data / f"f{i:02d}.jsonl").write_text(
                json.dumps({"sample_id": i, "completion_tokens": 3, "output_ids": [1, 2, 3]}) + "\n")
        inis[name] = ini
    one = "ray, 1 one-record file"
    rows = [
        ctx.pytest_row("pytest --tokaudit -n 0, 64 one-record files", inis["many"], "--tokaudit",
                       "--tokaudit-no-cache", "data", "-p", "no:xdist"),
        ctx.pytest_row(one, inis["one"], "--tokaudit", "--tokaudit-no-cache", "data", "-p", "no:xdist",
                       "--tokaudit-engine=ray", env=RAY_ENV),
        ctx.pytest_row("ray, 64 one-record files", inis["many"], "--tokaudit", "--tokaudit-no-cache", "data",
                       "-p", "no:xdist", "--tokaudit-engine=ray", env=RAY_ENV, against=one),
    ]
    return Case("ray_items", rows, ref=rows[0].name, size="64 files", input={"file": "f00..f63.jsonl",
                                                                           "records": 64})


CASES = {"ray_items": ray_items}
