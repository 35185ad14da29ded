#!/usr/bin/env python3
"""Hit ratios of libCacheSim's reference eviction policies on the benchmark's traces.

Reads a directory written by `MemoryStoreBenchmark --export-traces DIR` (one key per line per
trace, and a manifest.tsv with each trace's two capacities) and prints a Markdown table: per
trace and capacity, the hit ratio (%) of LRU, ARC, S3-FIFO, SIEVE, W-TinyLFU, LIRS and Belady,
and the best of ARC, S3-FIFO, SIEVE, W-TinyLFU and LIRS (the count limit's yardstick).

Every trace is first converted to libCacheSim's oracleGeneral binary format (24-byte records:
timestamp u32, object id u64, size u32, next access i64) so that Belady knows each request's next
use; objects have size 1, so a cache size is a number of keys. A sized trace (lines of `key size`,
such as `zipf-0.99-sized`) keeps its sizes, and its capacities are total sizes: its rows give
object hit ratios, a second table gives byte hit ratios (the share of the accessed size that
hit), and Belady there is libCacheSim's size-aware heuristic, not an optimum.

    pip install libcachesim numpy
    python3 Scripts/hitrate/reference.py DIR [--policies LRU,ARC,...] [--benchmark FILE]
    python3 Scripts/hitrate/reference.py --trace-dir DIR [...]   # real traces (convert-traces.py)

With `--benchmark FILE` (the saved output of `MemoryStoreBenchmark --eviction-only`, run with the
same `--quick` or not as the export), the table also shows MemoryStore's hit ratio, its distance
to the best contender (the target: -1.5 points or better on every row), and checks that the
benchmark's own LRU and Belady agree with libCacheSim's within 0.1 point.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

try:
    import libcachesim as lcs
except ImportError:
    sys.exit("reference.py needs libCacheSim's Python package: pip install libcachesim")

POLICIES = ["LRU", "ARC", "S3FIFO", "Sieve", "WTinyLFU", "LIRS", "Belady"]
CONTENDERS = ["ARC", "S3FIFO", "Sieve", "WTinyLFU", "LIRS"]

ORACLE_RECORD = np.dtype(
    [("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")]
)


def read_manifest(directory):
    """The manifest's rows as dictionaries, in order."""
    with open(os.path.join(directory, "manifest.tsv"), encoding="utf-8") as file:
        header = file.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in file if line.strip()]


def write_oracle(keys, path, sizes=None):
    """Writes `keys` (with `sizes`, or size 1) as an oracleGeneral trace: next access as a 1-based
    request index, -1 for none (libCacheSim's own converter's convention). Ids are key + 1: 0 is
    never used as an id."""
    count = len(keys)
    order = np.lexsort((np.arange(count), keys))
    next_access = np.full(count, -1, dtype=np.int64)
    same = keys[order[:-1]] == keys[order[1:]]
    next_access[order[:-1][same]] = order[1:][same] + 1
    records = np.zeros(count, dtype=ORACLE_RECORD)
    records["id"] = keys.astype(np.uint64) + 1
    records["size"] = 1 if sizes is None else sizes
    records["next"] = next_access
    records.tofile(path)


def hit_ratios(policy, path, capacity, sized=False):
    """The object and byte hit ratios (%) of `policy` with room for `capacity` keys (or,
    `sized`, that total size) on the oracle trace."""
    reader = lcs.TraceReader(
        path, lcs.TraceType.ORACLE_GENERAL_TRACE, lcs.ReaderInitParam(ignore_obj_size=not sized)
    )
    cache = getattr(lcs, policy)(capacity)
    miss_ratio, byte_miss_ratio = cache.process_trace(reader)
    return (1 - miss_ratio) * 100, (1 - byte_miss_ratio) * 100


def read_benchmark(path):
    """(trace, capacity) -> {"LRU", "MemoryStore", "Belady"} from the benchmark's hit-rate table."""
    rows = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            cells = [cell.strip().rstrip(" %") for cell in line.strip().strip("|").split("|")]
            # 7 cells in the eviction section's table; 11 in the real-trace table, whose last
            # four are the replays on several threads.
            if len(cells) in (7, 11) and cells[1].isdigit():
                values = [float(cell) for cell in cells[2:5]]
                rows[(cells[0], int(cells[1]))] = dict(zip(["LRU", "MemoryStore", "Belady"], values))
            elif len(cells) == 6 and cells[1].isdigit() and cells[0].endswith("-sized"):
                # The sized table: LRU and MemoryStore object, then byte, hit ratios (no Belady).
                values = [float(cell) for cell in cells[2:6]]
                rows[(cells[0], int(cells[1]))] = dict(
                    zip(["LRU", "MemoryStore", "LRU bytes", "MemoryStore bytes"], values)
                )
    return rows


def exported_traces(directory):
    """(name, keys, sizes, capacities) of each trace of an --export-traces directory."""
    for row in read_manifest(directory):
        name = row["name"]
        text = open(os.path.join(directory, name + ".txt"), "rb").read()
        sized = len(text.split(b"\n", 1)[0].split()) == 2
        values = np.array(text.split(), dtype=np.int64)
        keys, sizes = (values[0::2], values[1::2]) if sized else (values, None)
        yield name, keys, sizes, (int(row["capacity1"]), int(row["capacity10"]))


def real_traces(directory):
    """(name, keys, None, capacities) of each real trace of a --trace-dir directory (written by
    convert-traces.py, or libCacheSim oracleGeneral files), at 5 % and 20 % of its distinct
    keys, as the benchmark's real-trace section replays them."""
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    for file in sorted(os.listdir(directory)):
        path = os.path.join(directory, file)
        if file.endswith(".u64"):
            name, raw = file[: -len(".u64")], np.fromfile(path, dtype="<u8")
        elif ".oracleGeneral" in file:
            name, raw = file.split(".oracleGeneral")[0], np.fromfile(path, dtype=record)["id"]
        else:
            continue
        if len(raw) == 0:
            continue
        _, keys = np.unique(raw, return_inverse=True)
        distinct = int(keys.max()) + 1
        yield name, keys.astype(np.int64), None, (max(distinct // 20, 1), max(distinct // 5, 1))


def print_table_header(policies, contenders, benchmark):
    """The header of a table of hit ratios: one column per policy, the best contender, and
    MemoryStore's with its distance to that best when the benchmark's output is given."""
    columns = policies + (["best of " + ", ".join(contenders)] if contenders else [])
    if benchmark is not None:
        columns += ["MemoryStore", "MemoryStore - best"]
    print("| trace | capacity | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))


def print_byte_rows(rows, policies, contenders, benchmark, misses):
    """The byte hit ratios of the sized traces' rows, with MemoryStore's from the benchmark."""
    print("")
    print("Byte hit ratios of the traces with sizes (the share of the accessed size that hit):")
    print("")
    print_table_header(policies, contenders, benchmark)
    for name, capacity, ratios in rows:
        cells = [f"{ratios[policy]:.2f}" for policy in policies]
        best = max(contenders, key=lambda policy: ratios[policy]) if contenders else None
        if best:
            cells.append(f"{ratios[best]:.2f} ({best})")
        ours = (benchmark or {}).get((name, capacity), {}).get("MemoryStore bytes")
        if benchmark is not None:
            cells.append("n/a" if ours is None else f"{ours:.2f}")
            if ours is not None and best:
                cells.append(f"{ours - ratios[best]:+.2f}")
                if ours - ratios[best] < -1.5:
                    misses.append(f"{name} at {capacity} (bytes)")
            else:
                cells.append("n/a")
        print(f"| {name} | {capacity} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="a directory written by --export-traces")
    parser.add_argument(
        "--trace-dir", action="store_true",
        help="the directory holds real traces (convert-traces.py), replayed at 5 %% and 20 %% of "
        "their distinct keys, as `MemoryStoreBenchmark --trace-dir` does",
    )
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--benchmark", help="the benchmark's output, to compare with")
    arguments = parser.parse_args()
    benchmark = read_benchmark(arguments.benchmark) if arguments.benchmark else None
    disagreements = []
    misses = []
    policies = arguments.policies.split(",")
    contenders = [name for name in CONTENDERS if name in policies]

    version = getattr(lcs, "__version__", "unknown")
    print(f"libCacheSim (Python package libcachesim {version}); hit ratio %, higher is better.")
    print("")
    print_table_header(policies, contenders, benchmark)
    with tempfile.TemporaryDirectory() as scratch:
        traces = (real_traces if arguments.trace_dir else exported_traces)(arguments.directory)
        means = {}
        byte_rows = []
        for name, keys, sizes, capacities in traces:
            sized = sizes is not None
            oracle = os.path.join(scratch, name + ".oracleGeneral")
            write_oracle(keys, oracle, sizes)
            for capacity in capacities:
                both = {
                    policy: hit_ratios(policy, oracle, capacity, sized) for policy in policies
                }
                ratios = {policy: pair[0] for policy, pair in both.items()}
                if sized:
                    byte_rows.append((name, capacity, {p: pair[1] for p, pair in both.items()}))
                for policy, ratio in ratios.items():
                    means.setdefault(policy, []).append(ratio)
                cells = [f"{ratios[policy]:.2f}" for policy in policies]
                if contenders:
                    best = max(contenders, key=lambda policy: ratios[policy])
                    cells.append(f"{ratios[best]:.2f} ({best})")
                    means.setdefault("best", []).append(ratios[best])
                if benchmark is not None:
                    ours = benchmark.get((name, capacity))
                    if ours is None:
                        cells += ["n/a", "n/a"]
                        disagreements.append(f"{name} at {capacity}: not in the benchmark's output")
                    else:
                        means.setdefault("MemoryStore", []).append(ours["MemoryStore"])
                        cells.append(f"{ours['MemoryStore']:.2f}")
                        if contenders:
                            distance = ours["MemoryStore"] - ratios[best]
                            cells.append(f"{distance:+.2f}")
                            if distance < -1.5:
                                misses.append(f"{name} at {capacity}")
                        else:
                            cells.append("n/a")
                        for policy in ("LRU", "Belady"):
                            if policy not in ours or policy not in ratios:
                                continue
                            if abs(ours[policy] - ratios[policy]) > 0.1:
                                disagreements.append(
                                    f"{name} at {capacity}: {policy} {ours[policy]:.2f} in the "
                                    f"benchmark, {ratios[policy]:.2f} in libCacheSim"
                                )
                print(f"| {name} | {capacity} | " + " | ".join(cells) + " |", flush=True)
            os.remove(oracle)
    if byte_rows:
        print_byte_rows(byte_rows, policies, contenders, benchmark, misses)
    print("")
    print(
        "- Means over the rows: "
        + ", ".join(f"{policy} {sum(v) / len(v):.2f}" for policy, v in means.items())
    )
    if benchmark is not None:
        print("")
        agreed = "yes" if not disagreements else "NO: " + "; ".join(disagreements)
        print(f"- The benchmark's LRU and Belady agree with libCacheSim's within 0.1 point: {agreed}")
        if contenders:
            met = "MET" if not misses else "NOT MET (" + ", ".join(misses) + ")"
            print(f"- MemoryStore within 1.5 points of the best contender on every row: {met}")


if __name__ == "__main__":
    main()
