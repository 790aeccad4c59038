"""The parts of docs/ that show what the code prints, rendered by that code.

A page marks each such part

    <!-- generated: NAME (scripts/doc_figures.py) -->
    ...
    <!-- end generated -->

and `render_page` replaces what lies between the markers with FRAGMENTS[NAME]. scripts/doc_figures.py
--write rewrites the pages; tests/test_doc_figures.py renders them from the plans its session
already has and fails on any difference, so a change of the code that moves a figure fails the
tests until the page is regenerated.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components.config.sibling_stacks import STACKS_DIR, platform_stacks
from components.config.stack import ENVIRONMENTS
from components.facts.cost_model import plan_cost
from offline.generated_files import RenderError
from offline.job_goodput import goodput_lines
from offline.plan import ROOT, Plan, all_stacks, cost_line, planned_config, summary, synthesize, write_plan
from offline.plan_diff import BOOTSTRAP_DIR, TreePlans, build_report, commit_label, load_cost_model
from offline.pool_summary import pool_lines

MARKER = re.compile(r"(?P<open><!-- generated: (?P<name>[\w-]+) [^>]*-->\n)(?P<body>.*?)(?P<close><!-- end generated -->)",
                    re.S)

# The change docs/delivery.md shows as its sample pull-request comment: dev's spot GPU pool may grow
# from 4 to 6 nodes. The commit ids are made up (a real comment names the pull request's).
EXAMPLE_STACK = "dev"
EXAMPLE_POOL_SIZE = ("size: {min: 0, desired: 0, max: 4}", "size: {min: 0, desired: 0, max: 6}")
EXAMPLE_BASE_COMMIT = "a379639da0e2" + "0" * 28
EXAMPLE_HEAD_COMMIT = "83f081a82245" + "0" * 28


class DocFigureError(RenderError):
    """A page names a fragment that does not exist, or the example change no longer applies."""


PlanOf = Callable[[str], Plan]
"""stack -> its plan as the stack file has it (the tests pass their session's cached plans)."""


@dataclass(frozen=True)
class Fragment:
    render: Callable[[PlanOf], str]
    stacks: tuple[str, ...]
    """The stacks whose plans it reads (scripts/doc_figures.py plans them once)."""


def plan_summary(stack: str) -> Callable[[PlanOf], str]:
    """The first and the last line `make plan STACK=<stack>` prints (the per-component lines between them left out)."""
    def render(plan_of: PlanOf) -> str:
        plan = plan_of(stack)
        first = summary(plan, Path("build") / stack).splitlines()[0]
        return f"```\n{first}\n  {plan_cost(plan.resources).summary_line()}\n```\n"
    return render


def example_head_plan(stack_file_text: str, scratch: Path) -> Plan:
    """The example stack planned with the example change applied to its stack file."""
    old, new = EXAMPLE_POOL_SIZE
    if stack_file_text.count(old) != 1:
        raise DocFigureError(f"stacks/Pulumi.{EXAMPLE_STACK}.yaml no longer has one `{old}`: "
                             "choose another example change in offline/doc_figures.py")
    changed = scratch / f"Pulumi.{EXAMPLE_STACK}.yaml"
    changed.write_text(stack_file_text.replace(old, new))
    return synthesize(EXAMPLE_STACK, changed)


def unchanged_stacks() -> list[str]:
    """What `scripts/plan-diff` lists as unchanged for a change to the example stack's file alone."""
    main = [s for s in all_stacks(ROOT) if s != EXAMPLE_STACK]
    return [*main, *(f"{BOOTSTRAP_DIR}/{s}" for s in all_stacks(ROOT / BOOTSTRAP_DIR))]


def example_plan_diff(plan_of: PlanOf) -> str:
    """The comment `scripts/plan-diff` writes for the example change, from the real diff code."""
    with tempfile.TemporaryDirectory(prefix="doc-figures-") as scratch_name:
        scratch = Path(scratch_name)
        stack_file = ROOT / "stacks" / f"Pulumi.{EXAMPLE_STACK}.yaml"
        head_plan = example_head_plan(stack_file.read_text(), scratch)
        write_plan(plan_of(EXAMPLE_STACK), scratch / "base" / EXAMPLE_STACK)
        write_plan(head_plan, scratch / "head" / EXAMPLE_STACK)
        # A stack the change does not touch plans the same on both sides: its diff is empty
        # whatever its plan holds, so one empty plan stands in for each (no need to plan them here).
        same = scratch / "unchanged"
        same.mkdir()
        (same / "resources.json").write_text("[]\n")
        others = dict.fromkeys(unchanged_stacks(), same)
        base = TreePlans(stacks={EXAMPLE_STACK: scratch / "base" / EXAMPLE_STACK, **others}, failures={})
        head = TreePlans(stacks={EXAMPLE_STACK: scratch / "head" / EXAMPLE_STACK, **others}, failures={})
        report = build_report(commit_label(EXAMPLE_BASE_COMMIT, EXAMPLE_BASE_COMMIT), commit_label(EXAMPLE_HEAD_COMMIT, "HEAD"),
                              base, head, load_cost_model())
    return f"```\n{report.markdown}```\n"


# --------------------------------------------------------------------------- the dashboard

DASHBOARD_STACK = "prod"
DASHBOARD_FIGURE = ROOT / "docs" / "figures" / f"dashboard-{DASHBOARD_STACK}.svg"
_COLUMN_PX, _ROW_PX, _GAP_PX = 40, 22, 4
_KIND_FILL = {"metric": "#eef4fb", "text": "#f6f6f6", "alarm": "#fdf0ee"}


def planned_dashboard(plan: Plan) -> dict:
    """The body of the plan's one dashboard (components/observability/dashboards.py)."""
    (dashboard,) = [r for r in plan.resources if r["type"] == "aws:cloudwatch/dashboard:Dashboard"]
    return json.loads(dashboard["inputs"]["dashboardBody"])


def widget_title(widget: dict) -> str:
    properties = widget["properties"]
    if widget["type"] == "text":
        return properties["markdown"].splitlines()[0].lstrip("# ")
    return properties.get("title", widget["type"])


def dashboard_svg(plan_of: PlanOf) -> str:
    """The planned dashboard's layout: each widget's box at its grid place, with its title."""
    widgets = planned_dashboard(plan_of(DASHBOARD_STACK))["widgets"]
    width = 24 * _COLUMN_PX
    height = max(w["y"] + w["height"] for w in widgets) * _ROW_PX
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
             f'<rect width="{width}" height="{height}" fill="#ffffff"/>']
    for w in widgets:
        x, y = w["x"] * _COLUMN_PX + _GAP_PX / 2, w["y"] * _ROW_PX + _GAP_PX / 2
        box_w, box_h = w["width"] * _COLUMN_PX - _GAP_PX, w["height"] * _ROW_PX - _GAP_PX
        lines.append(f'<rect x="{x:g}" y="{y:g}" width="{box_w:g}" height="{box_h:g}" rx="4" '
                     f'fill="{_KIND_FILL[w["type"]]}" stroke="#8a99a8"/>')
        lines.append(f'<text x="{x + 8:g}" y="{y + 18:g}">{html.escape(widget_title(w))}</text>')
        if w["type"] == "metric":  # a sketched series: it is a graph
            base, step = y + box_h - 12, (box_w - 24) / 8
            points = " ".join(f"{x + 12 + i * step:g},{base - (box_h - 44) * (0.3 + 0.5 * ((i * 7) % 5) / 5):g}"
                              for i in range(9))
            lines.append(f'<polyline points="{points}" fill="none" stroke="#3a78b5" stroke-width="1.5"/>')
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def dashboard_widgets(plan_of: PlanOf) -> str:
    """The planned dashboard's widgets, in layout order, as a Markdown list."""
    widgets = planned_dashboard(plan_of(DASHBOARD_STACK))["widgets"]
    return "".join(f"{i}. {widget_title(w)} ({w['type']})\n" for i, w in enumerate(widgets, 1))


def goodput_figures(plan_of: PlanOf) -> str:
    """What `make cost` prints about each job's goodput, for dev's spot job and prod's reserved one."""
    del plan_of  # read from the config, as `make cost` does
    lines = [line for stack in GOODPUT_STACKS for line in goodput_lines(planned_config(stack))]
    return "```\n" + "\n".join(lines) + "\n```\n"


GOODPUT_STACKS = ("dev", "prod")

# Every platform stack, in the environments' order (dev, staging, prod, then prod's further regions).
POOL_STACKS = tuple(platform_stacks(STACKS_DIR, ENVIRONMENTS))


def node_pools_figure(plan_of: PlanOf) -> str:
    """Each platform stack's region, cost line (with its idle month) and node pools, as `make plan`
    prints them (offline/pool_summary.py): instance types, capacity, node range, GPUs per node and
    the ports open between a GPU pool's nodes."""
    lines = []
    for stack in POOL_STACKS:
        plan = plan_of(stack)
        lines += [f"{stack} ({planned_config(stack).region})", f"  {cost_line(plan.resources)}",
                  *(f"  {line}" for line in pool_lines(plan.resources))]
    return "```\n" + "\n".join(lines) + "\n```\n"

FRAGMENTS: dict[str, Fragment] = {
    "plan-summary-prod": Fragment(plan_summary("prod"), ("prod",)),
    "goodput-jobs": Fragment(goodput_figures, GOODPUT_STACKS),
    "plan-diff-example": Fragment(example_plan_diff, (EXAMPLE_STACK,)),
    "dashboard-widgets-prod": Fragment(dashboard_widgets, (DASHBOARD_STACK,)),
    "node-pools": Fragment(node_pools_figure, POOL_STACKS),
}

# The pages that hold generated parts (a marker on any other page is an error of the check).
PAGES = (ROOT / "docs" / "architecture.md", ROOT / "docs" / "cost.md", ROOT / "docs" / "delivery.md",
         ROOT / "docs" / "operations.md")
# Whole files the code renders (a figure a page links to).
FIGURES: dict[Path, Fragment] = {DASHBOARD_FIGURE: Fragment(dashboard_svg, (DASHBOARD_STACK,))}


def fragment_names(text: str) -> list[str]:
    return [match["name"] for match in MARKER.finditer(text)]


def render_page(text: str, plan_of: PlanOf) -> str:
    """`text` with each generated part rendered anew."""
    unknown = sorted(set(fragment_names(text)) - set(FRAGMENTS))
    if unknown:
        raise DocFigureError(f"no such generated part: {', '.join(unknown)} (offline/doc_figures.py FRAGMENTS)")
    return MARKER.sub(lambda m: m["open"] + FRAGMENTS[m["name"]].render(plan_of) + m["close"], text)
