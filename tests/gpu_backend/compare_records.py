#!/usr/bin/env python3
"""Compares two real runs' records (validate's iterations.csv, buckets.csv, samples.csv) in every
non-timing field: the columns that are not times (*_ns) and not reserved memory, which follows
when each stream's work finishes. Exit 1 naming the first difference.
  compare_records.py DIR_A DIR_B"""
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    a_dir, b_dir = sys.argv[1], sys.argv[2]
    compared = 0
    for name in ("iterations.csv", "buckets.csv", "samples.csv"):
        a, b = rows(f"{a_dir}/{name}"), rows(f"{b_dir}/{name}")
        if len(a) != len(b):
            sys.exit(f"{name}: {len(a)} rows in {a_dir}, {len(b)} in {b_dir}")
        if not a:
            sys.exit(f"{name}: no rows in {a_dir}")
        columns = [c for c in a[0] if not c.endswith("_ns") and "reserved" not in c]
        for i, (ra, rb) in enumerate(zip(a, b)):
            for c in columns:
                if ra[c] != rb[c]:
                    sys.exit(f"{name} row {i + 2} column {c}: {ra[c]} in {a_dir}, {rb[c]} in {b_dir}")
        compared += len(a) * len(columns)
    print(f"records equal in every non-timing field ({compared} values)")


if __name__ == "__main__":
    main()
