#!/usr/bin/env python3
"""Converts published cache traces to the one format the benchmark and reference.py read.

Writes, for each trace, OUT/<name>.u64 (its keys, one little-endian unsigned 64-bit integer per
request, in order) and a line of OUT/manifest.tsv (name, kind, format, requests, distinct keys,
source file). `MemoryStoreBenchmark --trace-dir OUT` and `reference.py --trace-dir OUT` replay
them.

Formats (compressed files, .gz, .xz or .bz2, are read as they are):

  lirs         text, one block number per line ("*" lines skipped): the LIRS authors' traces
  address      text, "<op> 0x<hex address> <size>" per line: program address traces
  cache2k      binary, big-endian 32-bit integers: cache2k's traces
  cloudphysics binary, big-endian unsigned 32-bit integers
  long         binary, big-endian 64-bit integers (Corda, Scarab)
  adaptsize    text, "<time> <id> <size>" per line
  oracle       libCacheSim's oracleGeneral binary: 24-byte little-endian records
               (time u32, id u64, size u32, next access i64)
  text         text, one integer key per line (a second column, a size, is ignored)

Caffeine's simulator (github.com/ben-manes/caffeine, simulator/src/main/resources/.../parser)
ships many such traces in its repository: `--caffeine CHECKOUT` converts every one it knows.
libCacheSim's repository (github.com/1a1a11a/libCacheSim) ships a sample of a CloudPhysics block
I/O trace in data/: `--libcachesim CHECKOUT` converts it.

    python3 Scripts/hitrate/convert-traces.py /tmp/real-traces --caffeine ~/src/caffeine
    python3 Scripts/hitrate/convert-traces.py /tmp/real-traces --libcachesim ~/src/libCacheSim
    python3 Scripts/hitrate/convert-traces.py /tmp/real-traces --format lirs multi2.trace.gz

Needs numpy. Traces are neither committed nor downloaded here: get them from their publishers.
"""

import argparse
import bz2
import gzip
import lzma
import os
import sys

import numpy as np

# Caffeine's simulator traces: parser folder, file name prefix -> (format, kind).
CAFFEINE = {
    ("lirs", "2_pools"): ("lirs", "program (two pools)"),
    ("lirs", "cpp"): ("lirs", "program (C preprocessor)"),
    ("lirs", "cs"): ("lirs", "program (C source browser)"),
    ("lirs", "gli"): ("lirs", "search (glimpse text index)"),
    ("lirs", "loop"): ("lirs", "loop"),
    ("lirs", "multi1"): ("lirs", "mixed programs"),
    ("lirs", "multi2"): ("lirs", "mixed programs"),
    ("lirs", "multi3"): ("lirs", "mixed programs"),
    ("lirs", "ps"): ("lirs", "database (postgres join)"),
    ("lirs", "sprite"): ("lirs", "workstation file system (Sprite)"),
    ("lirs", "zigzag"): ("lirs", "loop (zigzag)"),
    ("lirs", "backf"): ("lirs", "loop (back and forth)"),
    ("lirs", "scan"): ("lirs", "scan"),
    ("address", "gcc"): ("address", "program addresses (SPEC gcc)"),
    ("address", "gzip"): ("address", "program addresses (SPEC gzip)"),
    ("address", "mcf"): ("address", "program addresses (SPEC mcf)"),
    ("address", "swim"): ("address", "program addresses (SPEC swim)"),
    ("address", "twolf"): ("address", "program addresses (SPEC twolf)"),
    ("cache2k", "orm-busy"): ("cache2k", "database (ORM, busy hours)"),
    ("cache2k", "orm-night"): ("cache2k", "database (ORM, night)"),
    ("cache2k", "web07"): ("cache2k", "web (e-commerce catalog)"),
    ("cache2k", "web12"): ("cache2k", "web (e-commerce catalog)"),
    ("cloud_physics", "w106"): ("cloudphysics", "storage (block I/O, CloudPhysics)"),
    ("corda", "trace_vaultservice"): ("long", "database (Corda vault service)"),
    ("scarab", "scarab-recs"): ("long", "web (recommendations, Scarab)"),
    ("adapt_size", "request"): ("adaptsize", "CDN (AdaptSize)"),
}

# libCacheSim's sample trace (github.com/1a1a11a/libCacheSim, data/): file -> (format, kind).
LIBCACHESIM = {
    "cloudPhysicsIO.oracleGeneral.bin": ("oracle", "storage (block I/O, CloudPhysics sample)"),
}

CAFFEINE_PARSERS = (
    "simulator/src/main/resources/com/github/benmanes/caffeine/cache/simulator/parser"
)


def open_trace(path):
    """The file's bytes, decompressed according to its extension."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb").read()
    if path.endswith(".xz"):
        return lzma.open(path, "rb").read()
    if path.endswith(".bz2"):
        return bz2.open(path, "rb").read()
    with open(path, "rb") as file:
        return file.read()


def keys_of(data, fmt):
    """The trace's keys as an array of unsigned 64-bit integers."""
    if fmt == "lirs":
        tokens = [t for t in data.split() if t != b"*"]
        return np.array(tokens, dtype=np.int64).astype(np.uint64)
    if fmt == "address":
        keys = [int(line.split()[1], 16) for line in data.splitlines() if line.strip()]
        return np.array(keys, dtype=np.uint64)
    if fmt == "cache2k":
        return np.frombuffer(data[: len(data) // 4 * 4], dtype=">i4").astype(np.int64).astype(
            np.uint64
        )
    if fmt == "cloudphysics":
        return np.frombuffer(data[: len(data) // 4 * 4], dtype=">u4").astype(np.uint64)
    if fmt == "long":
        return np.frombuffer(data[: len(data) // 8 * 8], dtype=">i8").astype(np.uint64)
    if fmt == "adaptsize":
        keys = [int(line.split()[1]) for line in data.splitlines() if line.strip()]
        return np.array(keys, dtype=np.uint64)
    if fmt == "oracle":
        record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
        return np.frombuffer(data[: len(data) // 24 * 24], dtype=record)["id"].astype(np.uint64)
    if fmt == "text":
        keys = [int(line.split()[0]) for line in data.splitlines() if line.strip()]
        return np.array(keys, dtype=np.uint64)
    sys.exit(f"unknown format {fmt}")


def trace_name(path):
    """The file's name without its directory and its trace and compression extensions."""
    name = os.path.basename(path)
    for suffix in (".gz", ".xz", ".bz2", ".bin", ".trace", ".oracleGeneral", ".txt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def convert(path, fmt, kind, out, manifest):
    keys = keys_of(open_trace(path), fmt)
    name = trace_name(path)
    keys.astype("<u8").tofile(os.path.join(out, name + ".u64"))
    distinct = len(np.unique(keys))
    manifest.append((name, kind, fmt, len(keys), distinct, os.path.basename(path)))
    print(f"{name}: {len(keys)} requests, {distinct} distinct keys ({kind})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the directory to write the converted traces to")
    parser.add_argument("--caffeine", help="a checkout of Caffeine: convert its simulator traces")
    parser.add_argument(
        "--libcachesim", help="a checkout of libCacheSim: convert its sample trace (data/)"
    )
    parser.add_argument("--format", help="the format of the FILES given")
    parser.add_argument("--kind", default="other", help="what the FILES are, for the report")
    parser.add_argument("files", nargs="*")
    arguments = parser.parse_args()
    os.makedirs(arguments.out, exist_ok=True)
    manifest = []
    if arguments.caffeine:
        root = os.path.join(arguments.caffeine, CAFFEINE_PARSERS)
        for (folder, prefix), (fmt, kind) in CAFFEINE.items():
            directory = os.path.join(root, folder)
            names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
            match = [n for n in names if n.startswith(prefix + ".") and "trace" in n]
            if not match:
                print(f"skipped {folder}/{prefix}: not in the checkout", file=sys.stderr)
                continue
            convert(os.path.join(directory, match[0]), fmt, kind, arguments.out, manifest)
    if arguments.libcachesim:
        for file, (fmt, kind) in LIBCACHESIM.items():
            path = os.path.join(arguments.libcachesim, "data", file)
            if not os.path.exists(path):
                print(f"skipped data/{file}: not in the checkout", file=sys.stderr)
                continue
            convert(path, fmt, kind, arguments.out, manifest)
    if arguments.files:
        if not arguments.format:
            sys.exit("--format is needed with FILES")
        for path in arguments.files:
            convert(path, arguments.format, arguments.kind, arguments.out, manifest)
    path = os.path.join(arguments.out, "manifest.tsv")
    existing = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            existing = [line.rstrip("\n").split("\t") for line in file.readlines()[1:]]
    names = {row[0] for row in manifest}
    rows = [row for row in existing if row and row[0] not in names] + [
        [str(cell) for cell in row] for row in manifest
    ]
    with open(path, "w", encoding="utf-8") as file:
        file.write("name\tkind\tformat\trequests\tdistinct\tsource\n")
        for row in rows:
            file.write("\t".join(row) + "\n")


if __name__ == "__main__":
    main()
