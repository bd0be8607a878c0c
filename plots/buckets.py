#!/usr/bin/python3
"""Prefetch bucket size over iterations, one line per run (policy), from buckets.csv."""
import sys

import plotlib

EPILOG = """\
input: each RUN_DIR's buckets.csv (columns iteration, rank, bucket_numel: the bucket at each
iteration's first fetch, per rank), written by `prefetchlab run`. A RUN_DIR may also be the
buckets.csv file itself. Each run is one line labelled "<scenario> (<controller policy>)" from
its summary.json (the folder name when there is none). Where the ranks of a run disagree (a
controller deciding per rank, review defect (a)), that run gets one line per rank instead.
y is logarithmic; the bucket holds from one iteration's first fetch to the next (steps).

example: plots/buckets.py out/static out/ema out/pace -o buckets.png
"""

COLUMNS = ("iteration", "rank", "bucket_numel")


def load(location):
    """(label, {rank: (iterations, buckets)}) of one run."""
    path = plotlib.input_file(location, "buckets.csv")
    table = plotlib.read_csv(path, COLUMNS)
    iterations = table.numbers("iteration", integer=True)
    ranks = table.numbers("rank", integer=True)
    buckets = table.numbers("bucket_numel")
    per_rank = {}
    seen = {}
    for i, (it, rank, bucket) in enumerate(zip(iterations, ranks, buckets)):
        key = (int(it), int(rank))
        if key in seen:
            raise plotlib.fail(path, f"line {table.lines[i]}: iteration {key[0]} rank {key[1]} "
                                     f"appears twice (also line {seen[key]})")
        seen[key] = table.lines[i]
        its, values = per_rank.setdefault(int(rank), ([], []))
        its.append(int(it))
        values.append(float(bucket))
    for rank, (its, values) in per_rank.items():
        order = sorted(range(len(its)), key=its.__getitem__)
        per_rank[rank] = ([its[k] for k in order], [values[k] for k in order])
    return plotlib.run_label(location), per_rank


def build_figure(runs):
    """runs: [(label, {rank: (iterations, buckets)})]. One Line2D per run (label = the run's
    label) or, where its ranks disagree, per rank (label "<run label> rank <r>")."""
    fig = plotlib.new_figure(8, 4.5)
    ax = fig.add_subplot()
    labels = [label for label, _ in runs]
    for index, (label, per_rank) in enumerate(runs):
        if labels.count(label) > 1:
            label = f"{label} #{index + 1}"
        series = list(per_rank.values())
        agree = all(s == series[0] for s in series)
        lines = [(label, series[0])] if agree else [
            (f"{label} rank {rank}", per_rank[rank]) for rank in sorted(per_rank)]
        for line_label, (its, values) in lines:
            ax.plot(its, values, drawstyle="steps-post", marker="o", markersize=3, label=line_label)
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("prefetch bucket (numel)")
    ax.grid(True, which="both", alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)
    ax.set_title("stage3_prefetch_bucket_size over iterations", fontsize=10)
    return fig


def main(argv=None):
    p = plotlib.parser(__file__, "Bucket size over iterations, one line per run.", EPILOG)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (or their buckets.csv)")
    plotlib.add_output_options(p, "the PNG to write")
    args = p.parse_args(argv)
    fig = build_figure([load(location) for location in args.runs])
    print(plotlib.save_figure(fig, args.output, args.dpi))
    return 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
