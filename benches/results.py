#!/usr/bin/env python3
"""Regenerates benches/RESULTS.md: today's figure for every performance target.

    python3 benches/results.py           # writes benches/RESULTS.md
    python3 benches/results.py --check   # exits 1 when RESULTS.md is stale

Input: the JSON records under benches/results/figures/*.jsonl, one object a
line. `blobcask-bench --json FILE` writes them (`"source": "bench"`); figures
transcribed from the dated log (benches/log/) carry `"source": "log"` and the
log file's name. The targets are those of DESIGN.md's table "Performance
targets" and the bindings paragraph after it (TARGETS below).

What the page promises, and this script keeps:
* a row's figure is the newest record of its figure id (by date, then run
  start, then file and line order); all records of that date, command,
  commit and source are that figure's runs, shown as a range;
* a target with no record says "not measured" and the command that would
  measure it: no figure is ever made up or carried over from elsewhere;
* the page depends on the records only (no clock, no environment), so
  `--check` can tell a stale page from a fresh one.

Python 3.11, standard library only.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from dataclasses import dataclass

BENCHES = pathlib.Path(__file__).resolve().parent
FIGURES = BENCHES / "results" / "figures"
PAGE = BENCHES / "RESULTS.md"

BB = "target/release/blobcask-bench --engine io_uring --json benches/results/figures/DATE-TOPIC.jsonl"
PY = "target/py-venv/bin/python benches/python_bench.py /tmp/pyb"
NODE = "LMDB_JS_DIR=/tmp/lmdbjs node benches/node_bench.mjs /tmp/nb"
IB = "target/release/index-bench --store-only"
SCALE = ("target/release/scale-bench --n 1M,10M --engines blobcask,lmdb,sqlite"
         " --json benches/results/figures/DATE-scale.jsonl (built with --features lmdb,sqlite)")
CMP = ("target/release/compare --dir /work/cmp --engines blobcask-uring,lmdb --sizes 16K --budget 64M"
       " (built with --features lmdb,redb)")


@dataclass(frozen=True)
class Target:
    """One row of the page: a figure id and the bound its figure must keep."""

    figure: str  # what is measured, as the page names it
    target: str  # the bound, as DESIGN.md states it
    id: str  # the records' `figure` field
    field: str  # "ratio" or "value": which number the bound applies to
    op: str  # "<=", ">=" or "<"
    limit: float
    unit: str  # how the compared number reads ("×", "µs", ...)
    measure: str  # the command that measures it
    engine: str | None = "io_uring"  # records of another engine do not count


TARGETS: list[tuple[str, list[Target]]] = [
    ("Performance targets (DESIGN.md)", [
        Target("random 4 KiB read, 1 in flight, p50, async: multi-thread, `block_on`",
               "≤ 1.10 × raw direct-I/O `pread`", "read.qd1.async.block_on", "ratio", "<=", 1.10, "×",
               f"{BB} --phase read"),
        Target("the same, multi-thread, spawned task", "≤ 1.10 ×", "read.qd1.async.task", "ratio", "<=", 1.10,
               "×", f"{BB} --phase read"),
        Target("the same, current-thread", "≤ 1.10 ×", "read.qd1.async.current_thread", "ratio", "<=", 1.10,
               "×", f"{BB} --phase read"),
        Target("the same, tokio-uring `LocalStore`", "≤ 1.10 ×", "read.qd1.tokio_uring.local_store", "ratio",
               "<=", 1.10, "×", f"{BB} --phase read"),
        Target("random 4 KiB read, 1 in flight, p50, blocking", "≤ 1.05 × raw `pread`", "read.qd1.blocking",
               "ratio", "<=", 1.05, "×", f"{BB} --phase read"),
        Target("random 4 KiB reads, 64 in flight: one task, 64 futures (`block_on`)",
               "≥ 0.95 × fio io_uring at depth 64", "depth.qd64.one_task", "ratio", ">=", 0.95, "×",
               f"{BB} --phase depth (apt-get install fio)"),
        Target("the same, 64 spawned tasks", "≥ 0.95 × fio", "depth.qd64.spawned_tasks", "ratio", ">=", 0.95,
               "×", f"{BB} --phase depth (apt-get install fio)"),
        Target("upload of 64 MiB objects, durable", "≥ 0.95 × raw sequential write, `fdatasync` per object",
               "upload.put.sync_per_object", "ratio", ">=", 0.95, "×", f"{BB} --phase upload"),
        Target("the same", "≥ 0.95 × raw sequential write, one `fdatasync` at the end", "upload.put.one_sync",
               "ratio", ">=", 0.95, "×", f"{BB} --phase upload"),
        Target("durable 16 KiB commits, 1 writer, blocking (rows in turn)",
               "≥ 0.85 × raw O_DIRECT write + `fdatasync`", "commit.1w_turns.blocking-store-put-keys-in-turn",
               "ratio", ">=", 0.85, "×", f"{BB} --phase commit"),
        Target("durable 16 KiB commits, 1 writer, async: current-thread (rows in turn)", "≥ 0.85 ×",
               "commit.1w_turns.store-put-async-on-a-tokio-current-thread-runtime-keys-in-turn", "ratio", ">=",
               0.85, "×", f"{BB} --phase commit"),
        Target("the same, multi-thread, caller in `block_on` (rows in turn)", "≥ 0.85 ×",
               "commit.1w_turns.store-put-async-in-block-on-of-a-tokio-multi-thread-runtime-keys-in-turn",
               "ratio", ">=", 0.85, "×", f"{BB} --phase commit"),
        Target("the same, multi-thread, spawned task (rows in turn)", "≥ 0.85 ×",
               "commit.1w_turns.store-put-async-in-a-task-spawned-on-a-tokio-multi-thread-runtime-keys-in-turn",
               "ratio", ">=", 0.85, "×", f"{BB} --phase commit"),
        Target("the same, multi-thread, spawned task (a window of its own)", "≥ 0.85 ×", "commit.window.1w",
               "ratio", ">=", 0.85, "×", f"{BB} --phase commit"),
        Target("durable 16 KiB commits, 16 writers (in turns with the raw writer)",
               "≥ 3 × the raw single-writer rate", "commit.turns.16w", "ratio", ">=", 3.0, "×",
               f"{BB} --phase commit"),
        Target("the same, a window of its own", "≥ 3 ×", "commit.window.16w", "ratio", ">=", 3.0, "×",
               f"{BB} --phase commit"),
        Target("durable 16 KiB commits, 64 writers (in turns with the raw writer)",
               "≥ 4 × the raw single-writer rate", "commit.turns.64w", "ratio", ">=", 4.0, "×",
               f"{BB} --phase commit"),
        Target("the same, a window of its own", "≥ 4 ×", "commit.window.64w", "ratio", ">=", 4.0, "×",
               f"{BB} --phase commit"),
        Target("warm 16 KiB get (cache hit), Rust, p50", "≤ 2 µs", "warm.get16k.hit", "value", "<=", 2.0, "µs",
               f"{BB} --phase warm"),
        Target("warm 16 KiB get against LMDB, 16 threads", "≤ 1.5 × LMDB", "compare.warm.18432.vs_lmdb.t16",
               "ratio", "<=", 1.5, "×", CMP),
        Target("the same, 2 threads", "≤ 1.5 × LMDB", "compare.warm.18432.vs_lmdb.t2", "ratio", "<=", 1.5, "×",
               f"{CMP} --concurrency 2"),
        Target("space used / user bytes, 16 KiB objects", "≤ 1.05", "space.16384", "value", "<=", 1.05, "×",
               "target/release/blobcask-bench --phase space --json benches/results/figures/DATE-TOPIC.jsonl",
               engine="portable"),
        Target("space used / user bytes, 1 KiB values, 1M objects", "≤ 1.3", "index.space.1024b.1000000",
               "value", "<=", 1.3, "×", f"{IB} --open-keys 1000000 --value-size 1024", engine=None),
        Target("the same, 100,000 objects", "≤ 1.3", "index.space.1024b.100000", "value", "<=", 1.3, "×",
               f"{IB} --open-keys 100000 --value-size 1024", engine=None),
        Target("space used / user bytes, 100 B values, 1M objects", "≤ 1.6", "index.space.100b.1000000",
               "value", "<=", 1.6, "×", f"{IB} --open-keys 1000000 --value-size 100", engine=None),
        Target("the same, 100,000 objects", "≤ 1.6", "index.space.100b.100000", "value", "<=", 1.6, "×",
               f"{IB} --open-keys 100000 --value-size 100", engine=None),
        Target("open after a clean close, 1M objects of 1 KiB, hash index", "≤ 50 ms",
               "index.open.1024b.1000000.hash", "value", "<=", 0.05, "s", SCALE.replace("--n", "--value 1024 --n"),
               engine=None),
        Target("the same, 1M objects of 100 B", "≤ 50 ms", "index.open.100b.1000000.hash", "value", "<=", 0.05,
               "s", SCALE, engine=None),
        Target("open after a clean close, 100M objects", "≤ 1.5 s", "index.open.100b.100000000.hash", "value",
               "<=", 1.5, "s", SCALE.replace("1M,10M", "100M"), engine=None),
        Target("100M objects of 100 B stored, closed, reopened, every object read back and compared",
               "all verified (the run fails otherwise)", "scale.verify_all.100b.100000000.hash", "value", ">", 0,
               "s", "target/release/scale-bench --n 100M --no-kill --verify --json "
               "benches/results/figures/DATE-scale-100m.jsonl", engine=None),
        Target("open after kill -9, 100M objects of 100 B (its clean open, same run)",
               "≤ 2 × the clean open + one checkpoint interval", "scale.open_kill.100b.100000000.hash", "ratio",
               "<=", 2.0, "×", SCALE.replace("1M,10M", "100M"), engine=None),
        Target("open after kill -9, 10M objects of 100 B (its clean open, same run)",
               "≤ 2 × the clean open + one checkpoint interval", "scale.open_kill.100b.10000000.hash", "ratio",
               "<=", 2.0, "×", SCALE, engine=None),
        Target("open after kill -9, 1M objects of 100 B (its clean open, same run)",
               "≤ 2 × the clean open + one checkpoint interval", "scale.open_kill.100b.1000000.hash", "ratio",
               "<=", 2.0, "×", SCALE, engine=None),
        Target("RSS per object, hash index, keys on the device (largest N run)", "≤ 32 B", "rss.per_object.hash",
               "value", "<=", 32, "B", SCALE, engine=None),
        Target("the same, 1M objects", "≤ 48 B", "rss.per_object.hash.1000000", "value", "<=", 48, "B", SCALE,
               engine=None),
        Target("RSS per object, FST index, keys included", "≤ 24 B", "rss.per_object.fst", "value", "<=", 24,
               "B", SCALE + " --index fst", engine=None),
        Target("RSS per object, BTree index, minus key bytes", "≤ 48 B", "rss.per_object.btree", "value", "<=",
               48, "B", SCALE + " --index btree", engine=None),
        Target("bytes on disk per 100 B object, 1M objects (LMDB's, same run)", "≤ 1.1 × LMDB's",
               "scale.disk_per_object.100b.1000000.hash", "ratio", "<=", 1.1, "×", SCALE, engine=None),
        Target("bulk load of 10M objects of 100 B (LMDB's rate, same run)", "≥ LMDB's rate",
               "scale.load_rate.100b.10000000.hash", "ratio", ">=", 1.0, "×", SCALE, engine=None),
        Target("cold get, 1M objects of 100 B, cache off: p50 / raw 4 KiB O_DIRECT pread of the store's file "
               "(in turn, same run)", "≤ 1.1 ×", "scale.get_first_touch.100b.1000000.hash", "ratio", "<=", 1.1,
               "×", SCALE, engine=None),
        Target("get right after a reopen, small objects that fit the cache, from Python, p50", "≤ 3 µs",
               "py.get.after_reopen", "value", "<=", 3.0, "µs",
               "target/py-venv/bin/python benches/python_reopen.py --n 1000000 --json "
               "benches/results/figures/DATE-TOPIC.jsonl (py-lmdb installed for the baseline)", engine=None),
    ]),
    ("Cache tier (issue 43)", [
        Target("DataFusion, second run through `CachedObjectStore` with bounded staleness: speed / a local "
               "blobcask store", "≥ 0.9 ×", "tier.datafusion.second_run.max_stale", "ratio", ">=", 0.9, "×",
               "target/release/cache-tier-bench --rows 1000000 --rounds 7 (moto on 127.0.0.1)", engine=None),
        Target("DataFusion, second run through `CachedObjectStore` revalidating each read: time / S3 alone",
               "< 1 × (faster than without the tier)", "tier.datafusion.second_run.revalidate", "ratio", "<", 1.0,
               "×", "target/release/cache-tier-bench --rows 1000000 --rounds 7 (moto; Garage not measured)",
               engine=None),
    ]),
    ("Bindings (DESIGN.md, the paragraph after the table)", [
        Target("Python: awaited 16 KiB get / blocking get", "≤ 1.25 ×", "py.get16k.awaited", "ratio", "<=", 1.25,
               "×", PY, engine=None),
        Target("Python: longest asyncio loop stall, 3 × 48 MiB awaited gets", "≤ 5 ms", "py.loop_stall.get48m",
               "value", "<=", 5.0, "ms", PY, engine=None),
        Target("Node: longest event-loop delay, awaited 48 MiB get", "≤ 5 ms", "node.loop_delay.get48m", "value",
               "<=", 5.0, "ms", NODE, engine=None),
        Target("Node: longest event-loop delay, awaited 48 MiB put", "≤ 5 ms", "node.loop_delay.put48m", "value",
               "<=", 5.0, "ms", NODE, engine=None),
        Target("Python: gets/s from 8 threads / from 1 (the GIL released for I/O)", "threads scale: > 1 ×",
               "py.gets.threads8_vs_1", "ratio", ">", 1.0, "×", PY, engine=None),
        Target("Node: commit groups for 500 durable puts issued in one tick", "commit together: fewer groups than puts",
               "node.one_tick.groups", "value", "<", 500, "groups", NODE, engine=None),
        Target("Python: hot 16 KiB get (copy) / py-lmdb", "≤ 1.5 ×", "py.warm.get16k.vs_lmdb", "ratio", "<=", 1.5,
               "×", PY, engine=None),
        Target("Python: hot 16 KiB get without a copy / py-lmdb `buffers=True`", "≤ 1.5 ×",
               "py.warm.get16k_blob.vs_lmdb", "ratio", "<=", 1.5, "×", PY, engine=None),
        Target("Python: hot 1 MiB get (copy) / py-lmdb", "≤ 1.5 ×", "py.warm.get1m.vs_lmdb", "ratio", "<=", 1.5,
               "×", PY, engine=None),
        Target("Python: hot 1 MiB get without a copy / py-lmdb `buffers=True`", "≤ 1.5 ×",
               "py.warm.get1m_blob.vs_lmdb", "ratio", "<=", 1.5, "×", PY, engine=None),
        Target("Node: hot 16 KiB `getSync` / lmdb-js", "≤ 1.5 ×", "node.warm.get16k.vs_lmdb", "ratio", "<=", 1.5,
               "×", NODE, engine=None),
        Target("Node: hot 1 MiB `getSync` / lmdb-js", "≤ 1.5 ×", "node.warm.get1m.vs_lmdb", "ratio", "<=", 1.5,
               "×", NODE, engine=None),
    ]),
]

HEADER = """\
# Benchmark results: today's figures

<!-- Generated by benches/results.py from benches/results/figures/*.jsonl: do not edit by hand. -->

One row per performance target of DESIGN.md (the table "Performance
targets" and the bindings paragraph after it): the newest figure recorded
for it, with its date, commit and the command that measured it. How the
figures got here, run by run, is in [`log/`](log/README.md).

* Regenerate: `python3 benches/results.py` (from the records in
  `benches/results/figures/*.jsonl`); `python3 benches/results.py --check`
  exits non-zero when this page is stale.
* Record a run: add `--json benches/results/figures/YYYY-MM-DD-topic.jsonl`
  to a `blobcask-bench` command, then regenerate. Write what the run showed
  in `benches/log/`.
* Source "log" means the figure was transcribed from the dated log file
  named, not written by a bench; "bench" means a `--json` record.
* Several runs of the newest date and command are given as a range, and
  "met?" counts the runs that keep the bound. A ratio is to the baseline
  measured in the same run, the way its target reads: a latency over the
  baseline's for "≤" targets; a rate over the baseline's rate (for one
  writer's puts taking turns, raw p50 over the put's p50) for "≥" targets.

Machine: 2 vCPU VM, Linux, ext4 on a virtio disk the host caches; shared
and noisy, so every blobcask figure is given as a ratio to a raw-device
baseline measured in the same run on the same file. Release code (the
figures dated before 2026-11-28's afternoon: the release profile with
`debug = 1`; since then `--release` has no debug info and `--profile
profiling` adds line tables; the generated code is the same).
"""


def fail(msg: str) -> None:
    print(f"results.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load(figures: pathlib.Path) -> list[dict]:
    """Every record, in file-name then line order, each with its place."""
    records = []
    for path in sorted(figures.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path.name}:{n}: not JSON ({e})")
            if not isinstance(r, dict):
                fail(f"{path.name}:{n}: not a JSON object")
            for key in ("figure", "date", "commit", "command", "source"):
                if not isinstance(r.get(key), str) or not r[key]:
                    fail(f"{path.name}:{n}: no {key!r}")
            if r["source"] == "log" and not (BENCHES / "log" / str(r.get("log", ""))).is_file():
                fail(f"{path.name}:{n}: source 'log' names no file of benches/log/ ({r.get('log')!r})")
            for key in ("value", "ratio", "value_high", "ratio_high"):
                v = r.get(key)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    fail(f"{path.name}:{n}: {key!r} is not a number")
            r["_at"] = (r["date"], r.get("started") or "", path.name, n)
            records.append(r)
    return records


def newest_runs(records: list[dict], t: Target) -> list[dict]:
    """The records of the target's figure from its newest run group."""
    mine = [r for r in records
            if r["figure"] == t.id and (t.engine is None or r.get("engine") in (None, t.engine))]
    if not mine:
        return []
    def run_of(r: dict) -> tuple:
        return (r["date"], r["command"], r["commit"], r["source"], r.get("log"))

    last = run_of(max(mine, key=lambda r: r["_at"]))
    return [r for r in mine if run_of(r) == last]


def num(v: float, field: str) -> str:
    if field == "ratio":
        return f"{v:.2f}"  # as the benches print ratios
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def keeps(v: float, t: Target) -> bool:
    return {"<=": v <= t.limit, ">=": v >= t.limit, "<": v < t.limit, ">": v > t.limit}[t.op]


def cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def row(t: Target, runs: list[dict], notes: list[str]) -> str:
    if not runs:
        return (f"| {cell(t.figure)} | {cell(t.target)} | not measured | – | – | – "
                f"| `{cell(t.measure)}` | – |")
    # Each run gives its number, or a low–high range where the log gave one.
    spans = []
    for r in runs:
        low = r.get(t.field)
        high = r.get(f"{t.field}_high", low)
        if low is not None:
            spans.append((low, high))
    if not spans:
        value, met = f"recorded without a {t.field}", "unknown"
    else:
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        unit = "×" if t.field == "ratio" else t.unit
        f = t.field
        value = f"{num(lo, f)} {unit}" if lo == hi else f"{num(lo, f)}–{num(hi, f)} {unit}"
        if len(spans) > 1:
            value += f" ({len(spans)} runs)"
        elif spans[0][0] != spans[0][1]:
            value += " (range as the log gives it)"
        ok = sum(keeps(a, t) and keeps(b, t) for a, b in spans)
        partly = any(keeps(a, t) != keeps(b, t) for a, b in spans)
        if ok == len(spans):
            met = "yes"
        elif ok == 0 and not partly:
            met = "**no**"
        elif len(spans) == 1:
            met = "partly"
        else:
            met = f"in {ok} of {len(spans)} runs"
    first = runs[0]
    quick = " (`--quick`)" if first.get("quick") and "--quick" not in first["command"] else ""
    source = f"log: [{first['log']}](log/{first['log']})" if first["source"] == "log" else first["source"]
    for note in dict.fromkeys(r["note"] for r in runs if r.get("note")):
        if note not in notes:
            notes.append(note)
        value += f" [{notes.index(note) + 1}]"
    return (f"| {cell(t.figure)} | {cell(t.target)} | {cell(value)} | {met} | {first['date']} "
            f"| `{cell(first['commit'])}` | `{cell(first['command'])}`{quick} | {source} |")


def page(records: list[dict]) -> str:
    out = [HEADER]
    notes: list[str] = []
    for title, targets in TARGETS:
        out.append(f"## {title}\n")
        out.append("| figure | target | today | met? | date | commit | command | source |")
        out.append("|---|---|---|---|---|---|---|---|")
        for t in targets:
            out.append(row(t, newest_runs(records, t), notes))
        out.append("")
    if notes:
        out.append("## Notes\n")
        out.extend(f"{i}. {n}" for i, n in enumerate(notes, 1))
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page is not what this script writes")
    ap.add_argument("--figures", type=pathlib.Path, default=FIGURES, help="folder of *.jsonl records")
    ap.add_argument("--out", type=pathlib.Path, default=PAGE, help="the page to write or check")
    args = ap.parse_args()
    text = page(load(args.figures))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python3 benches/results.py", file=sys.stderr)
            sys.exit(1)
        return
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
