#!/usr/bin/env python3
"""Paired ratios of hedge bench runs against a baseline configuration.

Usage: paired.py results.json [baseline]

For each repeat, each configuration's p50, p99 and p99.9 over the
baseline's in the same repeat (the same arrivals); then the mean of those
ratios over repeats with a 95% t-interval and two standard errors, and
CPU per request of the bench process (self_cpu_cores / achieved_rate).
Only kept runs count (one per repeat); "clean" restricts to repeats whose
kept runs were all below the bench's noise limits.
"""
import json, math, sys, statistics as st

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31,
       9: 2.26, 10: 2.23, 11: 2.20, 12: 2.18, 14: 2.14, 19: 2.09, 29: 2.05}

def t95(df):
    return T95.get(df) or T95[max(k for k in T95 if k <= df)]

def summary(xs):
    n = len(xs)
    m = st.mean(xs)
    if n < 2:
        return m, float('nan'), float('nan')
    se = st.stdev(xs) / math.sqrt(n)
    return m, t95(n - 1) * se, 2 * se

def main():
    rep = json.load(open(sys.argv[1]))
    for b in rep["backends"]:
        base = sys.argv[2] if len(sys.argv) > 2 else b["baseline"]
        kept = {}
        for r in b["runs"]:
            if r["kept"]:
                kept[(r["config"], r["repeat"])] = r
        configs = [c["config"] for c in b["configs"]]
        repeats = sorted({k[1] for k in kept})
        clean = [i for i in repeats if all(not kept[(c, i)]["noisy"] for c in configs if (c, i) in kept)]
        print(f"{b['backend']}: baseline {base}, {len(repeats)} repeats ({len(clean)} clean)")
        for label, reps in (("all", repeats), ("clean", clean)):
            if not reps:
                continue
            print(f"  {label} repeats (n={len(reps)})")
            for c in configs:
                rows = [(kept[(c, i)], kept[(base, i)]) for i in reps if (c, i) in kept and (base, i) in kept]
                cpu = st.mean(r["self_cpu_cores"] / r["achieved_rate"] * 1e6 for r, _ in rows)
                extra = st.mean(r["extra_pct"] for r, _ in rows)
                cells = []
                for q in ("p50_us", "p99_us", "p999_us"):
                    m, ci, se2 = summary([r[q] / b0[q] for r, b0 in rows])
                    med = st.median(r[q] for r, _ in rows) / 1000
                    cells.append(f"{q[:-3]} {med:.3f} ms {m:.3f} ± {ci:.3f} ({se2:.3f})")
                print(f"    {c:16s} " + " | ".join(cells) + f" | extra {extra:.2f}% | bench CPU/req {cpu:.0f} µs")

main()
