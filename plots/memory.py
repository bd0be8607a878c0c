#!/usr/bin/python3
"""Allocated and reserved device memory over time per rank, from memory.csv."""
import os
import sys

import plotlib

EPILOG = """\
input: RUN_DIR/memory.csv (columns time_ns, rank, allocated_bytes, reserved_bytes: the caching
allocator's state after each change, per rank), written by `prefetchlab run` unless
output.memory_timeline is false; RUN_DIR may also be the memory.csv file itself. Each rank gets
one colour: allocated solid, reserved dashed, as steps (a value holds until the next row).
Where the folder also has iterations.csv, dotted vertical lines mark each iteration's start.
x: milliseconds since the run's start; y: GiB (2^30 bytes).

example: plots/memory.py out/default --ranks 0,1 -o memory.png
"""

COLUMNS = ("time_ns", "rank", "allocated_bytes", "reserved_bytes")


def load(location):
    """{rank: (time_ns, allocated_bytes, reserved_bytes)} (numpy arrays, time order) and the
    iteration start times (ns) from iterations.csv when the run has it, else []."""
    path = plotlib.input_file(location, "memory.csv")
    table = plotlib.read_csv(path, COLUMNS)
    time_ns = table.numbers("time_ns", integer=True)
    ranks = table.numbers("rank", integer=True)
    allocated = table.numbers("allocated_bytes", integer=True)
    reserved = table.numbers("reserved_bytes", integer=True)
    per_rank = {}
    for rank in sorted(set(ranks.tolist())):
        mask = ranks == rank
        t = time_ns[mask]
        if (t[1:] < t[:-1]).any():
            bad = int((t[1:] < t[:-1]).nonzero()[0][0]) + 1
            line = [table.lines[i] for i in mask.nonzero()[0]][bad]
            raise plotlib.fail(path, f"line {line}: time_ns goes backwards for rank {rank}")
        per_rank[int(rank)] = (t, allocated[mask], reserved[mask])
    starts = []
    iterations_path = os.path.join(plotlib.run_folder_of(location), "iterations.csv")
    if os.path.isfile(iterations_path):
        starts = plotlib.read_csv(iterations_path, ("start_ns",)).numbers("start_ns", integer=True).tolist()
    return per_rank, starts


def build_figure(per_rank, iteration_starts=(), ranks=None, title=None, path="memory.csv"):
    """Lines labelled "rank <r> allocated" / "rank <r> reserved" (x ms, y GiB); iteration starts
    are vertical lines with gid "iteration-start"."""
    selected = plotlib.select_ranks(per_rank.keys(), ranks, path)
    fig = plotlib.new_figure(10, 4.5)
    ax = fig.add_subplot()
    colours = plotlib.matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, rank in enumerate(selected):
        t, allocated, reserved = per_rank[rank]
        colour = colours[i % len(colours)]
        x = t / plotlib.NS_PER_MS
        ax.plot(x, allocated / plotlib.GIB, drawstyle="steps-post", color=colour, linewidth=1,
                label=f"rank {rank} allocated")
        ax.plot(x, reserved / plotlib.GIB, drawstyle="steps-post", color=colour, linewidth=1,
                linestyle="--", label=f"rank {rank} reserved")
    for start in iteration_starts:
        ax.axvline(start / plotlib.NS_PER_MS, color="grey", linestyle=":", linewidth=0.7,
                   gid="iteration-start")
    ax.set_xlabel("time since the run's start (ms)")
    ax.set_ylabel("device memory (GiB)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2 if len(selected) > 4 else 1, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)
    peak_alloc = max(per_rank[r][1].max() for r in selected)
    peak_res = max(per_rank[r][2].max() for r in selected)
    ax.set_title(f"{title + ': ' if title else ''}peak allocated {peak_alloc / plotlib.GIB:.2f} GiB, "
                 f"peak reserved {peak_res / plotlib.GIB:.2f} GiB", fontsize=10)
    return fig


def main(argv=None):
    p = plotlib.parser(__file__, "Allocated and reserved memory over time per rank.", EPILOG)
    p.add_argument("run", metavar="RUN_DIR", help="a run folder (or its memory.csv)")
    p.add_argument("--ranks", type=plotlib.parse_ranks, metavar="LIST",
                   help="ranks to draw, e.g. 0,1 or 0-3 (default: all)")
    plotlib.add_output_options(p, "the PNG to write")
    args = p.parse_args(argv)
    per_rank, starts = load(args.run)
    fig = build_figure(per_rank, starts, args.ranks, plotlib.run_label(args.run),
                       plotlib.input_file(args.run, "memory.csv"))
    print(plotlib.save_figure(fig, args.output, args.dpi))
    return 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
