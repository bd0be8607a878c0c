"""Shared code of PrefetchLab's plot scripts: input loading and checking, run labels, figure
saving and the command-line wrapper that turns bad input into one clear line and exit code 2.

Every loader raises PlotInputError with a message that starts with the file it read and says
what is missing or malformed and what was expected; run_cli() prints it as
"<script>: error: <message>" and exits with 2 (the project's "bad input" code). Failing to write
the figure is exit code 1.

Figures are built with matplotlib.figure.Figure directly (no pyplot state), on the Agg backend,
so the scripts run headless and each script's build_*() function can hand its Figure to tests.
"""
import argparse
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402

GIB = float(1 << 30)
NS_PER_MS = 1e6


class PlotInputError(Exception):
    """Bad or missing input; the message names the file and what was expected."""


class PlotOutputError(Exception):
    """The figure could not be written."""


def fail(path, message):
    return PlotInputError(f"{path}: {message}")


# ---------------------------------------------------------------------------------------------
# Finding inputs

def input_file(location, filename, what="a PrefetchLab run folder"):
    """`location` is a folder holding `filename`, or that file itself. Returns the file's path."""
    if os.path.isdir(location):
        path = os.path.join(location, filename)
        if not os.path.isfile(path):
            present = sorted(f for f in os.listdir(location) if not f.startswith("."))
            has = ", ".join(present) if present else "nothing"
            raise fail(path, f"not found; expected {what} with {filename} (the folder holds: {has})")
        return path
    if os.path.isfile(location):
        return location
    raise fail(location, f"no such file or folder; expected {what} or its {filename}")


def run_folder_of(location):
    """The folder a run's files live in (`location` itself, or the folder of a file in it)."""
    return location if os.path.isdir(location) else os.path.dirname(os.path.abspath(location))


# ---------------------------------------------------------------------------------------------
# CSV

class CsvTable:
    """A CSV file read as text: `header`, `rows` (lists of strings) and their line numbers."""

    def __init__(self, path, header, rows, lines):
        self.path = path
        self.header = header
        self.rows = rows
        self.lines = lines
        self.index = {name: i for i, name in enumerate(header)}

    def __len__(self):
        return len(self.rows)

    def require(self, *columns):
        missing = [c for c in columns if c not in self.index]
        if missing:
            names = ", ".join(f"'{c}'" for c in missing)
            noun = "column" if len(missing) == 1 else "columns"
            raise fail(self.path, f"missing {noun} {names} (the header has: {', '.join(self.header)})")

    def strings(self, column):
        self.require(column)
        i = self.index[column]
        return [row[i] for row in self.rows]

    def numbers(self, column, integer=False, allow_empty=None):
        """The column as a numpy array (int64 if `integer`, else float64).

        `allow_empty`: None (every cell must be a number) or a boolean sequence, one per row,
        saying where an empty cell is allowed (it becomes NaN, or the column becomes float)."""
        self.require(column)
        i = self.index[column]
        values = []
        any_empty = False
        for r, row in enumerate(self.rows):
            text = row[i].strip()
            if text == "" and allow_empty is not None and allow_empty[r]:
                values.append(math.nan)
                any_empty = True
                continue
            try:
                value = int(text) if integer else float(text)
            except ValueError:
                try:  # an integer written as 5e+07 or 5.0
                    as_float = float(text)
                    if not integer or not as_float.is_integer():
                        raise ValueError
                    value = int(as_float)
                except ValueError:
                    expected = "an integer" if integer else "a number"
                    raise fail(self.path, f"line {self.lines[r]}, column '{column}': "
                                          f"expected {expected}, got '{row[i]}'") from None
            if not integer and not math.isfinite(value):
                raise fail(self.path, f"line {self.lines[r]}, column '{column}': "
                                      f"expected a finite number, got '{row[i]}'")
            values.append(value)
        if integer and not any_empty:
            return np.array(values, dtype=np.int64)
        return np.array(values, dtype=np.float64)


def read_csv(path, required=(), allow_no_rows=False):
    """Reads a CSV file with a header line; checks the `required` columns and row widths."""
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            try:
                header = next(reader)
            except StopIteration:
                raise fail(path, "is empty; expected a header line"
                           + (f" with columns {', '.join(required)}" if required else "")) from None
            header = [h.strip() for h in header]
            rows, lines = [], []
            for row in reader:
                if not row or (len(row) == 1 and row[0].strip() == ""):
                    continue
                if len(row) != len(header):
                    raise fail(path, f"line {reader.line_num} has {len(row)} fields, "
                                     f"the header has {len(header)}")
                rows.append(row)
                lines.append(reader.line_num)
    except FileNotFoundError:
        raise fail(path, "not found") from None
    except IsADirectoryError:
        raise fail(path, "is a folder; expected a CSV file") from None
    except UnicodeDecodeError:
        raise fail(path, "is not a text CSV file") from None
    except csv.Error as e:
        raise fail(path, f"malformed CSV: {e}") from None
    except OSError as e:
        raise fail(path, f"cannot be read: {e.strerror}") from None
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise fail(path, f"column '{duplicates[0]}' appears more than once in the header")
    table = CsvTable(path, header, rows, lines)
    table.require(*required)
    if not rows and not allow_no_rows:
        raise fail(path, "has a header but no rows; nothing to plot")
    return table


# ---------------------------------------------------------------------------------------------
# JSON

def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise fail(path, "not found") from None
    except IsADirectoryError:
        raise fail(path, "is a folder; expected a JSON file") from None
    except UnicodeDecodeError:
        raise fail(path, "is not a text JSON file") from None
    except json.JSONDecodeError as e:
        raise fail(path, f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except OSError as e:
        raise fail(path, f"cannot be read: {e.strerror}") from None


def json_key(document, dotted, path):
    """document['a']['b'] for 'a.b', or PlotInputError naming the missing key."""
    value = document
    walked = []
    for part in dotted.split("."):
        walked.append(part)
        if not isinstance(value, dict) or part not in value:
            raise fail(path, f"missing key '{'.'.join(walked)}'")
        value = value[part]
    return value


def run_label(location):
    """A run's legend label: "<scenario name> (<controller policy>)" from its summary.json, or
    the folder's name when the run has no summary.json."""
    folder = run_folder_of(location)
    summary_path = os.path.join(folder, "summary.json")
    if not os.path.isfile(summary_path):
        return os.path.basename(os.path.normpath(folder))
    summary = read_json(summary_path)
    name = json_key(summary, "scenario.name", summary_path)
    policy = json_key(summary, "scenario.controller.policy", summary_path)
    return f"{name} ({policy})"


# ---------------------------------------------------------------------------------------------
# Chrome trace (trace.json)

class Trace:
    """trace.json's tracks and complete ("X") events.

    `processes`: pid -> name; `threads`: (pid, tid) -> name; `thread_order`: (pid, tid) -> sort
    index; `events`: dicts with name, ts_ns, dur_ns, pid, tid, args (ts/dur converted from the
    file's microseconds with three decimals to integer nanoseconds)."""

    def __init__(self, path, processes, threads, thread_order, events):
        self.path = path
        self.processes = processes
        self.threads = threads
        self.thread_order = thread_order
        self.events = events


def _ns(value):
    # The writer prints integer ns as µs with exactly three decimals; round() undoes it exactly.
    return int(round(float(value) * 1000.0))


def read_trace(path):
    document = read_json(path)
    if isinstance(document, dict):
        if "traceEvents" not in document:
            raise fail(path, "missing key 'traceEvents'; expected a Chrome trace-event JSON object")
        events = document["traceEvents"]
    else:
        events = document
    if not isinstance(events, list):
        raise fail(path, "'traceEvents' is not a list of events")
    processes, threads, thread_order, spans = {}, {}, {}, []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise fail(path, f"event {i} is not an object")
        ph = e.get("ph")
        for key in ("pid", "tid"):
            if ph in ("M", "X") and not isinstance(e.get(key), int):
                raise fail(path, f"event {i} ({e.get('name', '?')}): missing or non-integer '{key}'")
        if ph == "M":
            args = e.get("args") or {}
            if e.get("name") == "process_name":
                processes[e["pid"]] = str(args.get("name", f"pid {e['pid']}"))
            elif e.get("name") == "thread_name":
                threads[(e["pid"], e["tid"])] = str(args.get("name", f"tid {e['tid']}"))
            elif e.get("name") == "thread_sort_index":
                thread_order[(e["pid"], e["tid"])] = args.get("sort_index", e["tid"])
        elif ph == "X":
            try:
                ts, dur = _ns(e["ts"]), _ns(e["dur"])
            except (KeyError, TypeError, ValueError):
                raise fail(path, f"event {i} ({e.get('name', '?')}): complete event without "
                                 f"numeric 'ts' and 'dur'") from None
            args = e.get("args") or {}
            if not isinstance(args, dict):
                raise fail(path, f"event {i} ({e.get('name', '?')}): 'args' is not an object")
            spans.append({"name": str(e.get("name", "")), "ts_ns": ts, "dur_ns": dur,
                          "pid": e["pid"], "tid": e["tid"], "args": args})
    if not spans:
        raise fail(path, "has no complete ('X') events; nothing to plot")
    return Trace(path, processes, threads, thread_order, spans)


# ---------------------------------------------------------------------------------------------
# Figures and the command line

def new_figure(width_in, height_in):
    return Figure(figsize=(width_in, height_in), layout="constrained")


def save_figure(fig, path, dpi=100):
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    except OSError as e:
        raise PlotOutputError(f"{path}: cannot write the figure: {e.strerror or e}") from None
    return path


def parse_ranks(text):
    """'0,2,5' or '0-3' or '0-1,6' -> sorted list of ints (argparse type)."""
    ranks = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = part.split("-", 1)
                ranks.update(range(int(lo), int(hi) + 1))
            elif part:
                ranks.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ranks like '0,1' or '0-3', got '{text}'") from None
    if not ranks or min(ranks) < 0:
        raise argparse.ArgumentTypeError(f"expected ranks like '0,1' or '0-3', got '{text}'")
    return sorted(ranks)


def select_ranks(available, wanted, path):
    """`available` ranks filtered by `wanted` (None: all); an unknown wanted rank is an error."""
    available = sorted(set(int(r) for r in available))
    if wanted is None:
        return available
    unknown = [r for r in wanted if r not in available]
    if unknown:
        raise fail(path, f"has no rank {unknown[0]} (ranks present: "
                         f"{', '.join(str(r) for r in available)})")
    return list(wanted)


def parser(prog_file, description, epilog=""):
    return argparse.ArgumentParser(
        prog=os.path.join("plots", os.path.basename(prog_file)),
        description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter)


def add_output_options(p, output_help, default_dpi=100):
    p.add_argument("-o", "--output", required=True, metavar="PNG", help=output_help)
    p.add_argument("--dpi", type=int, default=default_dpi, help=f"resolution (default {default_dpi})")


def run_cli(main, argv=None, prog=None):
    """Runs main(argv); bad input -> one line on stderr and exit 2; unwritable output -> exit 1."""
    prog = prog or os.path.join("plots", os.path.basename(sys.argv[0]))
    try:
        code = main(argv)
    except PlotInputError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except PlotOutputError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug here, not bad input: say so in one line unless debugging
        if os.environ.get("PREFETCHLAB_PLOTS_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(e).__name__}: {e} "
              f"(set PREFETCHLAB_PLOTS_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
    return code or 0


def format_count(value):
    """1e5 -> '1e5', 6400000 -> '6.4e6', 500 -> '500' (bucket sizes, grid values)."""
    if isinstance(value, str):
        return value
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) < 1e4 and value.is_integer():
        return str(int(value))
    text = f"{value:.3g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def format_duration(ns):
    """Nanoseconds as '360 ns', '12.3 µs', '3.884 ms' or '1.20 s'."""
    ns = float(ns)
    if abs(ns) < 1e3:
        return f"{ns:.0f} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.3g} µs"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.4g} ms"
    return f"{ns / 1e9:.4g} s"
