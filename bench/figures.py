"""The figures every benchmark records, and the regression check against the last recorded table.

A script calls `record(...)` for each figure it prints. Figures go to the file named by
$BENCH_FIGURES (default `.run/bench/figures.json`), keyed by goal and name, so `make bench`
collects one table from all scripts. `python bench/figures.py` compares that table with
`bench/recorded.json` (the table behind docs/performance.md) and prints each change; it never
fails on a timing. `python bench/figures.py --save` makes the new table the recorded one.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded.json"


def figures_path() -> Path:
    return Path(os.environ.get("BENCH_FIGURES", HERE.parent / ".run" / "bench" / "figures.json"))


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def record(goal: str, name: str, value: float, unit: str, *, higher_is_better: bool = True) -> None:
    """Keep one figure (a median, a ratio, a count) under `goal` (e.g. "1 drain")."""
    path = figures_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    table = _load(path)
    table[f"{goal} | {name}"] = {"value": value, "unit": unit, "higher_is_better": higher_is_better}
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


def compare(new: dict[str, dict[str, Any]], old: dict[str, dict[str, Any]]) -> list[str]:
    """One line per figure: its value, the recorded one, and the change (+ is better)."""
    lines = []
    for key in sorted(new):
        figure = new[key]
        line = f"{key:70} {figure['value']:12.4g} {figure['unit']}"
        before = old.get(key)
        if before is not None and before["value"] == 0:
            line += "   recorded 0" + ("" if figure["value"] == 0 else ", CHANGED")
        elif before is not None:
            change = (figure["value"] - before["value"]) / abs(before["value"])
            if not figure.get("higher_is_better", True):
                change = -change
            flag = "  REGRESSION?" if change < -0.2 else ""
            line += f"   recorded {before['value']:.4g}, {change:+.0%}{flag}"
        else:
            line += "   (not recorded before)"
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save", action="store_true", help="make this run's table the recorded one")
    args = parser.parse_args()
    new = _load(figures_path())
    print(f"{len(new)} figures from {figures_path()}; + is better, a drop over 20% is flagged (never fails)")
    for line in compare(new, _load(RECORDED)):
        print(line)
    if args.save:
        RECORDED.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        print(f"saved as {RECORDED}")


if __name__ == "__main__":
    main()
