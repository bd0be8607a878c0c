#!/usr/bin/env python3
"""Time the host's cost of torch.distributed calls on NCCL, with and without torch.profiler, on
the machine at hand (docs/fidelity.md, "Known gaps": the torch-call host level).

Public per-call figures disagree by 3-5x: CPU times read from torch.profiler traces
(pytorch/pytorch #138773: all_reduce 89 us, all_gather 131 us, reduce_scatter 122 us) against
unprofiled loops on 8x H100 servers (IBM/pytorch-communication-benchmarks #1: an all_reduce, a
synchronize and a barrier in 116.5 us; ByteDance-Seed/Triton-distributed #57: back-to-back
all_reduce of 128 B at 19.2 us per call). Whether that is the profiler's own cost per recorded
op or the machines is what this measures: every call below, on one machine, three ways:
- `issue`: calls back to back, one synchronisation after the last; host wall time per call.
  Small messages, so the host, not the device, sets the pace.
- `synchronized`: each call followed by torch.cuda.synchronize(), as IBM's loop (without its
  barrier); wall time per iteration.
- `profiled` and `profiled_stack`: `issue` inside torch.profiler.profile(activities=[CPU, CUDA]),
  without and with with_stack=True; host wall time per call.
The calls: all_reduce, all_gather (list form), all_gather_into_tensor, reduce_scatter (list
form), reduce_scatter_tensor, barrier, and IBM #1's timed iteration as one call
(all_reduce_sync_barrier: all_reduce, torch.cuda.synchronize(), barrier). One CSV row per call, size and way: the median over
--repeats batches of the mean per call within a batch of --calls.

    python3 bench/host_costs/torch_call_host_costs.py OUT.csv [--repeats N] [--calls N] [--warmup N]

One process on one GPU (world size 1: NCCL still runs, and c10d's host path is the same), or
under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set: rank 0 writes).
Without PyTorch, a GPU or NCCL it says so and exits 0 with nothing written, so gpu-check can call
it everywhere.
"""
import argparse
import csv
import os
import platform
import sys
import time

WAYS = ("issue", "synchronized", "profiled", "profiled_stack")
CALLS = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "barrier",
         "all_reduce_sync_barrier")
# Per-rank sizes: the host cost is flat across these (IBM #1 and NVSHMEM-Tutorial #23 found it
# flat from 4 KiB to 1-2 MiB), so two sizes show whether a figure is host or wire.
BYTES_PER_RANK = (4096, 1 << 20)
FIELDS = ("call", "bytes_per_rank", "world_size", "way", "us_per_call", "calls", "repeats", "torch", "nccl", "gpu", "cpu")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output", help="CSV file to write")
    p.add_argument("--repeats", type=int, default=7, help="timed batches per row (median reported)")
    p.add_argument("--calls", type=int, default=50, help="calls per batch")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls before each row")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.calls < 1 or args.warmup < 0:
        p.error("--repeats and --calls must be >= 1 and --warmup >= 0")
    return args


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def per_call_us(batch, calls, repeats, clock=time.perf_counter):
    """Median over `repeats` of the mean microseconds per call of batch(calls): batch runs the
    calls and returns once the row's timing point is reached (its own synchronisation)."""
    times = []
    for _ in range(repeats):
        start = clock()
        batch(calls)
        times.append((clock() - start) * 1e6 / calls)
    return median(times)


def nccl_version_text(version):
    """torch.cuda.nccl.version(): a (major, minor, patch) tuple, or one integer in old releases."""
    return ".".join(str(v) for v in version) if isinstance(version, (tuple, list)) else str(version)


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_rows(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow(row)


def main(argv):
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("torch_call_host_costs: PyTorch is not installed here; nothing measured")
        return 0
    if not torch.cuda.is_available() or not dist.is_available() or not dist.is_nccl_available():
        print("torch_call_host_costs: no CUDA device or no NCCL under PyTorch; nothing measured")
        return 0

    under_launcher = "WORLD_SIZE" in os.environ and "RANK" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    if under_launcher:
        dist.init_process_group("nccl")
    else:
        port = os.environ.get("PREFETCHLAB_TORCH_PORT", "29531")
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    world = dist.get_world_size()
    rank = dist.get_rank()
    dev = torch.device("cuda", local_rank)
    dt = torch.bfloat16
    elem = torch.tensor([], dtype=dt).element_size()

    def make_call(name, numel):
        """The call as a training script writes it, its tensors allocated once."""
        x = torch.ones(numel, dtype=dt, device=dev)
        if name == "all_reduce":
            return lambda: dist.all_reduce(x)
        if name == "all_gather":
            outs = [torch.empty_like(x) for _ in range(world)]
            return lambda: dist.all_gather(outs, x)
        if name == "all_gather_into_tensor":
            out = torch.empty(numel * world, dtype=dt, device=dev)
            return lambda: dist.all_gather_into_tensor(out, x)
        if name == "reduce_scatter":
            ins = [torch.ones(numel, dtype=dt, device=dev) for _ in range(world)]
            return lambda: dist.reduce_scatter(x, ins)
        if name == "reduce_scatter_tensor":
            big = torch.ones(numel * world, dtype=dt, device=dev)
            return lambda: dist.reduce_scatter_tensor(x, big)
        if name == "barrier":
            return lambda: dist.barrier()
        if name == "all_reduce_sync_barrier":
            def iteration():
                dist.all_reduce(x)
                torch.cuda.synchronize()
                dist.barrier()
            return iteration
        raise ValueError(name)

    def batch_for(call, way):
        """`issue` or `synchronized` (the module docstring) as a batch of n calls."""
        def synchronized(n):
            for _ in range(n):
                call()
                torch.cuda.synchronize()

        def issue(n):
            for _ in range(n):
                call()
            torch.cuda.synchronize()
        return synchronized if way == "synchronized" else issue

    meta = {
        "world_size": world,
        "repeats": args.repeats,
        "calls": args.calls,
        "torch": torch.__version__,
        "nccl": nccl_version_text(torch.cuda.nccl.version()),
        "gpu": torch.cuda.get_device_name(dev),
        "cpu": cpu_model(),
    }
    rows = []
    for name in CALLS:
        sizes = (0,) if name == "barrier" else BYTES_PER_RANK
        for size in sizes:
            call = make_call(name, max(1, size // elem))
            for way in WAYS:
                for _ in range(args.warmup):
                    call()
                torch.cuda.synchronize()
                if way.startswith("profiled"):
                    us = profiled_per_call_us(torch, call, args.calls, args.repeats, with_stack=(way == "profiled_stack"))
                else:
                    us = per_call_us(batch_for(call, way), args.calls, args.repeats)
                rows.append(dict(meta, call=name, bytes_per_rank=size, way=way, us_per_call=f"{us:.2f}"))
                if rank == 0:
                    print(f"{name:24s} {size:>8d} B {way:15s} {us:9.2f} us/call", flush=True)
    dist.barrier()
    if rank == 0:
        write_rows(args.output, rows)
        print(f"torch_call_host_costs: {len(rows)} rows in {args.output}")
    dist.destroy_process_group()
    return 0


def profiled_per_call_us(torch, call, calls, repeats, with_stack):
    """`issue` timed inside one profiling session per batch: the profiler's start-up and trace
    collection are left out, its cost per recorded op is not."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    times = []
    for _ in range(repeats):
        with torch.profiler.profile(activities=acts, with_stack=with_stack):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e6 / calls)
    return median(times)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
