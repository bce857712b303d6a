"""Bad data several test modules audit: the bad-input corpus (a finding per kind of broken
line), lines forged against the ids fast path, and the records of a sharded file.

Helpers only (no fixtures, no tests), imported by name: `from corpus import BAD_LINES`.
"""

from __future__ import annotations

import json
import zlib

from conftest import rec

BAD_LINES = [
    rec("r1"),                                                                     # 1 fine
    '{"sample_id": "r2", "completion_tokens": 10, "output_ids": [1, 2',            # 2
    b'{"sample_id": "r3\xff", "completion_tokens": 1, "output_ids": [1]}',         # 3
    [1, 2, 3],                                                                     # 4
    '"just a string"',                                                             # 5
    "null",                                                                        # 6
    {"sample_id": "r7", "completion_tokens": 10},                                  # 7
    {"sample_id": "r8", "output_ids": [1]},                                        # 8
    {"completion_tokens": 1, "output_ids": [1]},                                   # 9
    {"sample_id": "r10", "completion_tokens": "10", "output_ids": [1]},            # 10
    '{"sample_id": "r11", "completion_tokens": 390.0, "output_ids": [1]}',         # 11
    {"sample_id": "r12", "completion_tokens": True, "output_ids": [1]},            # 12
    {"sample_id": "r13", "completion_tokens": 3, "output_ids": "1 2 3"},           # 13
    '{"sample_id": "r14", "completion_tokens": 3, "output_ids": [1, 2.0, 3]}',     # 14
    {"sample_id": "r15", "completion_tokens": 2, "output_ids": [1, "2"]},          # 15
    {"sample_id": "r16", "completion_tokens": 2, "output_ids": [1, True]},         # 16
    {"sample_id": "r17", "completion_tokens": 2, "output_ids": [1, None]},         # 17
    {"sample_id": "r18", "completion_tokens": -1, "output_ids": []},               # 18
    {"sample_id": "r19", "completion_tokens": 2, "output_ids": [1, -5]},           # 19
    "",                                                                            # 20 blank
    " \t ",                                                                        # 21 blank
    "\ufeff" + json.dumps(rec("r22")),                                             # 22 BOM
    {"sample_id": ["r23"], "completion_tokens": 1, "output_ids": [1]},             # 23
    {},                                                                            # 24
    rec("r25", 10, billed=50),                                                     # 25 count
    {"sample_id": 26, "completion_tokens": 1, "output_ids": {"0": 1}},             # 26
    rec("r27"),                                                                    # 27 fine
]


def complete_lines(prefix: bytes, suffix: str) -> int:
    """Lines a correct reader gets out of a truncated stream before it notices the cut."""
    if suffix == ".gz":
        data = zlib.decompressobj(wbits=31).decompress(prefix)
    else:
        import zstandard

        data = zstandard.ZstdDecompressor().decompressobj().decompress(prefix)
    return data.count(b"\n")


# Forged ids keys: duplicate keys, escapes, the fast path's sentinel spelled in the data.
FORGED = [
    # a duplicate key: the last one wins, and it holds the sentinel spelled with escapes
    rb'{"sample_id":1,"completion_tokens":2,"output_ids":[1,2],"output_ids":"\u0000tokaudit\u002dids"}',
    # the first key bytes are a nested object's
    rb'{"sample_id":2,"completion_tokens":2,"meta":{"output_ids":[1,2]},"output_ids":"\u0000tokaudit\u002dids"}',
    # the first key bytes end another key; the real key is spelled with an escape
    rb'{"sample_id":3,"completion_tokens":2,"a\"output_ids":[1,2],"output\u005fids":"\u0000tokaudit\u002dids"}',
    rb'{"sample_id":4,"completion_tokens":2,"a\"output_ids":[1,2],"output_ids":"\u0000tokaudit\u002Dids"}',
    # the one plain key is a duplicate of an escaped spelling before and after it
    rb'{"sample_id":5,"completion_tokens":2,"\u006futput_ids":"x","output_ids":[1,2],"output_id\u0073":"\u0000\u0074okaudit-ids"}',
    # the sentinel as the data spells it, for a key that is only nested
    rb'{"sample_id":6,"completion_tokens":2,"meta":{"output_ids":[1,2]},"output\u005Fids":"\u0000tokaudit-ids"}',
]


LFS = b"version https://git-lfs.github.com/spec/v1"  # a Git LFS pointer's first line


NEW_BAD_LINES = [
    *FORGED,
    b"\x0c" + json.dumps(rec("ff")).encode() + b"\x0b",
    b"\x0b\x0c",
    b'{"sample_id":"n1","completion_tokens":3,"output_ids":[1,2,3],"logprob":1e400}',
    b'{"sample_id":18446744073709551616,"completion_tokens":2,"output_ids":[1,2]}',
    b'{"sample_id":"n3","completion_tokens":18446744073709551616,"output_ids":[1,2]}',
    b'{"sample_id":"n4","completion_tokens":2,"output_ids":[1,18446744073709551616]}',
    b'{"sample_id":"n5","completion_tokens":"' + b"7" * 5000 + b'","output_ids":[1]}',
    b'{"sample_id":"n6","completion_tokens":9,"output_ids":null}',
    LFS,  # not the first line: invalid JSON
]


# A file cut into shards of SHARD_SIZE bytes, with findings in several of them.
SHARD_SIZE = 2000


def shard_records() -> list:
    lines: list = [rec(f"s{i:03d}", 10 + i % 7) for i in range(1, 81)]
    lines[4] = '{"sample_id": "s005", "completion_tokens": 10, "output_ids": [1,'  # line 5
    lines[22] = rec("s023", 10, billed=60)                       # count breach
    lines[29] = ""                                               # blank line 30
    lines[40] = {"sample_id": "s041", "output_ids": [1, 2]}     # missing count
    lines[57] = rec("s058", 12, billed=40)                       # count breach
    lines[77] = [1, 2]                                           # not an object
    return lines
