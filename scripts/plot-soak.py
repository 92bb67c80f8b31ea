#!/usr/bin/env python3
"""Draws a soak run (skiplock-bench soak, make soak) as one PNG per figure.

Usage: python3 scripts/plot-soak.py bench/results/soak-<time>.json OUTDIR

Writes into OUTDIR: throughput.png (messages published, delivered and acked per second), latency.png (p99 of
publish round trips and of publish -> first receipt, with each judged series' 2x line), rss.png (each node's
RSS), table_sizes.png and index_sizes.png (the largest tables, with their toast, and indexes, and the
totals), dead_tuples.png (dead rows of the tables that had the most) and autovacuum.png (autovacuum and
autoanalyze runs per minute). Every figure marks the node kills (grey dashes), the PostgreSQL restart (red),
the redrive (green dots) and the held snapshot (shaded). Per-minute figures sit at the middle of their
minute, samples (RSS, sizes, dead rows) at its end.
"""

import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    source, outdir = sys.argv[1], sys.argv[2]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "matplotlib is not importable; install it with: python3 -m pip install matplotlib\n"
            "(make soak installs it into .venv; on Debian/Ubuntu's system Python: apt-get install "
            "python3-matplotlib, or pip in a virtualenv)",
            file=sys.stderr,
        )
        return 1

    with open(source) as f:
        run = json.load(f)
    rows = run["minutes"]
    events = run.get("events", [])
    plan = run.get("plan", {})
    minutes = len(rows)
    os.makedirs(outdir, exist_ok=True)

    def value(row, path):
        for key in path:
            try:
                row = row[key]
            except (KeyError, IndexError, TypeError):
                return None
        return row

    def series(path, at_end=False, scale=1.0):
        xs, ys = [], []
        for row in rows:
            v = value(row, path)
            if isinstance(v, (int, float)):
                xs.append(row["minute"] - (0.0 if at_end else 0.5))
                ys.append(v * scale)
        return xs, ys

    def mark(ax):
        """The faults and the held snapshot, with one legend entry each."""
        labelled = set()

        def once(label):
            if label in labelled:
                return None
            labelled.add(label)
            return label

        hold = run.get("hold") or {}
        if "taken_s" in hold and "released_s" in hold:
            ax.axvspan(hold["taken_s"] / 60, hold["released_s"] / 60, color="tab:purple", alpha=0.12,
                       label="snapshot held")
        for e in events:
            x = e["at_s"] / 60
            if e["what"] in ("kill", "node_exited"):
                label = "node killed" if e["what"] == "kill" else "node exited"
                ax.axvline(x, color="grey", linestyle="--", linewidth=0.8, label=once(label))
            elif e["what"] == "pg_restart":
                ax.axvline(x, color="tab:red", linewidth=1.2, label=once("PostgreSQL restarted"))
            elif e["what"] == "redrive_started":
                ax.axvline(x, color="tab:green", linestyle=":", linewidth=1.2, label=once("redrive"))
        ax.set_xlim(0, minutes)
        ax.set_xlabel("minute")
        ax.grid(True, which="both", alpha=0.3)

    title = f"soak {run.get('at', '')[:19]}: {run.get('accounts')} accounts, {run.get('rate', 0):g} msg/s"
    verdicts = run.get("verdicts", {})

    def save(fig, ax, name, subtitle, verdict_keys=(), legend_title=None):
        mark(ax)
        ax.set_title(f"{title}\n{subtitle}", fontsize="medium")
        # Beside the plot, so that it never hides a line.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title=legend_title,
                  title_fontsize="small", alignment="left")
        judged = [f"{k}: {'pass' if verdicts[k].get('pass') else 'FAIL'}" for k in verdict_keys if k in verdicts]
        if judged:
            fig.text(0.5, 0.005, "   ".join(judged), ha="center", fontsize="small")
        fig.tight_layout(rect=(0, 0.03 if judged else 0, 1, 1))
        path = os.path.join(outdir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"wrote {path}")

    # Throughput.
    fig, ax = plt.subplots(figsize=(12, 5))
    for key, label, style in [
        ("published_per_s", "published", "o-"),
        ("delivered_per_s", "delivered (redeliveries too)", "s--"),
        ("acked_per_s", "acked", "^:"),
        ("redelivered_per_s", "redelivered", "x-"),
    ]:
        ax.plot(*series([key]), style, label=label)
    ax.set_ylabel("messages/s")
    ax.set_ylim(bottom=0)
    save(fig, ax, "throughput.png", "messages per second, each minute")

    # p99 latencies, with the 2x line of each judged series.
    fig, ax = plt.subplots(figsize=(12, 5.5))
    ratio = run.get("rules", {}).get("p99_max_ratio", 2.0)
    reference = plan.get("reference_minute")
    judged = [
        (["publish", "all"], "publish round trip", "tab:blue"),
        (["delivery", "pull"], "pull delivery (plain, ordered)", "tab:orange"),
        (["delivery", "webhook"], "webhook delivery", "tab:green"),
    ]
    for path, label, color in judged:
        ax.plot(*series(path + ["p99_ms"]), "o-", color=color, label=f"{label} p99")
        ref = next((value(r, path + ["p99_ms"]) for r in rows if r["minute"] == reference), None)
        if ref:
            ax.axhline(ref * ratio, color=color, linestyle=":", linewidth=1, alpha=0.7,
                       label=f"{ratio:g}x minute {reference}'s ({ref * ratio:,.0f} ms)")
    ax.plot(*series(["delivery", "extending", "p99_ms"]), "s--", color="tab:brown", alpha=0.6,
            label="extending consumers' delivery p99 (not judged)")
    faults = [r["minute"] - 0.5 for r in rows if r.get("fault_minute")]
    for i, x in enumerate(faults):
        ax.axvspan(x - 0.5, x + 0.5, color="grey", alpha=0.07, label=None if i else "fault minute (not judged)")
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    save(fig, ax, "latency.png", "p99 per minute: publish round trip, and publish -> first receipt", ["p99"])

    # RSS per node.
    fig, ax = plt.subplots(figsize=(12, 5))
    for node, color in [(0, "tab:blue"), (1, "tab:orange")]:
        xs, ys = [], []
        for row in rows:
            v = value(row, ["rss_mib", node])
            if isinstance(v, (int, float)):
                xs.append(row["minute"])
                ys.append(v)
        ax.plot(xs, ys, "o-", color=color, label=f"node {node}")
    ax.set_ylabel("RSS (MiB)")
    ax.set_ylim(bottom=0)
    save(fig, ax, "rss.png", "each node's resident set at each minute's end (a killed node starts again)", ["rss"])

    def sizes(kind, name, subtitle, top, verdict):
        fig, ax = plt.subplots(figsize=(12, 6))
        peaks = {}
        for row in rows:
            for rel, figures in (value(row, ["db", kind]) or {}).items():
                peaks[rel] = max(peaks.get(rel, 0), figures.get("bytes") or 0)
        largest = sorted(peaks, key=peaks.get, reverse=True)[:top]
        for rel in largest:
            ax.plot(*series(["db", kind, rel, "bytes"], at_end=True, scale=1e-6), ".-", label=rel)
        total = "total_bytes" if kind == "tables" else "index_bytes"
        ax.plot(*series(["db", total], at_end=True, scale=1e-6), "k-", linewidth=2,
                label=f"all {len(peaks)} {kind}")
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
        save(fig, ax, name, subtitle, [verdict])

    sizes("tables", "table_sizes.png", "tables' sizes with their toast and indexes (the largest, and all)",
          8, "table_sizes")
    sizes("indexes", "index_sizes.png", "indexes' sizes (the largest, and all)", 10, "index_sizes")

    # Dead rows.
    fig, ax = plt.subplots(figsize=(12, 5.5))
    peaks = {}
    for row in rows:
        for rel, figures in (value(row, ["db", "tables"]) or {}).items():
            peaks[rel] = max(peaks.get(rel, 0), figures.get("dead") or 0)
    for rel in sorted(peaks, key=peaks.get, reverse=True)[:8]:
        if peaks[rel] > 0:
            ax.plot(*series(["db", "tables", rel, "dead"], at_end=True), ".-", label=rel)
    ax.plot(*series(["db", "dead_rows"], at_end=True), "k-", linewidth=2, label="all tables")
    ax.set_ylabel("dead rows (n_dead_tup)")
    ax.set_ylim(bottom=0)
    save(fig, ax, "dead_tuples.png", "dead rows at each minute's end (PostgreSQL's restart resets the counts)")

    # Autovacuum runs.
    fig, ax = plt.subplots(figsize=(12, 5.5))
    xs, vacuums = series(["db", "autovacuum_runs"])
    ax.bar([x - 0.2 for x in xs], vacuums, width=0.4, color="tab:blue", label="autovacuum runs (all tables)")
    xs, analyzes = series(["db", "autoanalyze_runs"])
    ax.bar([x + 0.2 for x in xs], analyzes, width=0.4, color="tab:cyan", label="autoanalyze runs (all tables)")
    runs = {}
    for row in rows:
        for rel, figures in (value(row, ["db", "tables"]) or {}).items():
            runs[rel] = runs.get(rel, 0) + (figures.get("autovacuum_runs") or 0)
    busiest = "\n".join(f"{rel}: {n}" for rel, n in sorted(runs.items(), key=lambda kv: -kv[1])[:6] if n)
    ax.set_ylabel("runs in the minute")
    save(fig, ax, "autovacuum.png", "autovacuum and autoanalyze runs per minute, over all tables", (),
         f"autovacuums in all, by table:\n{busiest or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
