#!/usr/bin/env python3
"""PyTorch's CUDA caching allocator beside core::CachingAllocator on one malloc/free sequence.

    gpu_backend/torch_allocator_compare.py --cli build/apps/prefetchlab [--out DIR] [--seed N]

Writes a deterministic sequence (DIR/sequence.csv: small and large sizes, frees out of order,
sizes that split blocks and that hit the 2 MiB / 20 MiB / rounded-to-2-MiB segment rules), replays
it through torch.cuda (torch.empty(n, dtype=torch.uint8, device="cuda") and del) and through
`prefetchlab allocator-replay`, and prints both memory_stats side by side (DIR/compare.csv).
PYTORCH_CUDA_ALLOC_CONF, when set, goes to both. Without torch or a GPU it says so and still runs
the C++ side. Exit 0 when the stats agree (or torch was not run), 1 when they differ, 2 when the
C++ replay fails.
"""
import argparse
import csv
import json
import os
import random
import subprocess
import sys

KiB = 1024
MiB = 1024 * KiB

# The statistics compared (torch.cuda.memory_stats() keys; the C++ side uses the same names).
KEYS = [
    "allocated_bytes.all.current", "allocated_bytes.all.peak",
    "allocated_bytes.small_pool.peak", "allocated_bytes.large_pool.peak",
    "reserved_bytes.all.current", "reserved_bytes.all.peak",
    "reserved_bytes.small_pool.peak", "reserved_bytes.large_pool.peak",
    "segment.all.current", "segment.all.peak", "segment.small_pool.peak", "segment.large_pool.peak",
    "allocation.all.current", "allocation.all.peak",
    "active_bytes.all.peak", "inactive_split.all.peak", "inactive_split_bytes.all.peak",
    "requested_bytes.all.peak",
    "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
]


def make_sequence(seed):
    """(op, id, bytes) rows. Fixed steps first (each a rule), then a seeded mix."""
    rows = []
    live = []
    counter = [0]

    def malloc(size):
        counter[0] += 1
        name = "t%d" % counter[0]
        rows.append(("malloc", name, size))
        live.append(name)
        return name

    def free(name):
        rows.append(("free", name, ""))
        live.remove(name)

    # Rules, one by one: a tiny request (512 B rounding, new 2 MiB small segment); a split of it;
    # exactly 1 MiB (still small); 1 MiB + 1 (large: a 20 MiB segment); a 12 MiB request (a
    # segment rounded up to 2 MiB); a 25 MiB + 1000 B request whose leftover is under 1 MiB (no
    # split: the whole segment counts); a free in the middle of a split segment and its reuse.
    a = malloc(1000)
    b = malloc(600 * KiB)
    c = malloc(1 * MiB)
    d = malloc(1 * MiB + 1)
    e = malloc(12 * MiB)
    f = malloc(25 * MiB + 1000)
    free(b)
    g = malloc(300 * KiB)
    free(e)
    free(a)
    h = malloc(3 * MiB)
    free(d)
    free(f)
    malloc(24 * MiB)
    free(c)
    free(g)
    free(h)
    # A seeded mix: 70 % small (< 1 MiB), 30 % large (1 MiB .. 64 MiB), frees out of order.
    rng = random.Random(seed)
    for _ in range(400):
        if live and rng.random() < 0.45:
            free(live[rng.randrange(len(live))])
        elif rng.random() < 0.7:
            malloc(rng.randint(1, 1 * MiB - 1))
        else:
            malloc(rng.randint(1 * MiB, 64 * MiB))
    return rows


def write_sequence(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["op", "id", "bytes"])
        for row in rows:
            w.writerow(row)


def torch_stats(rows):
    """torch.cuda.memory_stats() after replaying `rows`, or (None, why) without torch or a GPU."""
    try:
        import torch  # noqa: PLC0415 (optional dependency)
    except Exception as e:  # ImportError, or a broken install
        return None, "PyTorch is not available (%s: %s)" % (type(e).__name__, e)
    if not torch.cuda.is_available():
        return None, "PyTorch %s has no CUDA device here" % torch.__version__
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    if torch.cuda.memory_allocated() != 0:
        return None, "torch.cuda already holds %d bytes; run in a fresh process" % torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    tensors = {}
    for op, name, size in rows:
        if op == "malloc":
            tensors[name] = torch.empty(int(size), dtype=torch.uint8, device="cuda")
        else:
            del tensors[name]
    stats = dict(torch.cuda.memory_stats())
    tensors.clear()
    return stats, "PyTorch %s on %s" % (torch.__version__, torch.cuda.get_device_name())


def cpp_stats(cli, sequence, out_dir, alloc_conf):
    out = os.path.join(out_dir, "cpp_stats.json")
    cmd = [cli, "allocator-replay", sequence, "-o", out]
    if alloc_conf:
        cmd += ["--alloc-conf", alloc_conf]
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode not in (0, 4):
        sys.stderr.write("allocator-replay failed (exit %d): %s\n" % (run.returncode, run.stderr))
        return None
    with open(out) as f:
        return json.load(f)["memory_stats"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", default="build/apps/prefetchlab", help="the prefetchlab binary")
    p.add_argument("--out", default="allocator-compare", help="output folder")
    p.add_argument("--seed", type=int, default=1, help="seed of the mixed part of the sequence")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rows = make_sequence(args.seed)
    sequence = os.path.join(args.out, "sequence.csv")
    write_sequence(sequence, rows)
    alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    print("sequence: %s (%d steps)%s" % (sequence, len(rows), ", PYTORCH_CUDA_ALLOC_CONF=" + alloc_conf if alloc_conf else ""))

    cpp = cpp_stats(args.cli, sequence, args.out, alloc_conf)
    if cpp is None:
        return 2
    torch, why = torch_stats(rows)
    print("torch side: " + why)

    table = []
    differences = 0
    for key in KEYS:
        c = cpp.get(key)
        t = torch.get(key) if torch is not None else None
        diff = "" if t is None or c is None else c - t
        if diff not in ("", 0):
            differences += 1
        table.append((key, "" if t is None else t, "" if c is None else c, diff))
    with open(os.path.join(args.out, "compare.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["stat", "torch", "prefetchlab", "difference"])
        w.writerows(table)
    width = max(len(k) for k in KEYS)
    print("%-*s %15s %15s %12s" % (width, "stat", "torch", "prefetchlab", "difference"))
    for key, t, c, diff in table:
        print("%-*s %15s %15s %12s" % (width, key, t if t != "" else "-", c, diff))
    if torch is None:
        print("only the C++ side ran (%s)" % why)
        return 0
    print("%d of %d stats differ" % (differences, len(KEYS)) if differences else "all %d stats agree" % len(KEYS))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
