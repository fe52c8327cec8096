"""lib/stagelab in layers: no import cycles (imports inside functions included) and imports that
only go down the layers that docs/ARCHITECTURE.md draws. Pure `ast`, no import of the lab."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "lib"
PACKAGE = LIB / "stagelab"

# Each layer and the layers it may import (its own always). Top-level modules and `cli` are the
# faces: they may import every layer. Keep in step with each layer's __init__ docstring.
MAY_IMPORT = {
    "core": set(),
    "measure": {"core"},
    "judge": {"core", "measure"},
    "record": {"core", "measure", "judge"},
    "run": {"core", "measure", "judge", "record"},
    "tune": {"core", "measure", "judge", "record"},
    "families": {"core", "measure"},
}
FACES = "faces"  # stagelab/*.py and stagelab/cli/
FLAT_MODULE_LIMIT = 8
MODULE_LINE_LIMIT = 250


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under root (a package is its __init__)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _imported(module: str, is_package: bool, node: ast.AST, known: dict[str, Path]) -> set[str]:
    """The known modules one import statement reaches."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    if node.level:
        base = module.split(".")
        base = base if is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    reached = set()
    for alias in node.names:
        submodule = f"{target}.{alias.name}"
        if submodule in known:
            reached.add(submodule)
        elif target in known:
            reached.add(target)
    return reached


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports anywhere in its body (functions included), within root."""
    known = module_names(root)
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(module, path.name == "__init__.py", node, known)
        graph[module] = edges - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in MAY_IMPORT:
        return parts[1]
    if len(parts) == 2 and parts[1] in MAY_IMPORT:
        return parts[1]  # the layer's own __init__
    return FACES


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(module)
        if layer == FACES:
            continue
        for target in sorted(targets):
            other = layer_of(target)
            if other != layer and other not in MAY_IMPORT[layer]:
                wrong.append(f"{module} ({layer}) imports {target} ({other})")
    return wrong


def test_no_import_cycles_in_lib():
    found = cycles(import_graph(LIB))
    assert not found, "import cycles in lib/: " + "; ".join(" <-> ".join(c) for c in found)


def test_imports_go_down_the_layers():
    assert not upward_imports(import_graph(LIB))


def test_every_layer_is_a_subpackage_with_a_docstring():
    for layer in MAY_IMPORT:
        init = PACKAGE / layer / "__init__.py"
        assert init.is_file(), f"layer {layer} has no package"
        if layer != "families":
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and "import" in doc, f"{init} does not say what it may import"


def test_every_subpackage_is_a_layer_or_the_cli():
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages - {"cli"} == set(MAY_IMPORT), "a new subpackage needs its place in MAY_IMPORT"


def test_the_flat_top_level_is_small():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= FLAT_MODULE_LIMIT, flat


def test_no_module_is_long():
    long = {str(p.relative_to(LIB)): n for p in LIB.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MODULE_LINE_LIMIT}
    assert not long, long


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("a_imports_b", [
    "from .b import g\n",
    "def f():\n    from . import b\n",  # deferred, inside a function
    "def f():\n    import pkg.sub.b\n",  # absolute
])
def test_a_planted_cycle_is_found(tmp_path, a_imports_b):
    b_name = "sub/b.py" if "pkg.sub.b" in a_imports_b else "b.py"
    b_text = "from ..a import f\n" if b_name.startswith("sub") else "from .a import f\n"
    root = _package(tmp_path, {"__init__.py": "", "sub/__init__.py": "", "a.py": a_imports_b, b_name: b_text})
    assert cycles(import_graph(root)) == [sorted(["pkg.a", "pkg." + b_name[:-3].replace("/", ".")])]


def test_an_acyclic_package_has_no_cycle(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "a.py": "from .b import g\n", "b.py": "import os\n"})
    assert import_graph(root)["pkg.a"] == {"pkg.b"}
    assert cycles(import_graph(root)) == []


def test_an_upward_import_is_found():
    graph = {"stagelab.core.paths": {"stagelab.record.tracking"}, "stagelab.record.tracking": set()}
    assert upward_imports(graph) == ["stagelab.core.paths (core) imports stagelab.record.tracking (record)"]


def test_the_architecture_page_names_the_layers_there_are():
    page = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`stagelab\.(\w+)`", page))
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert named == subpackages, f"named but absent: {named - subpackages}; present but unnamed: {subpackages - named}"
