#!/usr/bin/python3
"""Tests of bench/host_costs/torch_call_host_costs.py on a machine without PyTorch or a GPU (as in
CI): without torch it says so and writes nothing; with a stand-in torch (a CUDA device and NCCL
that record what they are asked, a clock that advances per call) it runs every call, size and way
of its table, issues each call as its docstring says, and writes one row for each; bad arguments
are refused. With PREFETCHLAB_CLI naming the prefetchlab binary, the CSV it writes calibrates a
profile (calibrate --from-host-costs).
"""
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "host_costs", "torch_call_host_costs.py")
CLI = os.environ.get("PREFETCHLAB_CLI")  # the prefetchlab binary, if given

# A stand-in torch: enough of torch, torch.cuda, torch.distributed and torch.profiler for the
# script, logging every collective, synchronisation and profiling session to $FAKE_TORCH_LOG.
FAKE_TORCH = textwrap.dedent('''
    import os
    __version__ = "0.0-fake"
    bfloat16 = "bf16"
    _log = open(os.environ["FAKE_TORCH_LOG"], "a")
    def log(what):
        _log.write(what + "\\n")
        _log.flush()
    class Tensor:
        def __init__(self, n):
            self.n = n
        def element_size(self):
            return 2
    def tensor(values, dtype=None, device=None):
        return Tensor(len(values))
    def ones(n, dtype=None, device=None):
        return Tensor(n)
    def empty(n, dtype=None, device=None):
        return Tensor(n)
    def empty_like(t):
        return Tensor(t.n)
    def device(kind, index=0):
        return (kind, index)
    class _Cuda:
        class nccl:
            @staticmethod
            def version():
                return (2, 99, 1)
        @staticmethod
        def is_available():
            return True
        @staticmethod
        def set_device(index):
            pass
        @staticmethod
        def synchronize():
            log("synchronize")
        @staticmethod
        def get_device_name(dev):
            return "Fake GPU"
    cuda = _Cuda()
    class _Dist:
        def is_available(self):
            return True
        def is_nccl_available(self):
            return True
        def init_process_group(self, backend, **kwargs):
            log("init " + backend)
        def destroy_process_group(self):
            log("destroy")
        def get_world_size(self):
            return 1
        def get_rank(self):
            return 0
        def all_reduce(self, t):
            log("all_reduce %d" % t.n)
        def all_gather(self, outs, t):
            log("all_gather %d x%d" % (t.n, len(outs)))
        def all_gather_into_tensor(self, out, t):
            log("all_gather_into_tensor %d" % t.n)
        def reduce_scatter(self, t, ins):
            log("reduce_scatter %d x%d" % (t.n, len(ins)))
        def reduce_scatter_tensor(self, t, big):
            log("reduce_scatter_tensor %d" % t.n)
        def barrier(self):
            log("barrier")
    distributed = _Dist()
    import sys as _sys
    _sys.modules["torch.distributed"] = distributed
    class _Profiler:
        class ProfilerActivity:
            CPU = "cpu"
            CUDA = "cuda"
        class profile:
            def __init__(self, activities, with_stack=False):
                self.with_stack = with_stack
            def __enter__(self):
                log("profile start stack=%s" % self.with_stack)
                return self
            def __exit__(self, *exc):
                log("profile stop")
                return False
    profiler = _Profiler()
''')


def run_script(tmp, *args, fake=True):
    fake_dir = os.path.join(tmp, "fake")
    os.makedirs(os.path.join(fake_dir, "torch"), exist_ok=True)
    with open(os.path.join(fake_dir, "torch", "__init__.py"), "w") as f:
        f.write(FAKE_TORCH if fake else "raise ImportError('no torch in this test')\n")
    env = dict(os.environ, PYTHONPATH=fake_dir, PYTHONDONTWRITEBYTECODE="1", FAKE_TORCH_LOG=os.path.join(tmp, "log"))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env)


def load_module():
    spec = importlib.util.spec_from_file_location("tchc", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TorchCallHostCostsTest(unittest.TestCase):
    def test_without_torch_says_so_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "costs.csv")
            run = run_script(tmp, out, fake=False)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("PyTorch is not installed here", run.stdout)
            self.assertFalse(os.path.exists(out))

    def test_every_call_size_and_way_measured_once(self):
        m = load_module()
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "costs.csv")
            run = run_script(tmp, out, "--repeats", "3", "--calls", "4", "--warmup", "2")
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out, newline="") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(tuple(rows[0].keys()), m.FIELDS)
            expected = {(c, str(b), w) for c in m.CALLS for b in ((0,) if c == "barrier" else m.BYTES_PER_RANK)
                        for w in m.WAYS}
            got = [(r["call"], r["bytes_per_rank"], r["way"]) for r in rows]
            self.assertEqual(len(got), len(set(got)))
            self.assertEqual(set(got), expected)
            for r in rows:
                self.assertGreaterEqual(float(r["us_per_call"]), 0.0)
                self.assertEqual((r["gpu"], r["nccl"], r["torch"], r["world_size"]), ("Fake GPU", "2.99.1", "0.0-fake", "1"))
            with open(os.path.join(tmp, "log")) as f:
                log = [line.strip() for line in f]
        # Sizes in elements of 2 bytes; the list forms take one tensor per rank.
        self.assertIn("all_reduce 2048", log)
        self.assertIn("all_gather 524288 x1", log)
        self.assertIn("reduce_scatter_tensor 2048", log)
        # Each row: warm-up, then repeats x calls; profiled rows one session per batch, with and
        # without stacks.
        per_row = 2 + 3 * 4
        self.assertEqual(log.count("all_gather_into_tensor 2048"), per_row * len(m.WAYS))
        self.assertEqual(log.count("profile start stack=True"), 3 * (len(m.CALLS) * 2 - 1))
        self.assertEqual(log.count("profile start stack=False"), 3 * (len(m.CALLS) * 2 - 1))
        # IBM's iteration, and only it: the all-reduce, a synchronisation, then the barrier.
        ibm = [k for k in range(len(log) - 2) if log[k:k + 3] == ["all_reduce 2048", "synchronize", "barrier"]]
        self.assertEqual(len(ibm), per_row * len(m.WAYS))

    @unittest.skipIf(CLI is None, "needs PREFETCHLAB_CLI=PATH/TO/prefetchlab")
    def test_its_csv_calibrates_a_profile(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "costs.csv")
            run = run_script(tmp, out, "--repeats", "1", "--calls", "2", "--warmup", "0")
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            profile = os.path.join(tmp, "machine.yaml")
            cal = subprocess.run([CLI, "calibrate", "--from-host-costs", out, "-o", profile],
                                 capture_output=True, text=True)
            self.assertEqual(cal.returncode, 0, cal.stdout + cal.stderr)
            self.assertIn("median of 3 call(s)", cal.stdout)
            with open(profile) as f:
                self.assertIn("host_speed:", f.read())

    def test_per_call_is_the_median_batch_mean(self):
        m = load_module()
        ticks = iter([0.0, 0.010, 1.0, 1.004, 2.0, 2.030])  # batches of 10 calls: 1000, 400, 3000 us/call
        us = m.per_call_us(lambda n: None, 10, 3, clock=lambda: next(ticks))
        self.assertAlmostEqual(us, 1000.0)

    def test_nccl_version_as_tuple_or_integer(self):
        m = load_module()
        self.assertEqual(m.nccl_version_text((2, 21, 5)), "2.21.5")
        self.assertEqual(m.nccl_version_text(2708), "2708")

    def test_bad_arguments_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            for args in (["--calls", "0"], ["--repeats", "0"], ["--warmup", "-1"]):
                run = run_script(tmp, os.path.join(tmp, "x.csv"), *args)
                self.assertEqual(run.returncode, 2, args)
                self.assertIn("must be >= 1", run.stderr)


if __name__ == "__main__":
    unittest.main()
