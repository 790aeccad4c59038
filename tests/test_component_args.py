"""Every input of every component is documented where it is declared: each field of an `*Args`
dataclass in components/ (the config model has its own key table) has a one-line string under it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "components"


def undocumented_fields(source: str) -> list[str]:
    """`Class.field` for each field of an `*Args` class with no string literal right under it."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ClassDef) and node.name.endswith("Args")):
            continue
        for statement, following in zip(node.body, [*node.body[1:], None], strict=True):
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            documented = (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                          and isinstance(following.value.value, str) and following.value.value.strip() != "")
            if not documented:
                missing.append(f"{node.name}.{statement.target.id}")
    return missing


def component_files() -> list[Path]:
    return [p for p in sorted(COMPONENTS.rglob("*.py")) if "config" not in p.relative_to(COMPONENTS).parts]


def test_the_check_finds_a_field_without_a_doc_and_accepts_one_with():
    source = 'class PoolArgs:\n    size: int\n    """Nodes."""\n    zone: str\n\nclass Other:\n    x: int\n'
    assert undocumented_fields(source) == ["PoolArgs.zone"]


def test_every_component_args_field_is_documented():
    files = component_files()
    args_classes = [n for p in files for n in ast.walk(ast.parse(p.read_text()))
                    if isinstance(n, ast.ClassDef) and n.name.endswith("Args")]
    assert len(args_classes) > 20, "no Args classes found: the test would pass on nothing"
    missing = [f"{p.relative_to(ROOT)}: {field}" for p in files for field in undocumented_fields(p.read_text())]
    assert not missing, "document each input in one line, a string right under the field:\n" + "\n".join(missing)
