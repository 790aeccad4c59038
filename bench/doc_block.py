#!/usr/bin/env python3
"""docs/testing.md's table of the latest `make bench` figures, rendered from the committed JSON.

    .venv/bin/python -m bench.doc_block --write   # after copying build/bench/latest.json to docs/bench/
    .venv/bin/python -m bench.doc_block --check   # exit 1 if the page differs from the JSON

The page marks the part

    <!-- bench figures: bench/doc_block.py renders this from docs/bench/latest.json -->
    ...
    <!-- end bench figures -->

(not offline/doc_figures.py's `generated:` marker: that one renders from plans, this one from a
measurement). tests/test_plan_bench.py runs the check, so the page cannot drift from the JSON.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from offline.generated_files import RenderError, write_or_check  # noqa: E402

PAGE = ROOT / "docs" / "testing.md"
FIGURES = ROOT / "docs" / "bench" / "latest.json"
OPEN = "<!-- bench figures: bench/doc_block.py renders this from docs/bench/latest.json -->\n"
CLOSE = "<!-- end bench figures -->"
BLOCK = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.S)
SECTIONS = (("plan", "offline plan"), ("trainer", "trainer I/O"), ("recovery", "recovery on the localhost gang"))


def _ratio_cell(result: dict, by: str) -> str:
    ratios = result["ratios"].get(by)
    if not ratios:
        return "n/a"
    return (f"{ratios['paired_median']:.2f}x ({ratios['paired_min']:.2f}-{ratios['paired_max']:.2f}); "
            f"{ratios['medians']:.2f}x / {ratios['minimums']:.2f}x")


def _row(result: dict) -> str:
    goal = result["goal"]
    by = goal["by"] if goal else ("cpu" if result["ratios"].get("cpu") else "wall")
    judged = f"{goal['op']} {goal['threshold']:g} by {by}: **{result['verdict']}**" if goal else f"shown ({by})"
    return f"| {result['name']} | {result['pairs']} + {result['warmup']} | {_ratio_cell(result, by)} | {judged} |"


def render_section(name: str, title: str, section: dict) -> list[str]:
    load = section["load_average"]
    machine = section["machine"]
    goals = [r for r in section["results"] if r["goal"]]
    met = sum(r["verdict"] == "met" for r in goals)
    lines = [f"Measured {section['measured']} on the {machine['cpus']}-CPU development machine ({title}, "
             f"`{name}` in the JSON): load average {load['before'][0]:g} before, {load['after'][0]:g} after; "
             f"{met} of {len(goals)} goals met.", "",
             "| figure | pairs + warm-up | paired median (range); of medians / of minimums | goal: verdict |",
             "| --- | --- | --- | --- |"]
    lines += [_row(r) for r in section["results"]]
    extra = {k: v for k, v in section.items() if k not in ("measured", "machine", "load_average", "results")}
    if extra:
        recorded = "; ".join(f"{k} {json.dumps(v, sort_keys=True)}" for k, v in sorted(extra.items()))
        lines += ["", f"Also recorded: {recorded}."]
    return lines


def render_block(figures: dict) -> str:
    parts: list[str] = []
    for name, title in SECTIONS:
        if name in figures:
            parts += [*render_section(name, title, figures[name]), ""]
    if not parts:
        raise RenderError(f"{FIGURES.relative_to(ROOT)} has none of the sections {[n for n, _ in SECTIONS]}")
    return OPEN + "\n".join(parts) + CLOSE


def render_page(text: str, figures_path: Path = FIGURES) -> str:
    if not BLOCK.search(text):
        raise RenderError(f"no `{OPEN.strip()}` ... `{CLOSE}` part")
    try:
        figures = json.loads(figures_path.read_text())
    except (OSError, ValueError) as error:
        raise RenderError(f"{figures_path}: {error}") from error
    block = render_block(figures)
    return BLOCK.sub(lambda _match: block, text)


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, description=__doc__.splitlines()[0] if __doc__ else "", root=ROOT,
                          renders={PAGE: render_page}, source=str(FIGURES.relative_to(ROOT)),
                          command="python -m bench.doc_block")


if __name__ == "__main__":
    sys.exit(main())
