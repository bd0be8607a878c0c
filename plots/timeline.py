#!/usr/bin/python3
"""Timeline of one iteration from a run's trace.json: one row per track per rank."""
import sys

import plotlib
from matplotlib.patches import Patch

EPILOG = """\
input: RUN_DIR/trace.json (or the file itself), written by `prefetchlab run` unless
output.trace is false. One row per track of each rank, in the trace's order: host thread,
compute stream, all-gather stream, reduce-scatter stream, NCCL FIFO (where collectives run).
Every complete event whose args.iteration is N is drawn, coloured by what it is: forward and
backward module kernels, optimizer step, all-gathers (prefetch / on demand / other kinds),
reduce-scatters, all-reduces, copies, host hooks, the host's iteration span (thin bar).
Stalls ("stall: waiting for parameters" spans, the compute stream waiting on an all-gather)
are red bars with a red triangle above each, so even sub-microsecond stalls show; each compute
row's label gives its total stall. x: milliseconds since the iteration's first event.

example: plots/timeline.py out/default --iteration 5 -o timeline.png
"""

# (category, legend label, colour); drawn in this order, so later ones are on top.
CATEGORIES = [
    ("iteration", "iteration (host)", "#d9d9d9"),
    ("host", "host hooks", "#9e9ac8"),
    ("forward", "forward kernels", "#6baed6"),
    ("backward", "backward kernels", "#2171b5"),
    ("optimizer", "optimizer step", "#74c476"),
    ("copy", "copies and memory passes", "#bdbdbd"),
    ("all_gather_prefetch", "all-gather (prefetch)", "#fd8d3c"),
    ("all_gather_on_demand", "all-gather (on demand)", "#a63603"),
    ("all_gather_other", "all-gather (other)", "#fdd0a2"),
    ("reduce_scatter", "reduce-scatter", "#8c6bb1"),
    ("all_reduce", "all-reduce", "#41ab5d"),
    ("other", "other", "#969696"),
    ("stall", "stall (waiting for parameters)", "#e31a1c"),
]
COLOURS = {c: colour for c, _, colour in CATEGORIES}
LABELS = {c: label for c, label, _ in CATEGORIES}
STALL_PREFIX = "stall"


def category(event):
    name = event["name"]
    if name.startswith(STALL_PREFIX):
        return "stall"
    if name.startswith("fwd "):
        return "forward"
    if name.startswith("bwd "):
        return "backward"
    if name.startswith("optimizer"):
        return "optimizer"
    if name == "all_gather":
        kind = event["args"].get("kind")
        return {"prefetch": "all_gather_prefetch", "on_demand": "all_gather_on_demand"}.get(
            kind, "all_gather_other")
    if name in ("reduce_scatter", "all_reduce"):
        return name
    if "copy" in name or name.startswith("gradient divide"):
        return "copy"
    if name == "iteration":
        return "iteration"
    if name in ("fetch_sub_module", "release_sub_module", "trace check"):
        return "host"
    return "other"


def iterations_in(trace):
    return sorted({e["args"]["iteration"] for e in trace.events
                   if isinstance(e["args"].get("iteration"), int)})


def build_figure(trace, iteration=None, ranks=None, title=None):
    """The timeline Figure of `iteration` (default: the last one in the trace).

    Bars are broken_barh collections with gid "bars:<pid>:<tid>:<category>" (x in ms since the
    iteration's first event); stall markers are a Line2D with gid "stalls:<pid>:<tid>"."""
    available = iterations_in(trace)
    if not available:
        raise plotlib.fail(trace.path, "no event has an integer args.iteration; "
                                       "expected PrefetchLab's trace events")
    if iteration is None:
        iteration = available[-1]
    if iteration not in available:
        raise plotlib.fail(trace.path, f"has no events of iteration {iteration} "
                                       f"(iterations present: {available[0]}..{available[-1]})")
    events = [e for e in trace.events if e["args"].get("iteration") == iteration]
    pids = plotlib.select_ranks({e["pid"] for e in events}, ranks, trace.path)
    events = [e for e in events if e["pid"] in pids]
    t0 = min(e["ts_ns"] for e in events)
    t1 = max(e["ts_ns"] + e["dur_ns"] for e in events)

    tracks = sorted({(e["pid"], e["tid"]) for e in events} | {k for k in trace.threads if k[0] in pids},
                    key=lambda k: (k[0], trace.thread_order.get(k, k[1]), k[1]))
    row = {track: i for i, track in enumerate(tracks)}
    by_row = {}
    for e in events:
        by_row.setdefault((e["pid"], e["tid"]), {}).setdefault(category(e), []).append(e)

    fig = plotlib.new_figure(12, 1.2 + 0.32 * len(tracks))
    ax = fig.add_subplot()
    used = set()
    labels = []
    for track in tracks:
        y = row[track]
        groups = by_row.get(track, {})
        stall_ns = 0
        for cat, _, _ in CATEGORIES:
            spans = groups.get(cat)
            if not spans:
                continue
            used.add(cat)
            height = 0.3 if cat == "iteration" else 0.8
            xranges = [((e["ts_ns"] - t0) / plotlib.NS_PER_MS, e["dur_ns"] / plotlib.NS_PER_MS)
                       for e in spans]
            ax.broken_barh(xranges, (y - height / 2, height), facecolors=COLOURS[cat],
                           edgecolors="none", gid=f"bars:{track[0]}:{track[1]}:{cat}")
            if cat == "stall":
                stall_ns = sum(e["dur_ns"] for e in spans)
                mids = [x + w / 2 for x, w in xranges]
                ax.plot(mids, [y - 0.5] * len(mids), linestyle="none", marker="v", markersize=4,
                        color=COLOURS["stall"], gid=f"stalls:{track[0]}:{track[1]}")
        process = trace.processes.get(track[0], f"rank {track[0]}")
        thread = trace.threads.get(track, f"track {track[1]}")
        label = f"{process} · {thread}"
        if stall_ns:
            label += f" (stall {plotlib.format_duration(stall_ns)})"
        labels.append(label)
    ax.set_yticks(range(len(tracks)), labels, fontsize=8)
    ax.set_ylim(len(tracks) - 0.4, -0.7)
    ax.set_xlim(0, (t1 - t0) / plotlib.NS_PER_MS)
    ax.set_xlabel("time since the iteration's first event (ms)")
    ax.grid(axis="x", alpha=0.3)
    for i in range(1, len(pids)):  # separate ranks
        boundary = [y for (pid, _), y in row.items() if pid == pids[i]]
        ax.axhline(min(boundary) - 0.5, color="black", linewidth=0.6)
    handles = [Patch(color=COLOURS[c], label=LABELS[c])
               for c, _, _ in CATEGORIES if c in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(f"{title + ': ' if title else ''}iteration {iteration}, "
                 f"{(t1 - t0) / plotlib.NS_PER_MS:.3f} ms", fontsize=10)
    return fig


def main(argv=None):
    p = plotlib.parser(__file__, "Timeline of one iteration: one row per stream per rank, stalls marked.",
                       EPILOG)
    p.add_argument("run", metavar="RUN_DIR", help="a run folder (or its trace.json)")
    p.add_argument("--iteration", type=int, metavar="N", help="iteration to draw (default: the last)")
    p.add_argument("--ranks", type=plotlib.parse_ranks, metavar="LIST",
                   help="ranks to draw, e.g. 0,1 or 0-3 (default: all)")
    plotlib.add_output_options(p, "the PNG to write")
    args = p.parse_args(argv)
    trace = plotlib.read_trace(plotlib.input_file(args.run, "trace.json"))
    fig = build_figure(trace, args.iteration, args.ranks, plotlib.run_label(args.run))
    print(plotlib.save_figure(fig, args.output, args.dpi))
    return 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
