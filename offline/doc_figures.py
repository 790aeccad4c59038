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

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components.facts.cost_model import plan_cost
from offline.generated_files import RenderError
from offline.plan import ROOT, Plan, all_stacks, summary, synthesize, write_plan
from offline.plan_diff import BOOTSTRAP_DIR, TreePlans, build_report, commit_label, load_cost_model

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


FRAGMENTS: dict[str, Fragment] = {
    "plan-summary-prod": Fragment(plan_summary("prod"), ("prod",)),
    "plan-diff-example": Fragment(example_plan_diff, (EXAMPLE_STACK,)),
}

# The pages that hold generated parts (a marker on any other page is an error of the check).
PAGES = (ROOT / "docs" / "cost.md", ROOT / "docs" / "delivery.md")


def fragment_names(text: str) -> list[str]:
    return [match["name"] for match in MARKER.finditer(text)]


def render_page(text: str, plan_of: PlanOf) -> str:
    """`text` with each generated part rendered anew."""
    unknown = sorted(set(fragment_names(text)) - set(FRAGMENTS))
    if unknown:
        raise DocFigureError(f"no such generated part: {', '.join(unknown)} (offline/doc_figures.py FRAGMENTS)")
    return MARKER.sub(lambda m: m["open"] + FRAGMENTS[m["name"]].render(plan_of) + m["close"], text)
