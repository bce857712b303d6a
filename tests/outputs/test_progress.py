"""The progress lines' figures (rate, share, ETA) and their cadence, under a clock the test
moves: exact, whatever the machine's load. Where the lines appear in a real run:
tests/test_output.py::test_a_slow_run_prints_progress_lines."""

from __future__ import annotations

from pytest_tokaudit.outputs.progress import Meter, RunMeter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_items_meter_says_how_far_it_got_once_per_interval():
    clock, lines = Clock(), []
    meter = Meter("data/big.jsonl", 1_000_000, 10_000_000, 5.0, lines.append, clock=clock)
    clock.now += 4.9
    meter.tick(100, 1_500_000)
    assert lines == []  # not yet an interval
    clock.now += 0.1
    meter.tick(1_234, 3_000_000)  # 2 MB of 10 MB in 5 s: 0.4 MB/s, 8 MB to go
    assert lines == ["tokaudit: data/big.jsonl: 1,234 records, 2.0 MB in 5.0 s (0.4 MB/s), "
                     "20% of 10.0 MB, ETA 20 s"]
    clock.now += 1.0
    meter.tick(1_300, 3_100_000)
    assert len(lines) == 1  # the next line is due an interval after the last
    clock.now += 4.0
    # Read past the part's end (the last line's rest): never more than all of it.
    meter.tick(9_999, 12_000_000)
    assert lines[-1] == ("tokaudit: data/big.jsonl: 9,999 records, 10.0 MB in 10 s (1.0 MB/s), "
                         "100% of 10.0 MB, ETA 0.0 s")
    clock.now += 7_200.0
    meter.tick(10_000, None)  # a source without offsets (Parquet rows)
    assert lines[-1] == "tokaudit: data/big.jsonl: 10,000 records, in 2 h 00 min"


def test_the_runs_meter_counts_items_and_bytes_from_the_plan_on():
    clock, lines = Clock(), []
    meter = RunMeter(2.0, lines.append, clock=clock)
    clock.now += 60.0  # start-up (xdist's workers, a cluster): not counted in the rate
    meter.plan({"a.jsonl::tokaudit": 4_000_000, "b.jsonl::tokaudit": 6_000_000})
    meter.finish("a.jsonl::tokaudit", 50)
    assert lines == []  # within the interval
    clock.now += 2.0
    meter.start("b.jsonl::tokaudit", "b.jsonl", 0)
    meter.tick_item(10, 1_000_000)  # a's 4 MB and 1 MB of b's in 2 s
    assert lines == ["tokaudit: 60 records, 5.0 MB of 10.0 MB (50%) in 2.0 s (2.5 MB/s), "
                     "ETA 2.0 s; 1 of 2 items done, now b.jsonl"]
    clock.now += 2.0
    meter.finish("b.jsonl::tokaudit", 70)
    meter.finish("b.jsonl::tokaudit", 70)  # a rerun's report counts once
    assert lines[-1] == ("tokaudit: 120 records, 10.0 MB of 10.0 MB (100%) in 4.0 s "
                         "(2.5 MB/s), ETA 0.0 s; 2 of 2 items done")
    assert len(lines) == 2


def test_the_runs_meter_without_sizes_says_no_share_nor_eta():
    clock, lines = Clock(), []
    meter = RunMeter(1.0, lines.append, clock=clock)
    meter.plan({"s3://b/a.jsonl::tokaudit": None, "b.jsonl::tokaudit": 10})
    clock.now += 150.0
    meter.finish("b.jsonl::tokaudit", 3)
    assert lines == ["tokaudit: 3 records, 0.0 MB in 2 min 30 s; 1 of 2 items done"]
