#!/usr/bin/python3
"""Tests of plots/: each script runs headless, its figure's data (bar spans, line and bar values,
heatmap cells, Pareto front) equal the input's values, and bad or missing input gives one clear
line naming the file and what is wrong, exit code 2, no traceback.

Run inputs are produced here by the built CLI on scenarios/tiny-llama-2x-h100.yaml (a few tens
of milliseconds per run); the sweep and validate inputs are hand-made fixtures in
tests/data/plots/ (their producers are not in the tree yet; the column contracts are in
plots/sweep.py and plots/validate.py --help).

  plots_test.py [--cli PATH/TO/prefetchlab] [unittest arguments, e.g. TimelineTest]
"""
import contextlib
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOTS = os.path.join(ROOT, "plots")
DATA = os.path.join(ROOT, "tests", "data", "plots")
SCENARIO = os.path.join(ROOT, "scenarios", "tiny-llama-2x-h100.yaml")
CLI = os.path.join(ROOT, "build", "apps", "prefetchlab")
sys.path.insert(0, PLOTS)

import numpy as np  # noqa: E402

import buckets  # noqa: E402
import memory  # noqa: E402
import plotlib  # noqa: E402
import render_all  # noqa: E402
import sweep  # noqa: E402
import timeline  # noqa: E402
import validate  # noqa: E402

GIB = float(1 << 30)


def simulate(out, *sets):
    """Runs the real binary on the tiny scenario into `out`; returns `out`. Every rank is
    simulated: the plots draw one line per rank (a collapsed run has one rank's timelines)."""
    command = [CLI, "run", SCENARIO, "-o", out, "--every-rank"]
    if sets:
        command.append("--no-expect")  # the scenario's expect: describes it as written
    for s in sets:
        command += ["--set", s]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return out


def script(name, *args):
    """Runs plots/<name> as a command with this (system) Python; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PREFETCHLAB_PLOTS_DEBUG", None)
    return subprocess.run([sys.executable, os.path.join(PLOTS, name), *args],
                          capture_output=True, text=True, env=env)


def command(name, *args):
    """Runs plots/<name>'s command line in this process (its main() through plotlib.run_cli, as
    the script's __main__ does): the same exit code and output as script(), without starting
    Python and matplotlib again. Returns an object with returncode, stdout, stderr."""
    module = {"timeline.py": timeline, "buckets.py": buckets, "memory.py": memory,
              "sweep.py": sweep, "validate.py": validate, "render_all.py": render_all}[name]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = plotlib.run_cli(module.main, list(args), prog=f"plots/{name}")
        except SystemExit as e:  # argparse
            code = e.code
    return subprocess.CompletedProcess([name, *args], code, out.getvalue(), err.getvalue())


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_text(path):
    with open(path) as f:
        return f.read()


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def lines_by_label(fig):
    return {line.get_label(): line for ax in fig.axes for line in ax.get_lines()
            if not line.get_label().startswith("_")}


def artist(fig, gid):
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    if len(found) != 1:
        raise AssertionError(f"expected one artist with gid {gid!r}, found {len(found)}")
    return found[0]


class Case(unittest.TestCase):
    """Temporary folder per class; helpers for the error contract."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="plots-test-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def folder(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        return path

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def assertInputError(self, done, *fragments):
        """A clean bad-input failure: exit 2, no traceback, one error line with each fragment."""
        self.assertEqual(done.returncode, 2, f"stdout: {done.stdout}\nstderr: {done.stderr}")
        self.assertNotIn("Traceback", done.stderr)
        errors = [l for l in done.stderr.splitlines() if ": error: " in l]
        self.assertEqual(len(errors), 1, done.stderr)
        for fragment in fragments:
            self.assertIn(fragment, errors[0])

    def assertRaisesInput(self, fragment, function, *args, **kwargs):
        with self.assertRaises(plotlib.PlotInputError) as caught:
            function(*args, **kwargs)
        self.assertIn(fragment, str(caught.exception))


# ---------------------------------------------------------------------------------------------

class CommonTest(Case):
    def test_every_script_has_help_and_a_docs_entry(self):
        readme = read_text(os.path.join(ROOT, "docs", "plots.md"))
        self.assertTrue("\n## Plots\n" in readme, "docs/plots.md has no '## Plots' section")
        plots_section = readme.split("\n## Plots\n", 1)[-1].split("\n## ", 1)[0]
        scripts = sorted(f for f in os.listdir(PLOTS) if f.endswith(".py") and f != "plotlib.py")
        self.assertEqual(scripts, ["buckets.py", "memory.py", "render_all.py", "sweep.py",
                                   "timeline.py", "validate.py"])
        # Started by its #! line, as docs/plots.md shows: the system Python finds Debian's matplotlib.
        done = subprocess.run([os.path.join(PLOTS, "render_all.py"), "--help"], capture_output=True,
                              text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(done.returncode, 0, done.stderr)
        for name in scripts:
            done = command(name, "--help")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(f"usage: plots/{name}", done.stdout)
            self.assertIn("example: plots/" + name, done.stdout)
            self.assertTrue(f"plots/{name}" in plots_section, f"docs/plots.md's Plots section does not show {name}")
            self.assertTrue(os.access(os.path.join(PLOTS, name), os.X_OK), f"{name} is not executable")
            with open(os.path.join(PLOTS, name)) as f:
                self.assertEqual(f.readline().strip(), "#!/usr/bin/python3",
                                 f"{name} must run with the system Python (Debian's matplotlib)")

    def test_csv_reader_errors_name_file_line_and_column(self):
        path = self.write(os.path.join(self.tmp, "t.csv"), "a,b\n1,2\n3,x\n4\n")
        self.assertRaisesInput("t.csv: line 4 has 1 fields, the header has 2", plotlib.read_csv, path)
        path = self.write(os.path.join(self.tmp, "t.csv"), "a,b\n1,2\n3,x\n")
        table = plotlib.read_csv(path, ("a", "b"))
        self.assertEqual(table.numbers("a", integer=True).tolist(), [1, 3])
        self.assertRaisesInput("t.csv: line 3, column 'b': expected a number, got 'x'", table.numbers, "b")
        nan = self.write(os.path.join(self.tmp, "n.csv"), "a\n1.5\nnan\n")
        self.assertRaisesInput("n.csv: line 3, column 'a': expected a finite number, got 'nan'",
                               plotlib.read_csv(nan).numbers, "a")
        self.assertRaisesInput("n.csv: line 2, column 'a': expected an integer, got '1.5'",
                               plotlib.read_csv(nan).numbers, "a", integer=True)
        self.assertRaisesInput("t.csv: missing column 'c' (the header has: a, b)", plotlib.read_csv, path, ("c",))
        self.assertRaisesInput("missing columns 'c', 'd'", plotlib.read_csv, path, ("a", "c", "d"))
        self.assertRaisesInput("nope.csv: not found", plotlib.read_csv, os.path.join(self.tmp, "nope.csv"))
        path = self.write(os.path.join(self.tmp, "e.csv"), "")
        self.assertRaisesInput("e.csv: is empty; expected a header line", plotlib.read_csv, path)
        path = self.write(os.path.join(self.tmp, "d.csv"), "a,a\n1,2\n")
        self.assertRaisesInput("column 'a' appears more than once", plotlib.read_csv, path)
        path = self.write(os.path.join(self.tmp, "j.json"), '{"a": [1,\n')
        self.assertRaisesInput("j.json: invalid JSON at line 2", plotlib.read_json, path)

    def test_small_helpers(self):
        self.assertEqual(plotlib.parse_ranks("0-2,5"), [0, 1, 2, 5])
        self.assertEqual(plotlib.format_count(1e5), "1e5")
        self.assertEqual(plotlib.format_count(6400000), "6.4e6")
        self.assertEqual(plotlib.format_count(500), "500")
        self.assertEqual(plotlib.format_duration(360), "360 ns")
        self.assertEqual(plotlib.format_duration(3884000), "3.884 ms")

    def test_bad_input_as_a_real_process(self):
        # The other classes check error messages in-process (command()); here the real thing.
        missing = os.path.join(self.tmp, "no-such-run")
        for name in ("timeline.py", "sweep.py"):
            done = script(name, missing, "-o", os.path.join(self.tmp, "x.png"))
            self.assertInputError(done, f"{missing}: no such file or folder")

    def test_unwritable_output_is_exit_1_without_traceback(self):
        blocker = self.write(os.path.join(self.tmp, "file"), "x")
        done = script("validate.py", os.path.join(DATA, "validate.csv"), "-o",
                      os.path.join(blocker, "v.png"))
        self.assertEqual(done.returncode, 1)
        self.assertIn("cannot write the figure", done.stderr)
        self.assertNotIn("Traceback", done.stderr)


# ---------------------------------------------------------------------------------------------

class TimelineTest(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A 100 us collective latency so that compute waits for its gathers in every iteration:
        # at DeepSpeed's host costs the host's own work between an on-demand gather and its use
        # hides the tiny run's collectives while it records (iteration 1).
        cls.run_dir = simulate(os.path.join(cls.tmp, "run"), "cluster.calibration.collective_latency_us=100")
        with open(os.path.join(cls.run_dir, "trace.json")) as f:
            cls.document = json.load(f)

    def expected(self, iteration):
        """{(pid, tid): sorted [(start ns since the iteration's first event, duration ns)]}, the
        stall events, and the thread names, straight from the JSON."""
        events = [e for e in self.document["traceEvents"]
                  if e["ph"] == "X" and e["args"]["iteration"] == iteration]
        t0 = min(round(e["ts"] * 1000) for e in events)
        spans = {}
        for e in events:
            spans.setdefault((e["pid"], e["tid"]), []).append(
                (round(e["ts"] * 1000) - t0, round(e["dur"] * 1000)))
        stalls = [(e["pid"], e["tid"], round(e["ts"] * 1000) - t0, round(e["dur"] * 1000))
                  for e in events if e["name"] == "stall: waiting for parameters"]
        return {k: sorted(v) for k, v in spans.items()}, stalls

    def drawn(self, fig):
        """{(pid, tid): sorted [(start ns, duration ns)]} from the broken_barh collections, and
        {(pid, tid): [(category, count)]}."""
        spans, categories = {}, {}
        for collection in fig.axes[0].collections:
            gid = collection.get_gid()
            if not gid or not gid.startswith("bars:"):
                continue
            _, pid, tid, cat = gid.split(":")
            key = (int(pid), int(tid))
            for path in collection.get_paths():
                xs = path.vertices[:, 0]
                spans.setdefault(key, []).append(
                    (round(xs.min() * 1e6), round((xs.max() - xs.min()) * 1e6)))
            categories.setdefault(key, []).append((cat, len(collection.get_paths())))
        return {k: sorted(v) for k, v in spans.items()}, categories

    def test_bars_equal_the_trace_events_of_the_iteration(self):
        trace = plotlib.read_trace(os.path.join(self.run_dir, "trace.json"))
        for iteration in (1, 4):
            fig = timeline.build_figure(trace, iteration)
            expected, stalls = self.expected(iteration)
            drawn, categories = self.drawn(fig)
            self.assertEqual(drawn, expected, f"iteration {iteration}")
            # Every track of both ranks is a row: host, compute, all-gather, reduce-scatter, NCCL.
            labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
            self.assertEqual(len(labels), 10)
            self.assertTrue(labels[1].startswith("rank 0 · compute stream"))
            self.assertTrue(labels[5].startswith("rank 1 · host thread"))
            # Stalls: red bars on the compute stream only, and one marker per stall at its middle.
            self.assertTrue(stalls, "the tiny run stalls in every iteration")
            for (pid, tid), cats in categories.items():
                stall_count = sum(n for c, n in cats if c == "stall")
                mine = sorted((s, d) for p, t, s, d in stalls if (p, t) == (pid, tid))
                self.assertEqual(stall_count, len(mine))
                if mine:
                    self.assertEqual(tid, 1, "stalls are on the compute stream")
                    bars = next(c for c in fig.axes[0].collections
                                if c.get_gid() == f"bars:{pid}:{tid}:stall")
                    self.assertEqual(tuple(bars.get_facecolor()[0][:3]),
                                     tuple(int(timeline.COLOURS["stall"][i:i + 2], 16) / 255
                                           for i in (1, 3, 5)))
                    markers = artist(fig, f"stalls:{pid}:{tid}").get_xdata()
                    self.assertEqual(sorted(round(x * 1e6 * 2) for x in markers),
                                     sorted(2 * s + d for s, d in mine))
                    self.assertIn("(stall ", labels[pid * 5 + tid])

    def test_collectives_coloured_by_kind(self):
        trace = plotlib.read_trace(os.path.join(self.run_dir, "trace.json"))
        record = {gid.split(":")[3] for gid in (c.get_gid() for c in
                  timeline.build_figure(trace, 1).axes[0].collections) if gid}
        steady = {gid.split(":")[3] for gid in (c.get_gid() for c in
                  timeline.build_figure(trace, 4).axes[0].collections) if gid}
        self.assertIn("all_gather_on_demand", record)  # the recording iteration fetches on demand
        self.assertIn("all_gather_prefetch", steady)
        self.assertTrue({"forward", "backward", "optimizer", "reduce_scatter", "host", "stall"} <= steady)
        self.assertNotIn("other", record | steady, "every trace event name has a category")

    def test_default_is_the_last_iteration_and_ranks_filter(self):
        trace = plotlib.read_trace(os.path.join(self.run_dir, "trace.json"))
        self.assertIn("iteration 6,", timeline.build_figure(trace).axes[0].get_title())
        drawn, _ = self.drawn(timeline.build_figure(trace, 6, ranks=[1]))
        self.assertEqual({pid for pid, _ in drawn}, {1})

    def test_cli_writes_png(self):
        out = os.path.join(self.tmp, "t.png")
        done = script("timeline.py", self.run_dir, "--iteration", "2", "--dpi", "50", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(is_png(out))

    def test_bad_input(self):
        empty = self.folder("empty")
        self.assertInputError(command("timeline.py", empty, "-o", "x.png"), "trace.json: not found")
        self.assertInputError(command("timeline.py", self.run_dir, "--iteration", "9", "-o", "x.png"),
                              "trace.json: has no events of iteration 9 (iterations present: 1..6)")
        self.assertInputError(command("timeline.py", self.run_dir, "--ranks", "3", "-o", "x.png"),
                              "has no rank 3")
        bad = self.folder("bad")
        text = read_text(os.path.join(self.run_dir, "trace.json"))
        self.write(os.path.join(bad, "trace.json"), text[: len(text) // 2])
        self.assertInputError(command("timeline.py", bad, "-o", "x.png"), "trace.json: invalid JSON at line")
        self.write(os.path.join(bad, "trace.json"), '{"displayTimeUnit": "ns"}')
        self.assertInputError(command("timeline.py", bad, "-o", "x.png"), "missing key 'traceEvents'")
        self.write(os.path.join(bad, "trace.json"), '{"traceEvents": [{"ph": "X", "pid": 0, "tid": 1}]}')
        self.assertInputError(command("timeline.py", bad, "-o", "x.png"),
                              "event 0 (?): complete event without numeric 'ts' and 'dur'")


# ---------------------------------------------------------------------------------------------

class BucketsTest(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.static = simulate(os.path.join(cls.tmp, "static"))
        cls.pace = simulate(os.path.join(cls.tmp, "pace"), "controller.policy=pace_search",
                            "training.iterations=10")

    def test_one_line_per_run_equal_to_buckets_csv(self):
        fig = buckets.build_figure([buckets.load(self.static), buckets.load(self.pace)])
        lines = lines_by_label(fig)
        self.assertEqual(sorted(lines), ["tiny-llama-2x-h100 (pace_search)", "tiny-llama-2x-h100 (static)"])
        for run, label in ((self.static, "static"), (self.pace, "pace_search")):
            rows = [r for r in read_rows(os.path.join(run, "buckets.csv")) if r["rank"] == "0"]
            line = lines[f"tiny-llama-2x-h100 ({label})"]
            self.assertEqual(line.get_xdata().tolist(), [int(r["iteration"]) for r in rows])
            self.assertEqual(line.get_ydata().tolist(), [float(r["bucket_numel"]) for r in rows])
        self.assertGreater(len(set(lines["tiny-llama-2x-h100 (pace_search)"].get_ydata())), 1,
                           "pace_search changes the bucket")
        self.assertEqual(fig.axes[0].get_yscale(), "log")

    def test_ranks_that_disagree_get_a_line_each(self):
        folder = self.folder("split")
        rows = read_rows(os.path.join(self.static, "buckets.csv"))
        text = "iteration,rank,bucket_numel\n" + "".join(
            f"{r['iteration']},{r['rank']},{int(r['bucket_numel']) * (2 if r['rank'] == '1' else 1)}\n"
            for r in rows)
        self.write(os.path.join(folder, "buckets.csv"), text)
        lines = lines_by_label(buckets.build_figure([buckets.load(folder)]))
        self.assertEqual(sorted(lines), ["split rank 0", "split rank 1"])  # no summary.json: folder name
        self.assertEqual(set(lines["split rank 1"].get_ydata()), {200000.0})

    def test_cli_and_bad_input(self):
        out = os.path.join(self.tmp, "b.png")
        done = script("buckets.py", self.static, self.pace, "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(is_png(out))
        bad = self.folder("bad")
        self.write(os.path.join(bad, "buckets.csv"), "iteration,rank\n1,0\n")
        self.assertInputError(command("buckets.py", self.static, bad, "-o", out),
                              "buckets.csv: missing column 'bucket_numel' (the header has: iteration, rank)")
        self.write(os.path.join(bad, "buckets.csv"), "iteration,rank,bucket_numel\n1,0,1e5\n1,0,1e5\n")
        self.assertInputError(command("buckets.py", bad, "-o", out),
                              "buckets.csv: line 3: iteration 1 rank 0 appears twice (also line 2)")
        self.write(os.path.join(bad, "buckets.csv"), "iteration,rank,bucket_numel\none,0,1e5\n")
        self.assertInputError(command("buckets.py", bad, "-o", out),
                              "line 2, column 'iteration': expected an integer, got 'one'")
        self.assertInputError(command("buckets.py", self.folder("none"), "-o", out),
                              "buckets.csv: not found; expected a PrefetchLab run folder with buckets.csv")
        self.write(os.path.join(bad, "buckets.csv"), "iteration,rank,bucket_numel\n1,0,1\n")
        self.write(os.path.join(bad, "summary.json"), "{")
        self.assertInputError(command("buckets.py", bad, "-o", out), "summary.json: invalid JSON")


# ---------------------------------------------------------------------------------------------

class MemoryTest(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.run_dir = simulate(os.path.join(cls.tmp, "run"))

    def test_lines_equal_memory_csv(self):
        per_rank, starts = memory.load(self.run_dir)
        fig = memory.build_figure(per_rank, starts)
        lines = lines_by_label(fig)
        rows = read_rows(os.path.join(self.run_dir, "memory.csv"))
        for rank in ("0", "1"):
            mine = [r for r in rows if r["rank"] == rank]
            t = [int(r["time_ns"]) / 1e6 for r in mine]
            for kind in ("allocated", "reserved"):
                line = lines[f"rank {rank} {kind}"]
                self.assertEqual(line.get_xdata().tolist(), t)
                self.assertEqual(line.get_ydata().tolist(), [int(r[f"{kind}_bytes"]) / GIB for r in mine])
                self.assertEqual(line.get_drawstyle(), "steps-post")
        iteration_lines = [l for l in fig.axes[0].get_lines() if l.get_gid() == "iteration-start"]
        self.assertEqual([l.get_xdata()[0] for l in iteration_lines],
                         [int(r["start_ns"]) / 1e6 for r in read_rows(os.path.join(self.run_dir, "iterations.csv"))])
        peak = max(int(r["reserved_bytes"]) for r in rows) / GIB
        self.assertIn(f"peak reserved {peak:.2f} GiB", fig.axes[0].get_title())

    def test_ranks_option_and_cli(self):
        per_rank, starts = memory.load(self.run_dir)
        self.assertEqual(sorted(lines_by_label(memory.build_figure(per_rank, starts, ranks=[1]))),
                         ["rank 1 allocated", "rank 1 reserved"])
        out = os.path.join(self.tmp, "m.png")
        done = script("memory.py", os.path.join(self.run_dir, "memory.csv"), "--ranks", "0", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(is_png(out))

    def test_bad_input(self):
        out = os.path.join(self.tmp, "m.png")
        bad = self.folder("bad")
        self.write(os.path.join(bad, "memory.csv"), "time_ns,rank,allocated_bytes\n0,0,1\n")
        self.assertInputError(command("memory.py", bad, "-o", out),
                              "memory.csv: missing column 'reserved_bytes'")
        self.write(os.path.join(bad, "memory.csv"),
                   "time_ns,rank,allocated_bytes,reserved_bytes\n5,0,1,2\n3,0,1,2\n")
        self.assertInputError(command("memory.py", bad, "-o", out),
                              "memory.csv: line 3: time_ns goes backwards for rank 0")
        self.assertInputError(command("memory.py", self.run_dir, "--ranks", "7", "-o", out),
                              "memory.csv: has no rank 7 (ranks present: 0, 1)")
        self.assertInputError(command("memory.py", os.path.join(self.tmp, "missing"), "-o", out),
                              "missing: no such file or folder")


# ---------------------------------------------------------------------------------------------

class SweepTest(Case):
    RESULTS = os.path.join(DATA, "sweep", "results.csv")
    # Hand-computed from the fixture: mean samples/s of the ok rows per (bucket, max_live) cell,
    # rows = max_live 1e8, 1e9; columns = bucket 1e6, 5e6, 2e7, 5e7. (2e7, 1e9): seed 2 ran out
    # of memory, so only seed 1 (135); (5e7, 1e9): no ok row.
    HEATMAP = [[101.0, 122.0, 126.0, 111.0],
               [105.0, 131.0, 135.0, math.nan]]
    # (peak reserved GiB, samples/s) of the front, by memory ascending: points 1, 3, 5, 9, 7, 10.
    FRONT = [(10, 102), (11, 106), (12, 124), (13, 127), (14, 132), (16, 135)]

    def test_heatmap_cells_are_the_means_of_ok_rows(self):
        results = sweep.load(self.RESULTS)
        self.assertEqual(results.keys, ["zero.stage3_prefetch_bucket_size",
                                        "zero.stage3_max_live_parameters", "noise.seed"])
        fig = sweep.build_heatmap(results)  # default axes: the first two non-seed keys
        image = artist(fig, "heatmap")
        cells = np.ma.filled(image.get_array().astype(float), np.nan)
        np.testing.assert_array_equal(cells, np.array(self.HEATMAP))
        ax = fig.axes[0]
        self.assertEqual(ax.get_xlabel(), "zero.stage3_prefetch_bucket_size")
        self.assertEqual(ax.get_ylabel(), "zero.stage3_max_live_parameters")
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["1e6", "5e6", "2e7", "5e7"])
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["1e8", "1e9"])
        texts = [t.get_text() for t in ax.texts]
        self.assertIn("135\n1/2 ok", texts)
        self.assertIn("collective_mismatch\noom", texts)

    def test_heatmap_axes_and_metric_options(self):
        results = sweep.load(self.RESULTS)
        fig = sweep.build_heatmap(results, x="noise.seed", y="zero.stage3_prefetch_bucket_size",
                                  metric="peak_reserved_bytes")
        cells = np.ma.filled(artist(fig, "heatmap").get_array().astype(float), np.nan)
        # GiB, mean over max_live of the ok rows: bucket 1e6 seed 1 -> (10 + 11) / 2.
        np.testing.assert_allclose(cells, [[10.5, 10.5], [13, 13], [14.5, 13], [20, 20]])
        self.assertIn("peak_reserved (GiB)", fig.axes[1].get_ylabel())  # the colour bar

    def test_pareto_front_and_points(self):
        results = sweep.load(self.RESULTS)
        fig = sweep.build_pareto(results)
        front = artist(fig, "pareto-front").get_xydata().tolist()
        self.assertEqual([tuple(p) for p in front], [(float(r), float(t)) for r, t in self.FRONT])
        ok = artist(fig, "ok-runs").get_offsets().tolist()
        rows = [r for r in read_rows(self.RESULTS) if r["status"] == "ok"]
        self.assertEqual(ok, [[int(r["peak_reserved_bytes"]) / GIB, float(r["samples_per_second"])]
                              for r in rows])
        labels = [t.get_text() for t in fig.axes[0].texts]
        self.assertEqual(labels, ["p1", "p3", "p5", "p9", "p7", "p10"])
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        self.assertIn("not drawn (no values): collective_mismatch ×1, oom ×2", legend)

    def test_failed_rows_never_join_the_front(self):
        text = read_text(self.RESULTS).replace(
            "14,5e7,1e9,1,oom,,,,,,,,,,", "14,5e7,1e9,1,oom,1,500,1,1,1,1,1,1073741824,1,1")
        path = self.write(os.path.join(self.tmp, "failed", "results.csv"), text)
        fig = sweep.build_pareto(sweep.load(path))
        self.assertEqual(artist(fig, "failed-runs").get_offsets().tolist(), [[1.0, 500.0]])
        self.assertEqual(len(artist(fig, "pareto-front").get_xydata()), len(self.FRONT))

    def test_pareto_front_function(self):
        # Equal points both stay; a point with equal memory and less throughput does not.
        self.assertEqual(sweep.pareto_front([1, 1, 2, 2, 3], [5, 5, 6, 4, 6]), [0, 1, 2])

    def test_cli_writes_both_figures(self):
        prefix = os.path.join(self.tmp, "out", "s")
        done = script("sweep.py", os.path.dirname(self.RESULTS), "--x", "zero.stage3_prefetch_bucket_size",
                      "--y", "noise.seed", "--metric", "tflops_per_gpu", "-o", prefix)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(is_png(prefix + "-heatmap.png") and is_png(prefix + "-pareto.png"))

    def test_bad_input(self):
        out = os.path.join(self.tmp, "x")
        header, *rows = read_text(self.RESULTS).splitlines()

        def variant(name, text):
            return self.write(os.path.join(self.tmp, name, "results.csv"), text)

        cut = variant("cut", "\n".join(",".join(l.split(",")[:-1]) for l in [header] + rows) + "\n")
        self.assertInputError(command("sweep.py", cut, "-o", out),
                              "results.csv: missing column 'final_bucket_numel'")
        nopoint = variant("nopoint", "\n".join(l.split(",", 1)[1] for l in [header] + rows) + "\n")
        self.assertInputError(command("sweep.py", nopoint, "-o", out),
                              "the first column is 'zero.stage3_prefetch_bucket_size'; expected 'point'")
        twice = variant("twice", "\n".join([header] + rows + [rows[3]]) + "\n")
        self.assertInputError(command("sweep.py", twice, "-o", out),
                              "line 18: point 3 appears twice (also line 5)")
        nokeys = variant("nokeys", "\n".join(
            ",".join(f for i, f in enumerate(l.split(",")) if i not in (1, 2, 3)) for l in [header] + rows) + "\n")
        self.assertInputError(command("sweep.py", nokeys, "-o", out),
                              "no grid-key columns between 'point' and 'status'")
        empty_ok = variant("empty_ok", "\n".join([header, rows[0].replace(",100,", ",,")]) + "\n")
        self.assertInputError(command("sweep.py", empty_ok, "-o", out),
                              "line 2, column 'samples_per_second': expected a number, got ''")
        self.assertInputError(command("sweep.py", self.RESULTS, "--x", "zero.bogus", "-o", out),
                              "--x zero.bogus is not a grid key (grid keys: zero.stage3_prefetch_bucket_size, ")
        self.assertInputError(command("sweep.py", self.RESULTS, "--metric", "speed", "-o", out),
                              "--metric speed is not a column")
        self.assertInputError(command("sweep.py", self.RESULTS, "--x", "noise.seed", "--y", "noise.seed",
                                     "-o", out), "--x and --y are both noise.seed")
        self.assertInputError(command("sweep.py", self.folder("nosweep"), "-o", out),
                              "results.csv: not found; expected a sweep folder")


# ---------------------------------------------------------------------------------------------

class ValidateTest(Case):
    CSV = os.path.join(DATA, "validate.csv")

    def test_lines_and_error_bars_equal_validate_csv(self):
        iterations, pairs = validate.load(self.CSV)
        fig = validate.build_figure(iterations, pairs)
        rows = read_rows(self.CSV)
        lines = lines_by_label(fig)
        self.assertEqual(sorted(lines), ["real forward_stall", "real step_time",
                                         "simulated forward_stall", "simulated step_time"])

        def column(name):
            return [float(r[name]) if r[name] else math.nan for r in rows]

        for metric in ("step_time", "forward_stall"):
            for side in ("real", "simulated"):
                line = lines[f"{side} {metric}"]
                self.assertEqual(line.get_xdata().tolist(), [int(r["iteration"]) for r in rows])
                np.testing.assert_array_equal(line.get_ydata(),
                                              np.array(column(f"{side}_{metric}_ns")) / 1e6)
            bars = [c for ax in fig.axes for c in ax.containers if c.get_label() == f"error {metric}"]
            self.assertEqual(len(bars), 1)
            real, sim = column(f"real_{metric}_ns"), column(f"simulated_{metric}_ns")
            np.testing.assert_allclose([b.get_height() for b in bars[0]],
                                       [100 * (s - r) / r for r, s in zip(real, sim)], rtol=1e-12)
        self.assertTrue(math.isnan(lines["real forward_stall"].get_ydata()[0]), "empty cell: a gap")
        self.assertIn("step_time: simulated vs real, mean |error|", fig.axes[0].get_title())

    def test_cli_and_bad_input(self):
        out = os.path.join(self.tmp, "v.png")
        done = script("validate.py", self.CSV, "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(is_png(out))
        bad = os.path.join(self.tmp, "bad", "validate.csv")
        self.write(bad, "iteration,real_step_time_ns\n1,5\n")
        self.assertInputError(command("validate.py", bad, "-o", out),
                              "validate.csv: missing column 'simulated_step_time_ns'")
        self.write(bad, "iteration,real_step_time_ns,simulated_step_time_ns,simulated_peak_reserved_bytes\n1,5,5,5\n")
        self.assertInputError(command("validate.py", bad, "-o", out),
                              "has column 'simulated_peak_reserved_bytes' but no 'real_peak_reserved_bytes'")
        self.write(bad, "iteration,real_step_time_ns,simulated_step_time_ns\n1,5,5\n1,6,6\n")
        self.assertInputError(command("validate.py", bad, "-o", out),
                              "line 3: iteration 1 appears twice (also line 2)")
        self.write(bad, "iteration,real_step_time_ns,simulated_step_time_ns\n1,5,fast\n")
        self.assertInputError(command("validate.py", bad, "-o", out),
                              "line 2, column 'simulated_step_time_ns': expected a number, got 'fast'")


# ---------------------------------------------------------------------------------------------

class RenderAllTest(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.run_dir = simulate(os.path.join(cls.tmp, "run"))

    def test_run_folder(self):
        out = os.path.join(self.tmp, "figs")
        done = script("render_all.py", self.run_dir, "--dpi", "40", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["buckets.png", "memory.png", "timeline.png"])
        self.assertTrue(all(is_png(os.path.join(out, f)) for f in os.listdir(out)))
        self.assertIn("skipped: no results.csv", done.stdout)

    def test_sweep_and_validate_folders(self):
        folder = self.folder("mixed")
        shutil.copy(os.path.join(DATA, "sweep", "results.csv"), folder)
        shutil.copy(os.path.join(DATA, "validate.csv"), folder)
        out = os.path.join(self.tmp, "mixed-figs")
        done = script("render_all.py", folder, "--dpi", "40", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["sweep-heatmap.png", "sweep-pareto.png", "validate.png"])

    def test_figures_match_the_single_scripts(self):
        plan = dict(render_all.figures(self.run_dir))
        (name, fig), = plan["buckets.csv"]()
        line, = fig.axes[0].get_lines()
        self.assertEqual(line.get_label(), "tiny-llama-2x-h100 (static)")
        (name, fig), = plan["trace.json"]()
        self.assertIn("iteration 6,", fig.axes[0].get_title())

    def test_bad_and_missing_input(self):
        self.assertInputError(command("render_all.py", self.folder("nothing"), "-o", self.tmp),
                              "holds none of trace.json, buckets.csv, memory.csv, results.csv, validate.csv")
        partly = self.folder("partly")
        shutil.copy(os.path.join(self.run_dir, "memory.csv"), partly)
        self.write(os.path.join(partly, "buckets.csv"), "iteration,bucket_numel\n1,5\n")
        out = os.path.join(self.tmp, "partly-figs")
        done = command("render_all.py", partly, "--dpi", "40", "-o", out)
        self.assertInputError(done, "buckets.csv: missing column 'rank'")
        self.assertEqual(os.listdir(out), ["memory.png"], "the good file is still rendered")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--cli":
        CLI = sys.argv[2]
        del sys.argv[1:3]
    unittest.main(verbosity=2)
