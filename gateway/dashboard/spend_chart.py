"""The spend page's chart: one stacked bar per day, a segment per (agent, purpose), drawn
here as SVG. Server-side, so the page needs no chart script, no CDN and no inline script
the CSP would refuse; colours are attributes, not styles, for the same reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from markupsafe import Markup, escape

# Distinguishable for most colour vision; a series past the tenth reuses them in order.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 260, 56, 28, 12


@dataclass(frozen=True)
class Series:
    name: str  # "main · chat"
    colour: str


def series_of(names: list[str]) -> list[Series]:
    return [Series(n, PALETTE[i % len(PALETTE)]) for i, n in enumerate(sorted(names))]


def stacked_bars(
    days: list[date],
    values: Mapping[tuple[date, str], float],
    series: list[Series],
    unit: str,
) -> Markup:
    """`values[(day, series name)]` as an SVG bar chart; `unit` labels the axis ("USD",
    "tokens"). Every rectangle carries a <title> for a hover read-out."""
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - TOP - BOTTOM
    totals = [sum(values.get((day, s.name), 0.0) for s in series) for day in days]
    top = max(totals, default=0.0) or 1.0
    step = plot_w / max(len(days), 1)
    bar_w = max(step * 0.7, 1.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'class="chart" aria-label="{escape(unit)} per day by agent and purpose">',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 8}" y2="{TOP + plot_h}" '
        'stroke="#888"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 10}" text-anchor="end" font-size="11">'
        f"{escape(_label(top, unit))}</text>",
        f'<text x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end" font-size="11">0</text>',
    ]
    for index, day in enumerate(days):
        x = LEFT + index * step + (step - bar_w) / 2
        y = float(TOP + plot_h)
        for s in series:
            value = values.get((day, s.name), 0.0)
            if value <= 0:
                continue
            height = plot_h * value / top
            y -= height
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{height:.1f}" '
                f'fill="{s.colour}" data-series="{escape(s.name)}" data-day="{day}">'
                f"<title>{day} {escape(s.name)}: {escape(_label(value, unit))}</title></rect>"
            )
        if len(days) <= 16 or index % 5 == 0 or index == len(days) - 1:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle" '
                f'font-size="10">{day:%d %b}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _label(value: float, unit: str) -> str:
    return f"${value:.4f}" if unit == "USD" else f"{int(value):,} tokens"


def last_days(today: date, count: int) -> list[date]:
    return [today - timedelta(days=count - 1 - i) for i in range(count)]
