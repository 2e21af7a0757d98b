"""The HTML pages' common part: the Jinja2 templates of scripts/templates/ and the filters they
use (times with their unit, figures to four digits, a case's trend as an inline SVG line).

The pages are self-contained: styles inline, no script, nothing fetched from the network; the
images and links are files of the run, named relative to the page, so a folder opens from disk
wherever it was copied.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

TEMPLATES = Path(__file__).resolve().parent / "templates"


def seconds(value: Any) -> str:
    """A time with the unit that suits it: `3.27 ms`, `14.8 us`; `-` when absent."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    value = float(value)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def figure(value: Any) -> str:
    """A measured or predicted figure to four significant digits (text as it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return f"{value:.4g}"


SPARK_W, SPARK_H, SPARK_PAD = 160, 36, 4
# The y range spans at least this fraction of the values' middle, so that a few percent of
# run-to-run noise does not fill the line's height.
SPARK_MIN_SPAN = 0.2


def sparkline(values: list[float], marked: list[bool], steps: list[int] = ()) -> Markup:
    """A case's values over the runs as a small SVG line, oldest left; a red dot on each run
    marked (the compare step flagged it), a dashed vertical before each position in `steps`
    (a change point's first run). Its title lists the values, for readers that do not show
    SVG."""
    if not values:
        return Markup("")
    centre = (min(values) + max(values)) / 2
    span = max(max(values) - min(values), SPARK_MIN_SPAN * abs(centre)) or 1.0
    low = centre - span / 2
    step = (SPARK_W - 2 * SPARK_PAD) / max(1, len(values) - 1)
    points = [(SPARK_PAD + i * step,
               SPARK_H - SPARK_PAD - (v - low) / span * (SPARK_H - 2 * SPARK_PAD))
              for i, v in enumerate(values)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" class="flag"/>'
                   for (x, y), m in zip(points, marked) if m)
    cuts = "".join(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{SPARK_H}" class="step"/>'
                   for x in (SPARK_PAD + (p - 0.5) * step for p in steps))
    last_x, last_y = points[-1]
    title = ", ".join(seconds(v) for v in values)
    return Markup(
        f'<svg class="spark" width="{SPARK_W}" height="{SPARK_H}" role="img" '
        f'viewBox="0 0 {SPARK_W} {SPARK_H}"><title>{title}</title>'
        f'<polyline points="{line}" fill="none" stroke="#2563eb" stroke-width="1.5"/>'
        f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="2" fill="#2563eb"/>{dots}{cuts}</svg>')


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(seconds=seconds, figure=figure)
    env.globals.update(sparkline=sparkline)
    return env


def render(template: str, **context: Any) -> str:
    """The page `template` (a file of scripts/templates/) filled with `context`."""
    return environment().get_template(template).render(**context)
