"""What a hook implementation does, as a digest (run/codekey.py, issue #22 item 1): equal
for the same behaviour, different for any change in what it reaches, and refused for state
that cannot be fingerprinted. The user-visible side (a warm run after an edit gives a cold
run's verdict) is in test_cache.py."""

from __future__ import annotations

import collections
import enum
import functools
import re
import threading
from pathlib import Path

import pytest

from pytest_tokaudit.run.codekey import Digest, Unkeyable, hookimpl_digest


def digest(value, root: str = "") -> str:
    d = Digest("test", root)
    d.value(value)
    return d.hexdigest()


def factory(n, *, key="a"):
    def check(record):
        return record.get(key, 0) > n
    return check


class Limits(dict):
    pass


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Rule:
    def __init__(self, n):
        self.n = n

    def pytest_tokaudit_check_record(self, record):
        return record > self.n


@functools.lru_cache
def cached(x):
    return x


def test_closures_defaults_and_instances_are_keyed_by_their_values():
    assert digest(factory(1)) == digest(factory(1))
    assert digest(factory(1)) != digest(factory(2))
    assert digest(factory(1, key="a")) != digest(factory(1, key="b"))
    assert digest(Rule(1).pytest_tokaudit_check_record) != digest(Rule(2).pytest_tokaudit_check_record)
    assert digest(Limits(a=1)) != digest(Limits(a=2))  # a dict subclass's contents
    assert digest(collections.OrderedDict(a=1)) != digest(collections.OrderedDict(a=2))
    assert digest(Color.RED) != digest(Color.BLUE)
    assert digest(re.compile("a")) != digest(re.compile("b"))
    assert digest(functools.partial(factory, 1)) != digest(functools.partial(factory, 2))
    assert digest(cached) == digest(cached)


def test_a_set_is_keyed_by_its_elements_not_their_order():
    a = {f"id-{i}" for i in range(50)}
    b = set(sorted(a, reverse=True))
    assert digest(a) == digest(b)
    assert digest(frozenset(a)) == digest(frozenset(b))
    assert digest(a) != digest(a | {"id-50"})


def test_paths_under_the_rootdir_are_keyed_relative_to_it(tmp_path: Path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert digest(one / "allowed.txt", str(one)) == digest(two / "allowed.txt", str(two))
    assert digest(str(one / "allowed.txt"), str(one)) == digest(str(two / "allowed.txt"), str(two))
    assert digest(one / "a.txt", str(one)) != digest(one / "b.txt", str(one))
    assert digest(Path("/elsewhere/a.txt"), str(one)) != digest(Path("/other/a.txt"), str(one))


def test_state_that_cannot_be_fingerprinted_is_refused_naming_it():
    lock = threading.Lock()

    def guarded(record):
        with lock:
            return None

    with pytest.raises(Unkeyable, match=r"^pytest_tokaudit_check_record of conftest.py: "
                                        r"a _thread.lock it uses cannot be fingerprinted$"):
        hookimpl_digest(guarded, None, "pytest_tokaudit_check_record of conftest.py")
    with pytest.raises(Unkeyable):  # the answer is remembered, and stays a refusal
        hookimpl_digest(guarded, None, "pytest_tokaudit_check_record of conftest.py")
