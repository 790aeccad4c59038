"""Documentation a newcomer can walk: every relative link (and #anchor) in the README, the
contributing guide and docs/ points at something that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from stack_configs import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "trainer" / "README.md",
         *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    in_code, found = False, set()
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(github_anchor(line.lstrip("#")))
    return found


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_readme_starts_with_the_two_commands_and_shows_a_diagram():
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```bash", 1)[1].split("```", 1)[0]
    assert "make plan STACK=dev" in first_block and "make test" in first_block
    assert "```mermaid" in text


README_LIMIT = 12_000   # characters (issue 46): details live in docs/, the README links them


def test_the_readme_stays_short():
    size = len((ROOT / "README.md").read_text())
    assert size <= README_LIMIT, \
        f"README.md has {size} characters, more than {README_LIMIT}. Fix: move the details to a docs/ page and link it"


def test_every_docs_page_is_linked_from_the_readme():
    text = (ROOT / "README.md").read_text()
    unlinked = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{page.name}" not in text]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n[ok](#title) [missing](nowhere.md) [bad anchor](#nope)\n")
    targets = relative_links(page)
    assert targets == ["#title", "nowhere.md", "#nope"]
    assert "title" in anchors(page) and "nope" not in anchors(page)


def test_the_architecture_page_names_every_component_module():
    """docs/architecture.md's "Where things are made" is where a newcomer looks for what makes
    a resource: a module missing there is a module nobody finds. (The config model's modules
    are described as one package.)"""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Where things are made"):text.index("`components/platform.py` reads as")]
    modules = {p.relative_to(ROOT / "components") for p in (ROOT / "components").glob("*/*.py")
               if p.name != "__init__.py" and p.parent.name != "config"}
    assert modules, "no modules found: the test would pass on nothing"
    missing = sorted(str(m) for m in modules if f"`{m.name}`" not in table)
    assert not missing, f"docs/architecture.md does not say where these are: {missing}"


def test_the_review_table_names_only_tests_and_files_that_exist():
    """docs/gpu-fabric-and-capacity.md's "Reference review 2" table says which test asserts each
    point: a renamed test or moved module there would leave a point's evidence pointing at nothing."""
    text = (ROOT / "docs" / "gpu-fabric-and-capacity.md").read_text()
    table = text[text.index("## Reference review 2: where each point stands"):]
    tests = set(re.findall(r"`(test_\w+)`", table))
    paths = {p for p in re.findall(r"`([\w./-]+\.(?:py|yaml))`", table) if not p.startswith("test_")}
    defined = {m for f in (ROOT / "tests").rglob("test_*.py") for m in re.findall(r"^def (test_\w+)\(", f.read_text(), re.M)}
    assert len(tests) > 20 and len(paths) > 15, "the table's names were not found: the test would pass on nothing"
    assert not tests - defined, f"tests the table names that do not exist: {sorted(tests - defined)}"
    missing = sorted(p for p in paths if not (ROOT / p).exists() and not (ROOT / "tests" / p).exists())
    assert not missing, f"files the table names that do not exist: {missing}"


# --- docs/team-stacks.md: the team moves and the team-member Role say what the code does ---------

TEAM_STACKS = ROOT / "docs" / "team-stacks.md"


def _section(page: Path, heading: str) -> str:
    return page.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_team_member_paragraph_lists_the_verbs_the_role_grants():
    """The Role's verbs for JobSets, ConfigMaps and PodDisruptionBudgets, as the doc's parentheses."""
    from components.workload.team_members import member_rules

    text = " ".join(_section(TEAM_STACKS, "A team's people").split())
    verbs = {resource: rule["verbs"] for rule in member_rules() for resource in rule["resources"]}
    assert f"JobSets ({', '.join(verbs['jobsets'])};" in text
    assert verbs["configmaps"] == verbs["poddisruptionbudgets"]
    assert f"PodDisruptionBudgets ({', '.join(verbs['configmaps'])};" in text
    assert "patch" not in verbs["jobsets"] and "update" not in verbs["configmaps"]


def test_each_team_move_names_the_guard_and_strips_the_old_field_manager():
    from offline.team_state_guard import RELEASED_TYPES

    moves = sorted({re.match(r'"([^"]+)"', step)[1] for step in RELEASED_TYPES.values()})  # type: ignore[index]
    assert len(moves) == 3
    for heading in moves:   # the guard's refusal names these sections: they exist, and say what it does
        section = _section(TEAM_STACKS, heading)
        assert "team-state guard" in section, heading
        assert "(#the-team-stacks-field-manager-after-a-move)" in section, heading
    assert "## The team stack's field manager after a move" in TEAM_STACKS.read_text()
