#!/usr/bin/env python3
"""Draws a W10 held-horizon run (skiplock-bench horizon, make bench-horizon) as a PNG.

Usage: python3 scripts/plot-horizon.py bench/results/horizon-<time>.json docs/horizon.png

Three panels over the run's minutes, the held minutes shaded: W4 p50/p99 (publish -> webhook arrival, log
scale) with the 50 ms target; the W2 drain rate of each minute's cycle with the line at 0.7x its mean
before the hold; the dead rows of messages + bodies, and the messages' and bodies' table sizes.
Per-minute figures (W4, W2) sit at the middle of their minute; samples (dead rows, sizes) at its end.
"""

import json
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    source, target = sys.argv[1], sys.argv[2]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "matplotlib is not importable; install it with: python3 -m pip install matplotlib\n"
            "(on Debian/Ubuntu's system Python: apt-get install python3-matplotlib, or pip in a virtualenv)",
            file=sys.stderr,
        )
        return 1

    with open(source) as f:
        run = json.load(f)
    rows = run["minutes"]
    targets = run.get("targets", {})
    before, held = run["before_minutes"], run["held_minutes"]

    def series(get, at_end=False):
        xs, ys = [], []
        for row in rows:
            try:
                value = get(row)
            except (KeyError, TypeError):
                value = None
            if value is not None:
                xs.append(row["minute"] + (1.0 if at_end else 0.5))
                ys.append(value)
        return xs, ys

    fig, (lat, w2, db) = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    hold = run.get("hold") or {}
    # The hold as it was (taken_s, released_s), else as scheduled.
    hold_from = hold.get("taken_s", before * 60) / 60
    hold_until = hold.get("released_s", (before + held) * 60) / 60
    for ax in (lat, w2, db):
        if held:
            ax.axvspan(hold_from, hold_until, color="tab:red", alpha=0.08, label="snapshot held")
        ax.grid(True, which="both", alpha=0.3)

    p99_target = targets.get("held_w4_p99_ms", 50)
    x, y = series(lambda r: r["w4"]["p99_ms"])
    lat.plot(x, y, "o-", color="tab:blue", label="W4 p99")
    x, y = series(lambda r: r["w4"]["p50_ms"])
    lat.plot(x, y, "o--", color="tab:cyan", label="W4 p50")
    lat.axhline(p99_target, color="tab:red", linestyle=":", label=f"target p99 {p99_target:g} ms")
    lat.set_yscale("log")
    lat.set_ylabel("publish -> webhook (ms)")
    late = sum(r["w4"]["late"] for r in rows)
    lat.set_title(f"W10 held horizon, {run.get('at', '')[:19]}: W4 at {run['rate']}/s ({late} late in all)")
    lat.legend(loc="best", fontsize="small")

    x, y = series(lambda r: r["cycle"]["w2_rate"])
    w2.plot(x, y, "o-", color="tab:green", label="W2 drain rate")
    x1, y1 = series(lambda r: r["cycle"]["w1_rate"])
    w2.plot(x1, y1, "s--", color="tab:olive", alpha=0.6, label="W1 publish rate")
    ratio = targets.get("held_w2_ratio", 0.7)
    if run.get("before_w2_mean"):
        line = ratio * run["before_w2_mean"]
        w2.axhline(line, color="tab:red", linestyle=":", label=f"{ratio:g}x W2 before ({line:,.0f}/s)")
    w2.set_ylabel("messages/s")
    w2.set_ylim(bottom=0)
    w2.set_title(f"each minute: {run['cycle_messages']:,} messages published (W1), then drained (W2)")
    w2.legend(loc="best", fontsize="small")

    x, y = series(lambda r: r["sample"]["dead_rows_messages"], at_end=True)
    db.plot(x, y, "o-", color="tab:purple", label="dead rows, messages + bodies")
    db.set_ylabel("dead rows")
    db.set_ylim(bottom=0)
    sizes = db.twinx()
    for key, label, color in [
        ("messages_bytes", "messages MB", "tab:orange"),
        ("bodies_bytes", "bodies MB", "tab:brown"),
        ("database_bytes", "database MB", "tab:gray"),
    ]:
        x, y = series(lambda r, key=key: r["sample"][key] / 1e6, at_end=True)
        sizes.plot(x, y, "s--", color=color, label=label)
    sizes.set_ylabel("MB")
    sizes.set_ylim(bottom=0)
    lines = db.get_legend_handles_labels()
    more = sizes.get_legend_handles_labels()
    db.legend(lines[0] + more[0], lines[1] + more[1], loc="best", fontsize="small")
    db.set_xlabel("minute")
    db.set_xlim(0, len(rows))

    verdicts = run.get("verdicts", {})
    if verdicts:
        text = "   ".join(f"{k}: {'pass' if v.get('pass') else 'FAIL'}" for k, v in verdicts.items())
        fig.text(0.5, 0.005, text, ha="center", fontsize="small")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
