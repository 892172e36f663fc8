"""One table for every benchmark: our figure, the anchor's measured in the same run, the
ratio and the goal. Figures are medians over repetitions with their spread (min–max)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """Repeated measurements of one figure."""

    values: tuple[float, ...]
    unit: str

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def show(self) -> str:
        scale, unit = _scale(self.median, self.unit)
        med = self.median * scale
        if len(self.values) == 1:
            return f"{med:.3g} {unit}"
        lo, hi = min(self.values) * scale, max(self.values) * scale
        return f"{med:.3g} {unit} ({lo:.3g}–{hi:.3g}, n={len(self.values)})"


def sample(values: Sequence[float], unit: str) -> Sample:
    return Sample(tuple(values), unit)


def _scale(value: float, unit: str) -> tuple[float, str]:
    if unit == "s" and value < 1:
        return 1000.0, "ms"
    if unit == "B":
        return 1 / 2**20, "MiB"
    return 1.0, unit


@dataclass(frozen=True)
class Row:
    figure: str
    ours: Sample
    anchor: Sample | None = None
    anchor_name: str = ""
    goal: str = ""
    max_ratio: float | None = None
    max_value: float | None = None
    """The goal as a number: the largest ratio to the anchor, or the largest median (in
    the sample's unit); the row says `met` or `MISSED` against it."""

    @property
    def met(self) -> bool | None:
        if self.max_ratio is not None and self.ratio is not None:
            return self.ratio <= self.max_ratio
        if self.max_value is not None:
            return self.ours.median <= self.max_value
        return None

    @property
    def ratio(self) -> float | None:
        if self.anchor is None or not self.anchor.median:
            return None
        return self.ours.median / self.anchor.median


def print_table(rows: Sequence[Row]) -> None:
    header = ("figure", "ours", "anchor", "ratio", "goal", "")
    lines = [header]
    for r in rows:
        anchor = f"{r.anchor_name}: {r.anchor.show()}" if r.anchor else "-"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        verdict = {True: "met", False: "MISSED", None: ""}[r.met]
        lines.append((r.figure, r.ours.show(), anchor, ratio, r.goal, verdict))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
