#!/usr/bin/python3
"""Simulated vs real, per iteration, from `prefetchlab validate`'s validate.csv."""
import math
import sys

import numpy as np

import plotlib

EPILOG = """\
input: validate.csv (or a folder holding it), one row per iteration:
  iteration                 integer, each at most once
  real_step_time_ns         step time measured on the device (required)
  simulated_step_time_ns    the simulator's step time for the same iteration (required)
  real_<m>, simulated_<m>   any further metric pairs, e.g. real_forward_stall_ns and
                            simulated_forward_stall_ns, real_peak_reserved_bytes and
                            simulated_peak_reserved_bytes; each pair gets its own panels
A cell may be empty (that iteration was not measured: a gap). Columns that are not part of a
real_/simulated_ pair (e.g. trace_mode) are allowed and not drawn; a real_<m> without its
simulated_<m> (or the reverse) is an error. Units follow the name: *_ns are drawn in ms,
*_bytes in GiB.

Per metric: real and simulated as lines over iterations, and below them the relative error
100 * (simulated - real) / real per iteration as bars; the title gives the mean absolute error.

example: plots/validate.py out/validate/validate.csv -o validate.png
"""


def load(location):
    """(iterations array, [(metric, real array, simulated array)]) with step_time_ns first."""
    path = plotlib.input_file(location, "validate.csv", "a validate output folder")
    table = plotlib.read_csv(path, ("iteration", "real_step_time_ns", "simulated_step_time_ns"))
    iterations = table.numbers("iteration", integer=True)
    seen = {}
    for i, it in enumerate(iterations.tolist()):
        if it in seen:
            raise plotlib.fail(path, f"line {table.lines[i]}: iteration {it} appears twice "
                                     f"(also line {seen[it]})")
        seen[it] = table.lines[i]
    metrics = []
    for column in table.header:
        for mine, other in (("real_", "simulated_"), ("simulated_", "real_")):
            if column.startswith(mine) and other + column[len(mine):] not in table.index:
                raise plotlib.fail(path, f"has column '{column}' but no '{other + column[len(mine):]}'"
                                         f"; expected real_<metric> and simulated_<metric> in pairs")
        if column.startswith("real_"):
            metrics.append(column[len("real_"):])
    metrics.sort(key=lambda m: m != "step_time_ns")
    everywhere = [True] * len(table)
    order = np.argsort(iterations, kind="stable")
    pairs = [(m, table.numbers("real_" + m, allow_empty=everywhere)[order],
              table.numbers("simulated_" + m, allow_empty=everywhere)[order]) for m in metrics]
    return iterations[order], pairs


def unit(metric):
    if metric.endswith("_ns"):
        return metric[:-3], plotlib.NS_PER_MS, "ms"
    if metric.endswith("_bytes"):
        return metric[:-6], plotlib.GIB, "GiB"
    return metric, 1.0, ""


def relative_error_percent(real, simulated):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(real != 0, 100.0 * (simulated - real) / np.abs(real), np.nan)


def build_figure(iterations, pairs, title=None):
    """Per metric m (name without unit suffix): a values axes with Line2Ds labelled "real m" and
    "simulated m" (ms for *_ns, GiB for *_bytes) and an error axes whose bar container has the
    label "error m" (heights: 100·(simulated−real)/real, NaN where either is missing or real 0)."""
    fig = plotlib.new_figure(9, 3.6 * len(pairs) + 0.4)
    grid = fig.add_gridspec(2 * len(pairs), 1, height_ratios=[2.2, 1] * len(pairs))
    for k, (metric, real, simulated) in enumerate(pairs):
        name, scale, suffix = unit(metric)
        ax = fig.add_subplot(grid[2 * k])
        ax.plot(iterations, real / scale, marker="o", markersize=3, label=f"real {name}")
        ax.plot(iterations, simulated / scale, marker="s", markersize=3, label=f"simulated {name}")
        ax.set_ylabel(f"{name} ({suffix})" if suffix else name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        error = relative_error_percent(real, simulated)
        finite = error[np.isfinite(error)]
        mae = f"mean |error| {np.abs(finite).mean():.2f}%" if finite.size else "no iteration with both"
        ax.set_title(f"{title + ': ' if title and k == 0 else ''}{name}: simulated vs real, {mae}",
                     fontsize=10)
        ax.tick_params(labelbottom=False)
        err_ax = fig.add_subplot(grid[2 * k + 1], sharex=ax)
        colours = ["#b2182b" if (math.isfinite(e) and e > 0) else "#2166ac" for e in error]
        err_ax.bar(iterations, error, color=colours, label=f"error {name}")
        err_ax.axhline(0, color="black", linewidth=0.6)
        err_ax.set_ylabel("sim − real (%)")
        err_ax.grid(True, axis="y", alpha=0.3)
        err_ax.xaxis.get_major_locator().set_params(integer=True)
        if k == len(pairs) - 1:
            err_ax.set_xlabel("iteration")
    return fig


def main(argv=None):
    p = plotlib.parser(__file__, "Simulated vs real per iteration, from validate.csv.", EPILOG)
    p.add_argument("validate_csv", metavar="VALIDATE_CSV", help="validate.csv (or its folder)")
    plotlib.add_output_options(p, "the PNG to write")
    args = p.parse_args(argv)
    iterations, pairs = load(args.validate_csv)
    fig = build_figure(iterations, pairs)
    print(plotlib.save_figure(fig, args.output, args.dpi))
    return 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
