#!/usr/bin/env python3
"""Draw the handoff-latency chart for docs/performance.md (no dependencies).

Reads the samples written by `cargo bench --bench limits`
(target/redhold-limits/handoff-latency.csv and limits.json) and writes an SVG
with the cumulative distribution (CDF, log-scale x axis) of:

  - library_warm_handoff  redhold: holder drops its guard -> parked waiter's lock() returns
  - raw_handoff           the same handoff hand-rolled with the redis crate (the ideal client)
  - raw_bound_sum         raw release + raw PUBLISH delivery + raw acquire, per sample
  - library_cold_handoff  redhold, fresh lock name each time (release -> acquired)

plus the targets: p50 <= 1.5 x (raw release + publish + acquire p50s), p99 <= 2 ms.

With --idle it draws the handoffs after an idle waiter instead (default output
docs/handoff-idle-latency.svg), series from the same CSV:

  - ideal_idle_1ms, ideal_idle_20ms                the ideal client (redis crate alone)
  - same_client_idle_1ms, same_client_idle_20ms    redhold, holder and waiter on one Client
  - cross_client_idle_1ms, cross_client_idle_20ms  redhold, waiter on a second Client

Usage: python3 benches/plot_handoff.py [--idle] [CSV] [JSON] [OUT.svg]
Defaults: target/redhold-limits/handoff-latency.csv, target/redhold-limits/limits.json,
docs/handoff-latency.svg
"""
import csv
import json
import math
import sys
from collections import OrderedDict
from xml.sax.saxutils import escape

IDLE = "--idle" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--idle"]
CSV = ARGS[0] if len(ARGS) > 0 else "target/redhold-limits/handoff-latency.csv"
JSON = ARGS[1] if len(ARGS) > 1 else "target/redhold-limits/limits.json"
OUT = ARGS[2] if len(ARGS) > 2 else ("docs/handoff-idle-latency.svg" if IDLE else "docs/handoff-latency.svg")

STYLE = OrderedDict(
    [
        ("library_warm_handoff", ("#d62728", "redhold warm handoff", "")),
        ("library_cold_handoff", ("#ff7f0e", "redhold cold handoff (fresh name)", "")),
        ("raw_handoff", ("#1f77b4", "raw handoff, redis crate alone", "")),
        ("raw_bound_sum", ("#7f7f7f", "raw release + publish + acquire", "6,4")),
    ]
)
IDLE_STYLE = OrderedDict(
    [
        ("ideal_idle_1ms", ("#1f77b4", "ideal client, waiter idle 1 ms", "")),
        ("ideal_idle_20ms", ("#1f77b4", "ideal client, waiter idle 20 ms", "6,4")),
        ("same_client_idle_1ms", ("#2ca02c", "redhold same client, idle 1 ms", "")),
        ("same_client_idle_20ms", ("#2ca02c", "redhold same client, idle 20 ms", "6,4")),
        ("cross_client_idle_1ms", ("#d62728", "redhold cross client, idle 1 ms", "")),
        ("cross_client_idle_20ms", ("#d62728", "redhold cross client, idle 20 ms", "6,4")),
    ]
)
if IDLE:
    STYLE = IDLE_STYLE

series = OrderedDict()
with open(CSV, newline="") as f:
    for row in csv.DictReader(f):
        # Each chart draws its own series (the CSV holds both charts').
        if row["series"] in STYLE:
            series.setdefault(row["series"], []).append(float(row["micros"]))
for v in series.values():
    v.sort()
try:
    with open(JSON) as f:
        info = json.load(f)
except OSError:
    info = {}


def pct(v, q):
    return v[min(len(v) - 1, int(round((len(v) - 1) * q)))]


W, H = 980, 520
L, R, T, B = 70, 300, 50, 60  # margins
pw, ph = W - L - R, H - T - B
all_vals = [x for v in series.values() for x in v]
lo = max(1.0, min(all_vals))
xmin = max(m * 10 ** math.floor(math.log10(lo)) for m in (1, 2, 5) if m * 10 ** math.floor(math.log10(lo)) <= lo)
xmax_data = max(pct(v, 0.999) for v in series.values())
xmax = 10 ** math.ceil(math.log10(max(xmax_data, 2500.0)))


def X(us):
    us = min(max(us, xmin), xmax)
    return L + (math.log10(us) - math.log10(xmin)) / (math.log10(xmax) - math.log10(xmin)) * pw


def Y(frac):
    return T + (1.0 - frac) * ph


out = []
o = out.append
o(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
  'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">')
o(f'<rect width="{W}" height="{H}" fill="white"/>')
title = (
    "Handoff after an idle waiter (CDF): redhold vs the ideal client"
    if IDLE
    else "Lock handoff latency (CDF): redhold vs the raw Redis round-trip bound"
)
o(f'<text x="{L}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>')
sub = []
if "redis_version" in info:
    sub.append(f"Redis {info['redis_version']}")
if "nproc" in info:
    sub.append(f"{info['nproc']} cores")
if "samples" in info:
    sub.append(f"{info['samples']} samples per series")
sub.append("loopback, same run")
o(f'<text x="{L}" y="40" fill="#555">{escape(", ".join(sub))}</text>')

# grid + axes
decade = 10 ** math.floor(math.log10(xmin))
while decade <= xmax * 1.0001:
    for m in range(1, 10):
        x_us = decade * m
        if x_us > xmax * 1.0001 or x_us < xmin:
            continue
        x = X(x_us)
        major = m == 1
        o(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{T + ph}" stroke="{"#ccc" if major else "#eee"}"/>')
        if major or m in (2, 5):
            label = f"{x_us / 1000:g} ms" if x_us >= 1000 else f"{x_us:g} µs"
            o(f'<text x="{x:.1f}" y="{T + ph + 16}" text-anchor="middle" fill="#333">{label}</text>')
    decade *= 10
for q in (0, 0.25, 0.5, 0.75, 0.9, 1.0):
    y = Y(q)
    o(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#ddd"/>')
    o(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{q:g}</text>')
o(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
o(f'<text x="{L + pw / 2}" y="{H - 18}" text-anchor="middle">latency (log scale)</text>')
o(f'<text transform="translate(18,{T + ph / 2}) rotate(-90)" text-anchor="middle">fraction of handoffs ≤ x</text>')

# target lines
bound = info.get("bound_warm_handoff_p50_us")
targets = []
if bound and not IDLE:
    targets.append((1.5 * bound, "#2ca02c", f"target p50 ≤ 1.5 × bound ({1.5 * bound:.0f} µs)"))
if not IDLE:
    targets.append((2000.0, "#9467bd", "target p99 ≤ 2 ms"))
for us, color, _ in targets:
    x = X(us)
    o(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{T + ph}" stroke="{color}" stroke-width="1.5" stroke-dasharray="2,3"/>')

# CDF curves
for name, v in series.items():
    color, _, dash = STYLE.get(name, ("#000", name, ""))
    n = len(v)
    step = max(1, n // 1500)
    pts = []
    for i in range(0, n, step):
        pts.append(f"{X(v[i]):.1f},{Y((i + 1) / n):.1f}")
    pts.append(f"{X(v[-1]):.1f},{Y(1.0):.1f}")
    da = f' stroke-dasharray="{dash}"' if dash else ""
    o(f'<polyline fill="none" stroke="{color}" stroke-width="2"{da} points="{" ".join(pts)}"/>')
    for q in (0.5, 0.99):
        o(f'<circle cx="{X(pct(v, q)):.1f}" cy="{Y(q):.1f}" r="3" fill="{color}"/>')

# legend
lx, ly = L + pw + 15, T + 10
for name, v in series.items():
    color, label, dash = STYLE.get(name, ("#000", name, ""))
    da = f' stroke-dasharray="{dash}"' if dash else ""
    o(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" stroke-width="2"{da}/>')
    o(f'<text x="{lx + 30}" y="{ly + 4}">{escape(label)}</text>')
    o(f'<text x="{lx + 30}" y="{ly + 19}" fill="#555">p50 {pct(v, 0.5):.0f} µs, p99 {pct(v, 0.99):.0f} µs</text>')
    ly += 40
for us, color, label in targets:
    o(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" stroke-width="1.5" stroke-dasharray="2,3"/>')
    o(f'<text x="{lx + 30}" y="{ly + 4}">{escape(label)}</text>')
    ly += 24
o(f'<text x="{lx}" y="{ly + 10}" fill="#555">dots: p50 and p99</text>')
o("</svg>")

with open(OUT, "w") as f:
    f.write("\n".join(out) + "\n")
print(f"wrote {OUT}")
