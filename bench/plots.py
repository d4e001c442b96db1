"""SVG plots of bench/results.json (matplotlib): put+get rates, the oracle's
run time, TLC's states per second.

Drawn from recorded results only, never while measuring, so `python -m bench
--plots-only` redraws them in seconds; the output is byte-for-byte the same
for the same results (Agg backend, fixed hash salt and metadata, text kept as
text), which lets a test check the committed files are current.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bench.tables import impl_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
PLOTS_DIR = REPO / "docs" / "bench"

# Okabe-Ito colours: told apart by colour-blind readers too
COLOURS = {"seed": "#999999", "refimpl": "#0072B2", "native": "#E69F00", "plain": "#009E73"}
LABELS = {"seed": "seed", "refimpl": "refimpl", "native": "native_store", "plain": "plain copy"}
STYLE: dict[str, object] = {
    "svg.hashsalt": "shmref-bench",  # clip-path ids from this, not from random
    "svg.fonttype": "none",  # text stays text: smaller, searchable, no glyph paths
    "font.family": "DejaVu Sans",  # matplotlib ships it: the same metrics everywhere
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _compact(value: float) -> str:
    """39,670 -> 40k, 1,180,743 -> 1.2M: short labels on bars."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if scaled < 10 else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}"


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def putget(results: dict[str, Any]) -> Figure:
    """Grouped bars, one panel per reader count: put+get per second by value size."""
    rows = results["store"]["throughput"]
    readers = list(dict.fromkeys(r["readers"] for r in rows))
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    contenders = [c for c in COLOURS if any(r["contender"] == c for r in rows)]
    by = {(r["readers"], r["size"], r["contender"]): r for r in rows}
    fig = _figure(3.6 * len(readers) + 0.6, 4.0)
    axes = fig.subplots(1, len(readers), sharey=True, squeeze=False)[0]
    width = 0.8 / len(contenders)
    for ax, n in zip(axes, readers, strict=True):
        for i, name in enumerate(contenders):
            xs, ys = [], []
            for j, size in enumerate(sizes):
                row = by.get((n, size, name))
                if row is not None:
                    xs.append(j + (i - (len(contenders) - 1) / 2) * width)
                    ys.append(row["ops_per_s"])
            bars = ax.bar(xs, ys, width, color=COLOURS[name], label=LABELS[name])
            ax.bar_label(bars, [_compact(y) for y in ys], fontsize=7, padding=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlabel("value size")
        ax.set_title(f"{n} reader process{'es' if n != 1 else ''}")
        ax.grid(axis="y", which="major", alpha=0.3)
    axes[0].set_ylabel("put+get per second (log scale; higher is faster)")
    fig.legend(
        *axes[0].get_legend_handles_labels(),
        loc="outside lower center",
        ncols=len(contenders),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle("put+get rate by value size: the seed, refimpl, native_store, a plain copy")
    return fig


def oracle(results: dict[str, Any]) -> Figure:
    """Horizontal bars: each recorded conformance run's wall and CPU seconds, its target."""
    rows = results["conformance"]
    fig = _figure(7.5, 0.55 * len(rows) + 1.6)
    ax = fig.subplots()
    labels = [f"{impl_of(r)}: {r['run']}" for r in rows]
    ys = list(range(len(rows)))[::-1]
    wall = ax.barh([y + 0.18 for y in ys], [r["wall_s"] for r in rows], 0.36, color="#0072B2")
    cpu_rows = [(y, r["cpu_s"]) for y, r in zip(ys, rows, strict=True) if "cpu_s" in r]
    ax.barh([y - 0.18 for y, _ in cpu_rows], [c for _, c in cpu_rows], 0.36, color="#56B4E9")
    ax.bar_label(wall, [_outcome(r) for r in rows], fontsize=7, padding=2, **_ON_WHITE)
    targets = [(y, r["target_s"]) for y, r in zip(ys, rows, strict=True) if r.get("target_s")]
    ax.vlines(
        [t for _, t in targets],
        [y - 0.45 for y, _ in targets],
        [y + 0.45 for y, _ in targets],
        colors="#D55E00",
        linewidths=2,
    )
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xlabel("seconds (lower is faster)")
    ax.grid(axis="x", alpha=0.3)
    most = max(max(r["wall_s"], r.get("cpu_s", 0), r.get("target_s") or 0) for r in rows)
    ax.set_xlim(0, most * 1.1)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color="#0072B2", label="wall time"),
        Patch(color="#56B4E9", label="CPU time (user + system, children included)"),
        Line2D([], [], color="#D55E00", linewidth=2, label="target (wall time)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    fig.suptitle("The oracle's run time: python -m shmref.conformance, as recorded")
    return fig


_ON_WHITE: dict[str, Any] = {"bbox": {"facecolor": "white", "edgecolor": "none", "pad": 0.5}}


def _outcome(row: dict[str, Any]) -> str:
    text = f"{row['wall_s']:.0f} s, exit {row['exit']}"
    return text + (" (failures found)" if row["exit"] == 1 else "")


def tlc(results: dict[str, Any]) -> Figure:
    """Horizontal bars per model: distinct states per second net of TLC's start-up."""
    section = results["tlc"]
    models = sorted(section["models"], key=lambda m: m["net_states_per_min"])
    fig = _figure(7.5, max(2.8, 0.2 * len(models) + 1.8))
    ax = fig.subplots()
    rates = [m["net_states_per_min"] / 60 for m in models]
    colours = ["#0072B2" if m["outcome"] == "ok" else "#D55E00" for m in models]
    bars = ax.barh(range(len(models)), rates, 0.7, color=colours)
    ax.bar_label(bars, [f"{m['distinct_states']:,}" for m in models], fontsize=6, padding=2)
    ax.set_yticks(range(len(models)), [m["model"] for m in models], fontsize=7)
    ax.set_xscale("log")
    ax.margins(x=0.15, y=0.01)
    trivial = section["trivial"]
    base = trivial["net_states_per_min"] / 60
    ax.axvline(base, color="black", linestyle="--", linewidth=1)
    ax.text(  # above the axes, where no bar or legend is
        base,
        1.0,
        f"trivial spec: {_compact(base)}/s",
        transform=ax.get_xaxis_transform(),
        ha="center",
        va="bottom",
        fontsize=7,
    )
    ax.set_xlabel(
        f"distinct states per second, net of TLC's {section['startup_s']:.1f} s start-up "
        "(log scale); bar label: distinct states"
    )
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    handles = [
        Patch(color="#0072B2", label="passes"),
        Patch(color="#D55E00", label="violation found (a hazard model)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    fig.suptitle("TLC's states per second on each model (bench/tlcbench.py)")
    return fig


def available(results: dict[str, Any]) -> list[str]:
    """The plots `results` hold data for (without importing matplotlib)."""
    has = {
        "putget.svg": bool(results.get("store", {}).get("throughput")),
        "oracle.svg": bool(results.get("conformance")),
        "tlc.svg": bool((results.get("tlc") or {}).get("models")),
    }
    return [name for name in PLOTS if has[name]]


PLOTS: dict[str, Callable[[dict[str, Any]], Figure]] = {
    "putget.svg": putget,
    "oracle.svg": oracle,
    "tlc.svg": tlc,
}


def render(results: dict[str, Any]) -> dict[str, bytes]:
    """Each plot the results have data for, as SVG bytes by file name."""
    import matplotlib

    matplotlib.use("Agg")
    out: dict[str, bytes] = {}
    # cast: matplotlib types the keys as a Literal of every rcParam name
    with matplotlib.rc_context(cast(Any, STYLE)):
        for name in available(results):
            fig = PLOTS[name](results)
            buffer = io.BytesIO()
            # no date; the creator names the version: another one draws other bytes
            meta = {"Date": None, "Creator": f"matplotlib {matplotlib.__version__}"}
            fig.savefig(buffer, format="svg", metadata=meta)
            out[name] = buffer.getvalue()
    return out


def write(results: dict[str, Any], folder: Path) -> list[Path]:
    """Render into `folder`; a plot whose data is gone is removed, not left stale."""
    folder.mkdir(parents=True, exist_ok=True)
    drawn = render(results)
    for name in PLOTS:
        if name not in drawn:
            (folder / name).unlink(missing_ok=True)
    for name, data in drawn.items():
        (folder / name).write_bytes(data)
    return [folder / name for name in drawn]


def stale(results: dict[str, Any], folder: Path) -> list[str]:
    """The plot files in `folder` that differ from what `results` draws (missing,
    changed, or present without data): empty when they are current."""
    drawn = render(results)
    found = []
    for name in PLOTS:
        path = folder / name
        have = path.read_bytes() if path.is_file() else None
        if have != drawn.get(name):
            found.append(name)
    return found
