"""The import graph of components/ follows the data flow: no cycles, no import upwards; and no
other package of the product (the bootstrap, the offline plan, the go-live checks, the job command,
the policy pack, the benches, the trainer image's launcher and example trainer) has an import cycle
either.

The order is the one components/__init__.py documents; a package may import itself and the
packages to its left. Imports inside functions count too (they hide cycles, not remove them).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from stack_configs import ROOT

COMPONENTS = ROOT / "components"
LAYERS = ("facts", "config", "common", "network", "identity", "cluster", "data", "secrets", "workload",
          "observability", "platform", "team")
# Levels: packages on one level may not import each other (network and identity are siblings).
LEVEL = {"facts": 0, "config": 1, "common": 2, "network": 3, "identity": 3, "cluster": 4, "data": 5,
         "secrets": 6, "workload": 7, "observability": 8, "platform": 9, "team": 9}


# Every other package of the project whose import graph must be free of cycles: (its directory, the
# directory its modules are named from).
OTHER_PACKAGES = (("bootstrap", ROOT), ("offline", ROOT), ("verify", ROOT), ("job_command", ROOT), ("bench", ROOT),
                  ("gpu_training_policy", ROOT / "policy"), ("launcher", ROOT / "trainer"),
                  ("example_trainer", ROOT / "trainer"))


def module_name(path: Path, root: Path | None = None) -> str:
    parts = path.relative_to(root or ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package: str = "components", root: Path | None = None) -> set[str]:
    """Every `package...` module `path` imports, resolved to a module (not a name in it)."""
    root = root or ROOT
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(package))
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(package)):
            # A relative import (`from ..cluster import x`) counts like its absolute spelling.
            parent = module_name(path, root).split(".")
            if path.name != "__init__.py":
                parent = parent[:-1]
            base = ".".join(parent[:len(parent) - node.level + 1]) if node.level else ""
            module = ".".join(filter(None, (base, node.module)))
            if not module.startswith(package):
                continue
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                is_module = (root / Path(*candidate.split("."))).with_suffix(".py").exists() or \
                    (root / Path(*candidate.split(".")) / "__init__.py").exists()
                found.add(candidate if is_module else module)
    return found


def import_graph(package: str = "components", root: Path | None = None) -> dict[str, set[str]]:
    root = root or ROOT
    directory = COMPONENTS if package == "components" else root / package
    return {module_name(p, root): imported_modules(p, package, root) for p in sorted(directory.rglob("*.py"))}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "components"


def test_every_package_is_placed_in_a_layer():
    packages = {p.name for p in COMPONENTS.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    roots = {p.stem for p in COMPONENTS.glob("*.py") if p.stem != "__init__"}
    assert packages | roots == set(LAYERS)


def test_no_module_imports_a_layer_above_or_beside_it():
    upward = []
    for module, imports in import_graph().items():
        if layer(module) == "components":
            continue
        for target in imports:
            source_level, target_level = LEVEL[layer(module)], LEVEL.get(layer(target), -1)
            if layer(target) != layer(module) and target_level >= source_level:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports against the data flow (see components/__init__.py):\n" + "\n".join(upward)


def test_the_config_model_imports_only_facts():
    for module, imports in import_graph().items():
        if layer(module) == "config":
            assert {layer(t) for t in imports} <= {"config", "facts"}, module


def fail_on_a_cycle(graph: dict[str, set[str]]) -> None:
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(target):], target])
                            + " (move what both need into a third, smaller module: STYLE.md)")
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module, [module])


def test_there_is_no_import_cycle():
    fail_on_a_cycle(import_graph())


@pytest.mark.parametrize(("package", "root"), OTHER_PACKAGES)
def test_no_other_package_has_an_import_cycle(package, root):
    fail_on_a_cycle(import_graph(package, root))


def test_every_package_of_the_product_has_its_cycle_check():
    """A new package (a folder with __init__.py) is added to OTHER_PACKAGES, or this fails."""
    packages = {(folder.name, root) for root in (ROOT, ROOT / "trainer", ROOT / "policy")
                for folder in root.iterdir() if (folder / "__init__.py").exists()}
    assert packages <= {("components", ROOT), *OTHER_PACKAGES}


def _plant(root: Path, files: dict[str, str]) -> None:
    """Write each file (path relative to `root`: text), its folders first."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_cycle_check_would_see_one(tmp_path, monkeypatch):
    """The detector itself: a planted cycle through a function-level import is found."""
    _plant(tmp_path, {
        "components/facts/__init__.py": "",
        "components/facts/a.py": "from components.facts.b import thing\n",
        "components/facts/b.py": "def thing():\n    from components.facts import a\n",
    })
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "COMPONENTS", tmp_path / "components")
    with pytest.raises(pytest.fail.Exception, match="import cycle"):
        test_there_is_no_import_cycle()


def test_relative_imports_count_like_absolute_ones(tmp_path, monkeypatch):
    _plant(tmp_path, {
        "components/config/__init__.py": "from . import reader\n",
        "components/config/reader.py": "",
        "components/config/stack.py": "from ..cluster import node_pools\nfrom .reader import Section\n",
        "components/cluster/node_pools.py": "",
    })
    package = tmp_path / "components" / "config"
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert imported_modules(package / "stack.py") == {"components.cluster.node_pools", "components.config.reader"}
    assert imported_modules(package / "__init__.py") == {"components.config.reader"}
