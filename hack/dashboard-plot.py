#!/usr/bin/env python3
"""Draw config/monitoring/dashboard.json's panels from a Prometheus, in the dashboard's layout.

    hack/dashboard-plot.py PROMETHEUS_URL DASHBOARD_JSON OUT_PNG RANGE

Each panel's queries run as Grafana would send them (its variables replaced: $__rate_interval by
1m, $namespace by .*) through Prometheus' /api/v1/query_range over the last RANGE (e.g. 8m),
one point every 5 s; a stat panel shows its last value. Used by hack/dashboard-screenshot.sh,
where Grafana itself cannot be built (no npm).
"""
import json
import sys
import time
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BG, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
COLORS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#fade2a"]


def query_range(url, expr, start, end):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "5"})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(fmt, labels):
    out = fmt
    for k, v in labels.items():
        out = out.replace("{{" + k + "}}", v)
    return out


def unit_label(unit):
    return {"s": "seconds", "ops": "per second"}.get(unit, "")


def main():
    url, dash_path, out, rng = sys.argv[1:5]
    seconds = int(rng.rstrip("m")) * 60
    dash = json.load(open(dash_path))
    end = time.time()
    start = end - seconds
    panels = dash["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    scale = 0.42  # inches per grid unit
    fig = plt.figure(figsize=(24 * scale * 1.9, rows * scale), facecolor=BG)
    fig.suptitle(f"{dash['title']} — last {rng}, from Prometheus", color=TEXT, x=0.01, ha="left", fontsize=14)
    for p in panels:
        g = p["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        top = 0.97  # the title above
        bottom, height = top * (1 - (g["y"] + g["h"]) / rows), top * g["h"] / rows
        if p["type"] == "row":
            fig.text(left + 0.005, bottom + height * 0.2, p["title"], color=TEXT, fontsize=12, weight="bold")
            continue
        ax = fig.add_axes([left + 0.02, bottom + 0.012, width - 0.026, height - 0.03], facecolor=PANEL)
        ax.set_title(p["title"], color=TEXT, fontsize=9, loc="left")
        for s in ax.spines.values():
            s.set_color(GRID)
        ax.tick_params(colors=TEXT, labelsize=7)
        series = []
        for t in p["targets"]:
            expr = t["expr"].replace("$__rate_interval", "1m").replace("$namespace", ".*")
            for r in query_range(url, expr, start, end):
                xs = [float(v[0]) - end for v in r["values"]]
                ys = [float(v[1]) for v in r["values"]]
                series.append((legend(t.get("legendFormat", ""), r["metric"]), xs, ys))
        if p["type"] == "stat":
            ax.set_xticks([])
            ax.set_yticks([])
            last = series[0][2][-1] if series and series[0][2] else float("nan")
            if series:
                ax.fill_between(series[0][1], series[0][2], color=COLORS[0], alpha=0.15)
            text = "no data" if last != last else (f"{last:.0f}" if last == int(last) else f"{last:.2f}")
            ax.text(0.5, 0.45, text, color=COLORS[0], fontsize=26, ha="center", va="center", transform=ax.transAxes, weight="bold")
            continue
        for i, (name, xs, ys) in enumerate(series):
            ax.plot([x / 60 for x in xs], ys, color=COLORS[i % len(COLORS)], linewidth=1.4, label=name)
        ax.grid(color=GRID, linewidth=0.5)
        ax.set_xlabel("minutes ago", color=TEXT, fontsize=7)
        u = unit_label(p.get("fieldConfig", {}).get("defaults", {}).get("unit", ""))
        if u:
            ax.set_ylabel(u, color=TEXT, fontsize=7)
        if not series:
            ax.text(0.5, 0.5, "no data", color=TEXT, ha="center", va="center", transform=ax.transAxes)
        elif len(series) <= 8:
            ax.legend(fontsize=6, facecolor=PANEL, labelcolor=TEXT, edgecolor=GRID, loc="upper left")
    fig.savefig(out, dpi=110, facecolor=BG)


if __name__ == "__main__":
    main()
