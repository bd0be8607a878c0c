#!/usr/bin/python3
"""Renders every figure that a PrefetchLab output folder's files allow, in one command."""
import os
import sys

import buckets
import memory
import plotlib
import sweep
import timeline
import validate

EPILOG = """\
Looks at RUN_DIR's files and renders, into OUT_DIR:
  trace.json    -> timeline.png       (plots/timeline.py; the last iteration, or --iteration)
  buckets.csv   -> buckets.png        (plots/buckets.py, this run alone)
  memory.csv    -> memory.png         (plots/memory.py)
  results.csv   -> sweep-heatmap.png, sweep-pareto.png  (plots/sweep.py, default axes/metric)
  validate.csv  -> validate.png       (plots/validate.py)
Files that are absent are skipped (and said so); a folder with none of them is an error. A file
that is present but bad is reported and the others are still rendered; the exit code is then 2.

example: plots/render_all.py out/default -o docs/figures/default
"""


def figures(folder, iteration=None, ranks=None):
    """[(input file, [(output name, function building the Figure)])] for the files present."""
    label = plotlib.run_label(folder) if os.path.isfile(os.path.join(folder, "summary.json")) else None

    def timeline_figure():
        trace = plotlib.read_trace(os.path.join(folder, "trace.json"))
        return timeline.build_figure(trace, iteration, ranks, label)

    def memory_figure():
        per_rank, starts = memory.load(folder)
        return memory.build_figure(per_rank, starts, ranks, label, os.path.join(folder, "memory.csv"))

    def sweep_figures():
        results = sweep.load(folder)
        return [("sweep-heatmap.png", sweep.build_heatmap(results)),
                ("sweep-pareto.png", sweep.build_pareto(results))]

    plan = [
        ("trace.json", lambda: [("timeline.png", timeline_figure())]),
        ("buckets.csv", lambda: [("buckets.png", buckets.build_figure([buckets.load(folder)]))]),
        ("memory.csv", lambda: [("memory.png", memory_figure())]),
        ("results.csv", sweep_figures),
        ("validate.csv", lambda: [("validate.png", validate.build_figure(*validate.load(folder)))]),
    ]
    return plan


def main(argv=None):
    p = plotlib.parser(__file__, "Render every figure applicable to an output folder.", EPILOG)
    p.add_argument("run", metavar="RUN_DIR", help="a run, sweep or validate output folder")
    p.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="folder for the PNGs")
    p.add_argument("--iteration", type=int, metavar="N", help="timeline iteration (default: the last)")
    p.add_argument("--ranks", type=plotlib.parse_ranks, metavar="LIST",
                   help="ranks for the timeline and memory figures (default: all)")
    p.add_argument("--dpi", type=int, default=100, help="resolution (default 100)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.run):
        raise plotlib.fail(args.run, "not a folder; expected a PrefetchLab output folder")
    plan = figures(args.run, args.iteration, args.ranks)
    present = [(name, build) for name, build in plan if os.path.isfile(os.path.join(args.run, name))]
    if not present:
        raise plotlib.fail(args.run, "holds none of " + ", ".join(name for name, _ in plan)
                           + "; nothing to render")
    failures = 0
    for name, build in plan:
        if (name, build) not in present:
            print(f"skipped: no {name}")
            continue
        try:
            for out_name, fig in build():
                print(plotlib.save_figure(fig, os.path.join(args.output, out_name), args.dpi))
        except plotlib.PlotInputError as e:
            print(f"{p.prog}: error: {e}", file=sys.stderr)
            failures += 1
    return 2 if failures else 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
