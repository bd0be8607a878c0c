#!/usr/bin/python3
"""Tests of gpu_backend/torch_allocator_compare.py where PyTorch is missing (as in CI): the script
says so, still replays its sequence through `prefetchlab allocator-replay`, writes the comparison
table with the C++ column filled and the torch column empty, and its sequence is deterministic
and exercises the rules it names (sizes on both sides of 1 MiB, frees out of order).

  allocator_compare_test.py --cli PATH/TO/prefetchlab
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "gpu_backend", "torch_allocator_compare.py")
CLI = os.path.join(ROOT, "build", "apps", "prefetchlab")


def run_script(out, seed=1):
    # A torch that fails to import, first on the path: the script must treat it as missing.
    fake = os.path.join(out, "fake-torch")
    os.makedirs(os.path.join(fake, "torch"), exist_ok=True)
    with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
        f.write("raise ImportError('no torch in this test')\n")
    env = dict(os.environ, PYTHONPATH=fake, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    return subprocess.run([sys.executable, SCRIPT, "--cli", CLI, "--out", os.path.join(out, "o"), "--seed", str(seed)],
                          capture_output=True, text=True, env=env)


class WithoutTorchTest(unittest.TestCase):
    def test_runs_the_cpp_side_and_says_torch_is_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = run_script(tmp)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn("PyTorch is not available", run.stdout)
            self.assertIn("only the C++ side ran", run.stdout)
            out = os.path.join(tmp, "o")
            with open(os.path.join(out, "cpp_stats.json")) as f:
                cpp = json.load(f)["memory_stats"]
            with open(os.path.join(out, "compare.csv")) as f:
                rows = list(csv.reader(f))
            self.assertEqual(rows[0], ["stat", "torch", "prefetchlab", "difference"])
            self.assertGreater(len(rows), 10)
            for stat, torch_value, cpp_value, difference in rows[1:]:
                self.assertEqual(torch_value, "", stat)
                self.assertEqual(difference, "", stat)
                self.assertEqual(int(cpp_value), cpp[stat], stat)
            stats = {r[0]: int(r[2]) for r in rows[1:]}
            self.assertGreaterEqual(stats["reserved_bytes.all.peak"], stats["allocated_bytes.all.peak"])
            self.assertGreater(stats["segment.small_pool.peak"], 0)
            self.assertGreater(stats["segment.large_pool.peak"], 0)

    def test_the_sequence_is_deterministic_and_mixed(self):
        with tempfile.TemporaryDirectory() as tmp:
            texts = []
            for sub in ("a", "b"):
                os.makedirs(os.path.join(tmp, sub))
                run = run_script(os.path.join(tmp, sub))
                self.assertEqual(run.returncode, 0, run.stderr)
                with open(os.path.join(tmp, sub, "o", "sequence.csv")) as f:
                    texts.append(f.read())
            self.assertEqual(texts[0], texts[1])
            rows = list(csv.reader(texts[0].splitlines()))[1:]
            sizes = [int(r[2]) for r in rows if r[0] == "malloc"]
            self.assertTrue(any(s < 1024 * 1024 for s in sizes))
            self.assertTrue(any(s > 20 * 1024 * 1024 for s in sizes))
            self.assertIn(1024 * 1024, sizes)
            self.assertIn(1024 * 1024 + 1, sizes)
            # Frees out of order: some free is not of the most recent live allocation.
            live, out_of_order = [], 0
            for op, name, _ in rows:
                if op == "malloc":
                    live.append(name)
                else:
                    out_of_order += name != live[-1]
                    live.remove(name)
            self.assertGreater(out_of_order, 0)

    def test_a_failing_replay_is_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
            run = subprocess.run([sys.executable, SCRIPT, "--cli", "/bin/false", "--out", tmp],
                                 capture_output=True, text=True, env=env)
            self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
            self.assertIn("allocator-replay failed", run.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--cli":
        CLI = sys.argv[2]
        del sys.argv[1:3]
    unittest.main()
