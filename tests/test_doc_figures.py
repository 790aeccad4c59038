"""Figures in the docs that the code produces are held to the code: the generated parts
(offline/doc_figures.py) equal what it renders from this session's plans, every dollar figure
of docs/cost.md's breakdowns is one `make cost` prints, and every benchmark figure says when and
on what machine it was measured (a test cannot measure it again)."""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal

import pytest
import test_config_fuzz
from stack_configs import ROOT

from components.config import StackConfig
from components.facts.cost_model import STATED_USAGE, plan_cost
from offline.cost import breakdown, price_table
from offline.doc_figures import FIGURES, PAGES, DocFigureError, example_head_plan, fragment_names, render_page
from offline.plan import Plan, planned_config

DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COST_DOC = ROOT / "docs" / "cost.md"


# --- generated parts --------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_generated_parts_are_what_the_code_prints(page, plan_of):
    text = page.read_text()
    assert fragment_names(text), f"{page.name} lost its generated parts (offline/doc_figures.py PAGES)"
    assert render_page(text, plan_of) == text, \
        f"{page.relative_to(ROOT)} differs from what the code prints. Fix: run scripts/doc_figures.py --write"


@pytest.mark.parametrize("figure", sorted(FIGURES), ids=lambda p: p.name)
def test_generated_figures_are_what_the_code_draws(figure, plan_of):
    assert figure.read_text() == FIGURES[figure].render(plan_of), \
        f"{figure.relative_to(ROOT)} differs from what the code draws. Fix: run scripts/doc_figures.py --write"


def test_the_dashboard_figure_draws_every_planned_widget(plan_of):
    from offline.doc_figures import DASHBOARD_FIGURE, DASHBOARD_STACK, planned_dashboard, widget_title

    svg = DASHBOARD_FIGURE.read_text()
    widgets = planned_dashboard(plan_of(DASHBOARD_STACK))["widgets"]
    assert svg.count("<text ") == len(widgets) > 10
    for widget in widgets:
        assert f">{widget_title(widget)}</text>" in svg.replace("&#x27;", "'")


def test_architecture_lists_every_platform_stacks_pools_with_their_fabric_ports():
    """docs/architecture.md shows each pool of each platform stack (types, node range, GPUs, the
    ports between its nodes) and each stack's idle month, as the plans make them."""
    from offline.doc_figures import MARKER, POOL_STACKS

    text = (ROOT / "docs" / "architecture.md").read_text()
    (body,) = [m["body"] for m in MARKER.finditer(text) if m["name"] == "node-pools"]
    stacks = re.split(r"^(\S+) \((\S+)\)$", body.strip("`\n"), flags=re.M)[1:]
    shown = {stack: (region, part) for stack, region, part in zip(stacks[::3], stacks[1::3], stacks[2::3], strict=True)}
    assert set(shown) == set(POOL_STACKS) >= {"dev", "staging", "prod", "prod-usw2", "prod-use2"}
    for stack, (region, part) in shown.items():
        config = planned_config(stack)
        assert isinstance(config, StackConfig)
        assert region == config.region and "an idle month $" in part, stack
        for pool in config.node_pools:
            (line,) = [line for line in part.splitlines() if line.split()[:2] == ["pool", pool.name]]
            assert "|".join(pool.instance_types) in line and f"{pool.min_size}-{pool.max_size} nodes" in line, line
            if pool.gpu:
                assert f"x {pool.gpus_per_node} GPUs" in line, line
                assert ("all traffic (efa-fabric)" if pool.efa else "tcp 29400 (socket-fabric)") in line, line


def test_only_the_listed_pages_have_generated_parts():
    """A marker on a page scripts/doc_figures.py does not read would never be checked."""
    marked = [p.name for p in DOC_PAGES if fragment_names(p.read_text())]
    assert sorted(marked) == sorted(p.name for p in PAGES)


def test_rendering_replaces_the_marked_part_only():
    empty = Plan(stack="prod")
    text = ("before\n<!-- generated: plan-summary-prod (scripts/doc_figures.py) -->\n```\nstack prod: 277 resources\n```\n"
            "<!-- end generated -->\nafter 277\n")
    rendered = render_page(text, lambda _stack: empty)
    assert "stack prod: 0 resources, 0 Kubernetes manifests -> build/prod\n  cost: $0.00/month fixed" in rendered
    assert rendered.startswith("before\n<!-- generated: plan-summary-prod") and rendered.endswith("<!-- end generated -->\nafter 277\n")
    assert "277 resources" not in rendered


def test_an_unknown_part_is_an_error():
    with pytest.raises(DocFigureError, match="no such generated part: nope"):
        render_page("<!-- generated: nope (x) -->\n<!-- end generated -->\n", lambda _stack: Plan(stack="x"))


def test_an_example_change_that_no_longer_applies_is_an_error(tmp_path):
    with pytest.raises(DocFigureError, match="choose another example change"):
        example_head_plan("nodePools: []\n", tmp_path)


# --- the cost breakdowns of docs/cost.md ------------------------------------------------------

def section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


def numbers(text: str) -> set[Decimal]:
    return {Decimal(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def doc_figures(text: str) -> set[Decimal]:
    """Dollar amounts and hour counts ("666 hours") a section states."""
    found = re.findall(r"\$(\d[\d,]*(?:\.\d+)?)", text) + re.findall(r"(\d[\d,]*) hours", text)
    return {Decimal(n.replace(",", "")) for n in found}


def cost_report(stack: str, plan_of, **usage: float) -> str:
    cost = plan_cost(plan_of(stack).resources, usage=dataclasses.replace(STATED_USAGE, **usage))
    return breakdown(stack, cost, planned_config(stack))


# (section start, section end, the reports whose figures it may state: stack and --*-gb volumes)
COST_SECTIONS = [
    ("## prod", "## dev", [("prod", {})]),
    ("## dev", "What dominates where", [("dev", {}), ("dev", {"efs_gb": 50})]),
    ("### What a budget sees", "### Cost-allocation tags", [("team-vision-prod", {})]),
]


@pytest.mark.parametrize(("start", "end", "reports"), COST_SECTIONS, ids=[s[0] for s in COST_SECTIONS])
def test_every_figure_of_a_cost_section_is_one_make_cost_prints(start, end, reports, plan_of):
    """The unit prices of the "how" column come from `scripts/cost.py --prices`."""
    text = section(COST_DOC.read_text(), start, end)
    stated = doc_figures(text)
    assert stated, f"no figures found in docs/cost.md {start}: the test would pass on nothing"
    printed = numbers(price_table()).union(*(numbers(cost_report(stack, plan_of, **usage)) for stack, usage in reports))
    assert not sorted(stated - printed), \
        f"docs/cost.md {start}: figures `make cost` no longer prints: {sorted(stated - printed)}; update them from its output"


def test_the_idle_node_table_is_each_pools_hourly_price_over_the_stretch(plan_of):
    text = section(COST_DOC.read_text(), "## The cost of idle GPU nodes", "A shorter time is not simply cheaper")
    pools = {(stack, p.pool.name): p.node_hourly_usd for stack in ("prod", "dev")
             for p in plan_cost(plan_of(stack).resources).pools}
    for stack, pool in (("prod", "p5-efa"), ("prod", "gpu-spot"), ("dev", "gpu-spot")):
        hourly = pools[(stack, pool)]
        assert hourly is not None
        row = next(line for line in text.splitlines() if line.startswith(f"| {stack} `{pool}`"))
        assert f"| ${hourly:,.2f} |" in row, f"docs/cost.md idle table, {stack} {pool}: ${hourly:,.2f}/node-hour"
        stretches = [f"${hourly * minutes / 60:,.2f}" for minutes in (5, 10, 20, 30)]
        if "(reserved)" in row:   # billed anyway; the prose gives what on-demand would cost
            assert ", ".join(stretches[:3]) + " and " + stretches[3] in text
        else:
            assert row.endswith(" | ".join(stretches) + " |"), row


def test_the_fuzz_example_counts_are_the_fuzz_tests():
    source = (ROOT / "tests" / "test_config_fuzz.py").read_text()
    match = re.search(r'"(\d+)" if NIGHTLY else "(\d+)"', source)
    assert match, "tests/test_config_fuzz.py no longer reads its example count this way; update this test"
    nightly, per_file = int(match[1]), int(match[2])
    total = per_file * len(test_config_fuzz.FUZZED)
    scenarios = per_file * len(test_config_fuzz.SCENARIO_FUZZED)
    readme = (ROOT / "README.md").read_text()
    assert f"`make test` ({total - scenarios} examples) and\n`make test-scenarios` ({scenarios});" in readme
    assert f"FUZZ_EXAMPLES={nightly}" in readme
    guide = (ROOT / "docs" / "configuration-errors.md").read_text()
    assert f"`make test` runs {per_file} examples per stack file ({total - scenarios} in all" in guide
    *first, last = sorted(test_config_fuzz.SCENARIO_FUZZED)
    assert f"The {scenarios} of {', '.join(first)} and {last} take" in guide
    assert f"every one of the {total} runs" in guide


# --- benchmark figures --------------------------------------------------------------------------

# A ratio (1.55x) or a duration with decimals (1.71 s, 1.7 ms): what a benchmark measures.
MEASURED_FIGURE = re.compile(r"\b\d+(?:\.\d+)?x\b|\b\d+\.\d+ ?m?s\b")
MEASURED_ON = re.compile(r"[Mm]easured\s+(?:on\s+)?\d{4}-\d{2}-\d{2},?\s+on\s+(?:the\s+|this\s+project's\s+)?\S+")
# Figures of that shape that are not measurements.
NOT_MEASURED = {
    "6x the hourly control plane price": "a price ratio (docs/upgrading-and-pins.md)",
    "2x p5.48xlarge": "two instances, in a citation (docs/verify.md)",
    "at most every 0.5 s": "an interval the launcher keeps (docs/bring-your-own-trainer.md)",
}


def unmarked_measurements(text: str) -> list[str]:
    """Paragraphs with a measured figure and no "Measured <date> on <machine>" in them or before
    them in their section."""
    unmarked = []
    for part in re.split(r"\n(?=#)", text):
        marked = False
        for paragraph in re.split(r"\n\s*\n", part):
            marked = marked or bool(MEASURED_ON.search(paragraph))
            cleaned = paragraph
            for phrase in NOT_MEASURED:
                cleaned = cleaned.replace(phrase, "")
            if MEASURED_FIGURE.search(cleaned) and not marked:
                unmarked.append(paragraph.strip()[:120])
    return unmarked


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
def test_every_benchmark_figure_says_when_and_where_it_was_measured(page):
    unmarked = unmarked_measurements(page.read_text())
    assert not unmarked, (f"{page.relative_to(ROOT)}: measured figures without 'Measured YYYY-MM-DD on <machine>' "
                          f"before them in their section: {unmarked}")


@pytest.mark.parametrize(("text", "flagged"), [
    ("## Bench\n\nA prod plan takes 1.24x the floor.\n", True),
    ("## Bench\n\nA plan takes 1.71 s.\n", True),
    ("## Bench\n\nMeasured 2026-11-30 on the 2-CPU VM:\n\nA prod plan takes 1.24x the floor.\n", False),
    ("## Bench\n\nMeasured 2026-11-30 on the VM.\n\n## Other\n\nIt takes 1.7 ms.\n", True),
    ("## Prices\n\nExtended support costs 6x the hourly control plane price.\n", False),
    ("## Pools\n\n8 x H100, a 12 TiB file system, 30 s of grace.\n", False),
])
def test_the_measurement_check_sees_an_unmarked_figure(text, flagged):
    assert bool(unmarked_measurements(text)) is flagged

