#!/usr/bin/env python3
"""Traces with sizes, for the cost limit: real key streams with sizes, in the format
`MemoryStoreBenchmark --export-traces` writes for `zipf-0.99-sized` (`NAME.txt` of `key size`
lines, and a `manifest.tsv` whose capacities are 1 % and 10 % of the total size of the trace's
distinct keys).

    python3 Scripts/hitrate/sized-traces.py OUT --trace-dir /tmp/real-traces \\
        [--caffeine PATH/TO/caffeine] [--limit 1000000]

- With `--caffeine`, AdaptSize's CDN trace (`request.trace.xz` in Caffeine's simulator) is
  written with its own object sizes, in KiB (rounded up), as `request-sized`.
- Each of the real traces `--trace-dir` holds (`.u64`, as convert-traces.py writes them) named
  by `--traces` is written with a size per key drawn from a Pareto law (shape 1.2, from 8, at
  most 4 000; seeded, so the files are the same every time), independent of its popularity,
  as `NAME-sized`, cut to its first `--limit` accesses.

Then `MemoryStoreBenchmark --sized-trace-dir OUT` gives the cost limit's object and byte hit
ratios beside size-aware strict LRU, and `reference.py OUT` libCacheSim's, in both measures.
"""

import argparse
import lzma
import os

import numpy as np

ADAPTSIZE = "simulator/src/main/resources/com/github/benmanes/caffeine/cache/simulator/parser/" \
    "adapt_size/request.trace.xz"


def write(out, rows, name, keys, sizes_by_key, summary):
    """Writes one trace: `keys` (dense numbers) with their sizes, and its manifest row."""
    sizes = sizes_by_key[keys]
    with open(os.path.join(out, name + ".txt"), "w") as file:
        file.write("\n".join(f"{k} {s}" for k, s in zip(keys.tolist(), sizes.tolist())) + "\n")
    total = int(sizes_by_key[np.unique(keys)].sum())
    rows.append((name, total // 100, total // 10, len(keys), len(np.unique(keys)), summary))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the directory to write the traces to")
    parser.add_argument("--trace-dir", help="converted real traces (.u64)")
    parser.add_argument("--caffeine", help="a checkout of Caffeine: its AdaptSize CDN trace")
    parser.add_argument("--traces", default="web07,scarab-recs,sprite,orm-busy,w106,multi2",
                        help="the real traces to give sizes to (comma-separated names)")
    parser.add_argument("--limit", type=int, default=1_000_000,
                        help="the most accesses kept of each real trace")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    if args.caffeine:
        fields = np.array(lzma.open(os.path.join(args.caffeine, ADAPTSIZE)).read().split(),
                          dtype=np.int64).reshape(-1, 3)
        ids, keys = np.unique(fields[:, 1], return_inverse=True)
        sizes = np.zeros(len(ids), dtype=np.int64)
        sizes[keys] = np.maximum((fields[:, 2] + 1023) // 1024, 1)
        write(args.out, rows, "request-sized", keys, sizes,
              "CDN (AdaptSize) with its object sizes in KiB")
    random = np.random.default_rng(0x5EED)
    for name in args.traces.split(",") if args.trace_dir else []:
        raw = np.fromfile(os.path.join(args.trace_dir, name + ".u64"), dtype="<u8")[: args.limit]
        _, keys = np.unique(raw, return_inverse=True)
        uniform = random.random(int(keys.max()) + 1)
        sizes = np.minimum(np.ceil(8 * uniform ** (-1 / 1.2)), 4000).astype(np.int64)
        write(args.out, rows, name + "-sized", keys, sizes,
              f"{name} keys with Pareto(1.2) sizes 8 to 4000")
    with open(os.path.join(args.out, "manifest.tsv"), "w") as file:
        file.write("name\tcapacity1\tcapacity10\taccesses\tdistinct\tsummary\n")
        for row in rows:
            file.write("\t".join(map(str, row)) + "\n")


if __name__ == "__main__":
    main()
