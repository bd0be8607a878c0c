#!/usr/bin/python3
"""A sweep's heatmap (two grid keys, one metric) and its throughput-vs-peak-reserved Pareto front."""
import math
import sys

import numpy as np

import plotlib

METRICS = ("steady_step_time_ns", "samples_per_second", "tflops_per_gpu", "mean_exposed_comm_ns",
           "forward_stall_ns", "backward_stall_ns", "peak_allocated_bytes", "peak_reserved_bytes",
           "peak_gathered_param_bytes", "final_bucket_numel")
SEED_KEY = "noise.seed"

EPILOG = f"""\
input: SWEEP_DIR/results.csv (or the file itself), written by `prefetchlab sweep`: one row per
grid point with the columns
  point, <one column per grid key, named by its dotted scenario key>, status,
  {', '.join(METRICS[:5])},
  {', '.join(METRICS[5:])}
The grid keys are the columns between 'point' and 'status'. Rows whose status is not 'ok'
(oom, collective_mismatch, ...) may leave metrics empty.

writes PREFIX-heatmap.png and PREFIX-pareto.png:
  heatmap  --x and --y are grid keys (default: the first two with more than one value, {SEED_KEY}
           last); each cell is the mean of --metric over the rows with those two values and
           status ok (other grid keys, e.g. seeds, are averaged); "k/n ok" marks cells where
           some rows failed; cells with no ok row are blank and name the statuses.
  pareto   every ok row as a point: x peak_reserved_bytes (GiB), y samples_per_second; the
           front (no other ok row has less or equal memory and more or equal throughput, one of
           them strictly) is highlighted and each front point labelled p<point>. Rows that are
           not ok are drawn as red crosses where they have both values and never join the front.

example: plots/sweep.py out/sweep --x zero.stage3_prefetch_bucket_size \\
             --y zero.stage3_max_live_parameters --metric samples_per_second -o out/sweep
"""


class Sweep:
    """results.csv: `keys` (grid keys), `values` {key: [str per row]}, `status`, `metrics`
    {name: float array, NaN where a failed row left it empty}, `points` (int array)."""

    def __init__(self, path, keys, values, status, metrics, points):
        self.path, self.keys, self.values = path, keys, values
        self.status, self.metrics, self.points = status, metrics, points

    @property
    def ok(self):
        return np.array([s == "ok" for s in self.status], dtype=bool)


def load(location):
    path = plotlib.input_file(location, "results.csv", "a sweep folder")
    table = plotlib.read_csv(path)
    if table.header[0] != "point":
        raise plotlib.fail(path, f"the first column is '{table.header[0]}'; expected 'point'")
    table.require("status", *METRICS)
    keys = table.header[1:table.index["status"]]
    if not keys:
        raise plotlib.fail(path, "no grid-key columns between 'point' and 'status'")
    points = table.numbers("point", integer=True)
    first = {}
    for i, p in enumerate(points.tolist()):
        if p in first:
            raise plotlib.fail(path, f"line {table.lines[i]}: point {p} appears twice (also line "
                                     f"{first[p]}); merge shards with `prefetchlab merge`")
        first[p] = table.lines[i]
    status = [s.strip() for s in table.strings("status")]
    for i, s in enumerate(status):
        if not s:
            raise plotlib.fail(path, f"line {table.lines[i]}: empty status; expected ok, oom, ...")
    failed = [s != "ok" for s in status]
    metric_names = [c for c in table.header[table.index["status"] + 1:]]
    metrics = {m: table.numbers(m, allow_empty=failed) for m in metric_names}
    values = {k: [v.strip() for v in table.strings(k)] for k in keys}
    return Sweep(path, keys, values, status, metrics, points)


def ordered_values(strings):
    """Distinct grid values: numerically sorted when all are numbers, else in first-seen order."""
    distinct = list(dict.fromkeys(strings))
    try:
        return sorted(distinct, key=float)
    except ValueError:
        return distinct


def label_of(value):
    try:
        return plotlib.format_count(float(value))
    except ValueError:
        return value


def ranked_keys(sweep):
    """Grid keys in default-axis order: those with more than one value first, noise.seed last."""
    varying = [k for k in sweep.keys if len(set(sweep.values[k])) > 1]
    ranked = [k for k in varying if k != SEED_KEY] + [k for k in varying if k == SEED_KEY]
    return ranked + [k for k in sweep.keys if k not in ranked]


def heatmap_cells(sweep, x, y, metric):
    """(x values, y values, mean grid [len(y) x len(x)] with NaN for no ok row, ok counts, totals,
    statuses per cell)."""
    xs = ordered_values(sweep.values[x])
    ys = ordered_values(sweep.values[y]) if y else [""]
    column = sweep.metrics[metric]
    sums = np.zeros((len(ys), len(xs)))
    ok_count = np.zeros((len(ys), len(xs)), dtype=int)
    total = np.zeros((len(ys), len(xs)), dtype=int)
    statuses = [[set() for _ in xs] for _ in ys]
    for i, status in enumerate(sweep.status):
        cx = xs.index(sweep.values[x][i])
        cy = ys.index(sweep.values[y][i]) if y else 0
        total[cy, cx] += 1
        if status == "ok":
            sums[cy, cx] += column[i]
            ok_count[cy, cx] += 1
        else:
            statuses[cy][cx].add(status)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(ok_count > 0, sums / np.maximum(ok_count, 1), np.nan)
    return xs, ys, means, ok_count, total, statuses


def metric_unit(metric):
    if metric.endswith("_ns"):
        return 1e6, f"{metric[:-3]} (ms)"
    if metric.endswith("_bytes"):
        return plotlib.GIB, f"{metric[:-6]} (GiB)"
    return 1.0, metric


def build_heatmap(sweep, x=None, y=None, metric="samples_per_second", title=None):
    """The heatmap Figure: an AxesImage with gid "heatmap" whose array is the cell means (in the
    metric's display unit: ms for *_ns, GiB for *_bytes), rows = y values, columns = x values."""
    for key, option in ((x, "--x"), (y, "--y")):
        if key is not None and key not in sweep.keys:
            raise plotlib.fail(sweep.path, f"{option} {key} is not a grid key (grid keys: "
                                           f"{', '.join(sweep.keys)})")
    ranked = ranked_keys(sweep)
    if x is None:
        x = next((k for k in ranked if k != y), None)
        if x is None:
            raise plotlib.fail(sweep.path, f"the only grid key is {y}; it cannot be --y without an --x")
    if y is None:
        y = next((k for k in ranked if k != x), None)
    if x == y:
        raise plotlib.fail(sweep.path, f"--x and --y are both {x}; choose two different grid keys")
    if metric not in sweep.metrics:
        raise plotlib.fail(sweep.path, f"--metric {metric} is not a column (metrics: "
                                       f"{', '.join(sweep.metrics)})")
    xs, ys, means, ok_count, total, statuses = heatmap_cells(sweep, x, y, metric)
    scale, unit_label = metric_unit(metric)
    shown = means / scale
    fig = plotlib.new_figure(max(5.0, 1.1 * len(xs) + 2.5), max(3.0, 0.6 * len(ys) + 2.0))
    ax = fig.add_subplot()
    ax.set_facecolor("#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(shown), origin="lower", aspect="auto", cmap="viridis",
                      interpolation="nearest")
    image.set_gid("heatmap")
    fig.colorbar(image, ax=ax, label=unit_label)
    ax.set_xticks(range(len(xs)), [label_of(v) for v in xs])
    ax.set_yticks(range(len(ys)), [label_of(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y if y else "")
    finite = shown[np.isfinite(shown)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0
    if len(xs) * len(ys) <= 144:
        for cy in range(len(ys)):
            for cx in range(len(xs)):
                value = shown[cy, cx]
                if math.isfinite(value):
                    text = f"{value:.4g}"
                    if ok_count[cy, cx] < total[cy, cx]:
                        text += f"\n{ok_count[cy, cx]}/{total[cy, cx]} ok"
                    colour = "black" if value > middle else "white"
                else:
                    text = "\n".join(sorted(statuses[cy][cx])) or "no run"
                    colour = "#b2182b"
                ax.text(cx, cy, text, ha="center", va="center", fontsize=7, color=colour)
    ax.set_title(f"{title + ': ' if title else ''}mean {metric} over ok runs", fontsize=10)
    return fig


def pareto_front(reserved, throughput):
    """Indices of the non-dominated points (minimise reserved, maximise throughput), sorted by
    reserved ascending (ties: throughput descending)."""
    order = sorted(range(len(reserved)), key=lambda i: (reserved[i], -throughput[i]))
    front = []
    best = -math.inf
    for i in order:
        # Everything before i has less memory, or as much and at least i's throughput.
        if throughput[i] > best:
            front.append(i)
            best = throughput[i]
        elif (throughput[i] == best and reserved[i] == reserved[front[-1]]
              and throughput[front[-1]] == best):
            front.append(i)  # the same point as the last front point: neither dominates
    return front


def build_pareto(sweep, title=None):
    """The Pareto Figure: collections "ok-runs" (every ok row) and "failed-runs" (rows not ok
    that have both values), and a Line2D with gid "pareto-front" through the front (x GiB
    ascending, y samples/s; drawn as steps: the best throughput within a memory budget)."""
    ok = sweep.ok
    reserved = sweep.metrics["peak_reserved_bytes"] / plotlib.GIB
    throughput = sweep.metrics["samples_per_second"]
    ok_idx = np.nonzero(ok)[0]
    fig = plotlib.new_figure(8, 5)
    ax = fig.add_subplot()
    if ok_idx.size:
        ax.scatter(reserved[ok_idx], throughput[ok_idx], s=18, color="#9ecae1", label="ok runs",
                   gid="ok-runs", zorder=2)
        front = [int(ok_idx[i]) for i in pareto_front(reserved[ok_idx].tolist(),
                                                       throughput[ok_idx].tolist())]
        ax.plot(reserved[front], throughput[front], color="#08519c", marker="o", markersize=6,
                linewidth=1.5, drawstyle="steps-post", label=f"Pareto front ({len(front)} runs)", gid="pareto-front", zorder=3)
        for i in front:
            ax.annotate(f"p{sweep.points[i]}", (reserved[i], throughput[i]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
    failed = [i for i in np.nonzero(~ok)[0]
              if math.isfinite(reserved[i]) and math.isfinite(throughput[i])]
    if failed:
        ax.scatter(reserved[failed], throughput[failed], marker="x", color="#e31a1c", s=30,
                   label="not ok (excluded from the front)", gid="failed-runs", zorder=2)
    not_drawn = [sweep.status[i] for i in np.nonzero(~ok)[0] if i not in failed]
    if not_drawn:
        counts = ", ".join(f"{s} ×{not_drawn.count(s)}" for s in sorted(set(not_drawn)))
        ax.plot([], [], linestyle="none", label=f"not drawn (no values): {counts}")
    if not ok_idx.size and not failed:
        raise plotlib.fail(sweep.path, "no row has status ok; nothing to put on a Pareto front")
    ax.set_xlabel("peak reserved (GiB)")
    ax.set_ylabel("samples per second")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{title + ': ' if title else ''}throughput vs peak reserved memory", fontsize=10)
    return fig


def output_prefix(prefix):
    return prefix[:-4] if prefix.lower().endswith(".png") else prefix


def main(argv=None):
    p = plotlib.parser(__file__, "Sweep heatmap and throughput-vs-peak-reserved Pareto front.", EPILOG)
    p.add_argument("sweep", metavar="SWEEP_DIR", help="a sweep folder (or its results.csv)")
    p.add_argument("--x", metavar="KEY", help="grid key on the heatmap's x axis")
    p.add_argument("--y", metavar="KEY", help="grid key on the heatmap's y axis")
    p.add_argument("--metric", default="samples_per_second", metavar="M",
                   help="results.csv column shown as colour (default samples_per_second)")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX-heatmap.png and PREFIX-pareto.png")
    p.add_argument("--dpi", type=int, default=100, help="resolution (default 100)")
    args = p.parse_args(argv)
    sweep = load(args.sweep)
    heatmap = build_heatmap(sweep, args.x, args.y, args.metric)
    pareto = build_pareto(sweep)
    prefix = output_prefix(args.output)
    print(plotlib.save_figure(heatmap, prefix + "-heatmap.png", args.dpi))
    print(plotlib.save_figure(pareto, prefix + "-pareto.png", args.dpi))
    return 0


if __name__ == "__main__":
    sys.exit(plotlib.run_cli(main))
