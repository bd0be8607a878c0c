#!/usr/bin/env python3
"""Seeds a corpus folder per fuzz harness from the files bundled in the repository.

    tests/fuzz/make_corpus.py OUT_DIR [--cli build/apps/prefetchlab]

OUT_DIR/<harness>/ receives one seed per bundled input of that reader, in the harness's input
form (tests/fuzz/README.md): scenarios, models, hardware profiles and fidelity cases; the
ds_config files and nccl-tests log of tests/data; the sweep grids of docs/tuning.md with the
results.csv of tests/data/plots; an allocator sequence as gpu_backend/torch_allocator_compare.py
writes it. With --cli, a short run's samples.csv and the collective model's nccl-tests tables
are added (the repository bundles neither). Existing seeds are overwritten, others kept.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def add(out, harness, data):
    folder = out / harness
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def bundled(pattern):
    return sorted(p for p in ROOT.glob(pattern) if p.is_file())


def seed_scenarios(out):
    overrides = ["", "training.iterations=2", "zero.stage3_prefetch_bucket_size=5e6",
                 "controller.policy=ema_threshold", "cluster.gpus_per_node=3", "model=gpt2-small"]
    for i, path in enumerate(bundled("scenarios/**/*.yaml")):
        text = path.read_text()
        # A bundled name resolves from the harness's scratch folder; a relative path would not.
        add(out, "scenario_yaml", text + ("\0" + overrides[i % len(overrides)] if overrides[i % len(overrides)] else ""))
    for path in bundled("bench/fidelity/*.yaml"):
        add(out, "scenario_yaml", path.read_text())


def seed_models_and_hardware(out):
    for path in bundled("models/*.yaml"):
        add(out, "model_hardware_yaml", "m" + path.read_text())
    for path in bundled("hardware/*.yaml") + bundled("bench/fidelity/hardware/*.yaml"):
        add(out, "model_hardware_yaml", "h" + path.read_text())
    for path in bundled("models/hf/*.json"):
        add(out, "model_hardware_yaml", "j" + path.read_text())


def seed_ds_config(out):
    for path in bundled("tests/data/*.json"):
        add(out, "ds_config_json", path.read_text())
    add(out, "ds_config_json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},\n'
        ' "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e7,\n'
        '   "offload_param": {"device": "cpu", "pin_memory": true}}}\n')


def seed_samples(out, cli):
    rows = ["iteration,rank,phase,wait_ns,interval_ns"]
    for it in range(1, 4):
        for rank in range(2):
            for phase in ("forward", "backward"):
                rows.append("%d,%d,%s,%d,%d" % (it, rank, phase, 1000 * it, 25000 + rank))
    for controller in (b"\0", b"\1", b"\2"):
        add(out, "samples_csv", controller + ("\n".join(rows) + "\n").encode())
    if cli:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([cli, "run", str(ROOT / "scenarios/tiny-llama-2x-h100.yaml"), "--set",
                            "training.iterations=3", "--set", "output.trace=false", "--no-expect",
                            "-o", tmp], check=True, stdout=subprocess.DEVNULL)
            text = (Path(tmp) / "samples.csv").read_bytes()
            add(out, "samples_csv", b"\1" + text[:20000])


def seed_nccl(out, cli):
    for path in bundled("tests/data/*.log"):
        add(out, "nccl_tests_log", path.read_bytes())
    if cli:
        for op in ("all_gather", "reduce_scatter", "all_reduce"):
            run = subprocess.run([cli, "collective", "--hardware", "h100-sxm-8x", "--op", op, "--ranks", "8"],
                                 check=True, capture_output=True)
            add(out, "nccl_tests_log", run.stdout)
    # The harness reads the same bytes as a host-costs CSV (calibrate --from-host-costs) too.
    add(out, "nccl_tests_log", b"call,bytes_per_rank,world_size,way,us_per_call,gpu\n"
                               b"all_reduce,4096,1,issue,40.5,H100\nall_gather,4096,1,profiled,\"63\",\"H100, SXM\"\n")


def seed_sweep(out):
    grids = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs/tuning.md").read_text(), re.S)
    grids = [g for g in grids if re.search(r"^\S+: \[", g, re.M)]
    results_grid = ("zero.stage3_prefetch_bucket_size: [1e6, 5e6]\nzero.stage3_max_live_parameters: [1e8, 1e9]\n"
                    "noise.seed: [1, 2]\n")
    results = (ROOT / "tests/data/plots/sweep/results.csv").read_text()
    for grid in grids:
        add(out, "sweep_files", grid)
    add(out, "sweep_files", results_grid + "\0" + results)


def seed_allocator(out):
    add(out, "allocator_sequence", "op,id,bytes\nmalloc,a,1000\nmalloc,b,3000000\nfree,a,\nmalloc,a,512\nfree,b,\n")
    # The sequence PyTorch replays too (gpu_backend/torch_allocator_compare.py), loaded by path.
    spec = importlib.util.spec_from_file_location("tac", ROOT / "gpu_backend" / "torch_allocator_compare.py")
    tac = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tac)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sequence.csv"
        tac.write_sequence(str(path), tac.make_sequence(1))
        add(out, "allocator_sequence", path.read_bytes()[:20000])


# A hand-written trace of each metadata generation: a step, an NCCL kernel with the new collective
# arguments, a torch-level call with the old sizes-only form, a memory event; two ranks.
MINIMAL_TRACE = (
    '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 2}, "traceEvents": ['
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 900},'
    '{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10, "dur": 30,'
    ' "args": {"Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 2048,'
    ' "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Seq": 1}},'
    '{"ph": "X", "cat": "cpu_op", "name": "c10d::allgather_", "pid": 1, "tid": 1, "ts": 50, "dur": 20,'
    ' "args": {"Input Dims": [[1024]]}},'
    '{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",'
    ' "pid": 0, "tid": 7, "ts": %d, "dur": 40, "args": {"device": 0, "stream": 7, "Collective name": "allgather",'
    ' "In msg nelems": 1024, "Out msg nelems": 2048, "Group size": 2, "dtype": "BFloat16",'
    ' "Process Group Name": "0", "Seq": 1}},'
    '{"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_128x128", "pid": 0, "tid": 7,'
    ' "ts": 200, "dur": 300, "args": {"device": 0, "stream": 7}},'
    '{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 60,'
    ' "args": {"Total Allocated": 4096, "Total Reserved": 8192, "Bytes": 4096, "Device Id": 0}}]}')


def seed_kineto(out, cli):
    add(out, "kineto_trace", (MINIMAL_TRACE % (0, 100)) + "\0" + (MINIMAL_TRACE % (1, 110)))
    add(out, "kineto_trace", MINIMAL_TRACE % (0, 100))
    if cli:
        # A simulated run written as torch.profiler writes it, cut to each rank's first events.
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([cli, "run", str(ROOT / "scenarios/tiny-llama-2x-h100.yaml"), "--set",
                            "training.iterations=2", "--set", "training.warmup_iterations=0", "--set",
                            "output.trace=false", "--no-expect", "-o", tmp, "--kineto-trace",
                            str(Path(tmp) / "kineto")], check=True, stdout=subprocess.DEVNULL)
            ranks = []
            for path in sorted((Path(tmp) / "kineto").iterdir()):
                doc = json.loads(path.read_text())
                doc["traceEvents"] = doc["traceEvents"][:40]
                ranks.append(json.dumps(doc))
            add(out, "kineto_trace", "\0".join(ranks[:2]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cli", help="a built prefetchlab, for samples.csv and nccl-tests tables")
    args = parser.parse_args()
    seed_scenarios(args.out)
    seed_models_and_hardware(args.out)
    seed_ds_config(args.out)
    seed_samples(args.out, args.cli)
    seed_nccl(args.out, args.cli)
    seed_sweep(args.out)
    seed_allocator(args.out)
    seed_kineto(args.out, args.cli)
    for folder in sorted(args.out.iterdir()):
        print("%s: %d seeds" % (folder.name, len(list(folder.iterdir()))))


if __name__ == "__main__":
    main()
