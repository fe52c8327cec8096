"""Which top-level definitions of a family's Python two commits differ in, and whether they all lie on
the family's input path, for `stagelab same-code` (record.same_inputs).

A run's source hash covers the family's Python byte for byte (core.sources), so an edit that only
speeds up how a check's inputs are made (e104305 kept sdpa's last draw for the next dtype) makes every
run stale. Such an edit can still be shown harmless: every definition it touches is one the family
names as making inputs and nothing else (FamilySettings.input_path), and those make the same inputs
for every check the parameter files hold (record.same_inputs). This module does the first half by
comparing the files' syntax trees, docstrings left out: an edit of comments, docstrings or layout
touches nothing; a new private name (a leading underscore) that no earlier code could use counts only
through the input-path definitions that use it; any other definition touched is named.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

MODULE_LEVEL = "(module level)"  # a statement that is neither a definition nor an assignment
INPUT_PATH_ATTRIBUTE = "input_path"  # core.family.FamilySettings's


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.body = _without_docstring(node.body)  # a dump needs no valid body
    return tree


def _names(statement: ast.stmt) -> list[str]:
    """The top-level names a statement defines (imports and assignments included)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)] or [MODULE_LEVEL]


def _class_parts(statement: ast.ClassDef) -> dict[str, str]:
    """A class as `Class.method` per method and `Class` for the rest (bases, attributes): a family
    that is one class (a folder's family.py) names its make_inputs as `family.MyFamily.make_inputs`."""
    methods = [s for s in statement.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # the declaration of the input path is read by same-code alone: declaring it changes no result
    rest = [s for s in statement.body if s not in methods and _names(s) != [INPUT_PATH_ATTRIBUTE]]
    shell = ast.ClassDef(statement.name, statement.bases, statement.keywords, rest or [ast.Pass()],
                         statement.decorator_list, type_params=[])
    return {statement.name: ast.dump(shell), **{f"{statement.name}.{m.name}": ast.dump(m) for m in methods}}


def definitions(source: bytes) -> dict[str, str]:
    """Each top-level name of a module (and each method of a top-level class, `Class.method`): the
    dump of the statements that define it (docstrings left out), in order; statements that define no
    name share MODULE_LEVEL."""
    tree = _strip_docstrings(ast.parse(source))
    found: dict[str, list[str]] = {}
    for statement in tree.body:
        parts = _class_parts(statement) if isinstance(statement, ast.ClassDef) else \
            dict.fromkeys(_names(statement), ast.dump(statement))
        for name, dump in parts.items():
            found.setdefault(name, []).append(dump)
    return {name: "\n".join(dumps) for name, dumps in found.items()}


def changed_names(before: bytes | None, after: bytes | None) -> set[str]:
    """The top-level names whose definitions differ between two versions of a module (None: absent)."""
    old, new = definitions(before or b""), definitions(after or b"")
    return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}


def _allowed(name: str, module: str, input_path: set[str], old_names: set[str]) -> bool:
    if f"{module}.{name}" in input_path:
        return True
    # new and private: no earlier code could name it, and unchanged code is as it was
    return name.startswith("_") and name != MODULE_LEVEL and name not in old_names


def outside_input_path(before: Mapping[str, bytes], after: Mapping[str, bytes], input_path: Iterable[str]) -> list[str]:
    """Of two versions of a family's Python ({relative path: bytes}), each definition an edit
    touched outside `input_path` (`module.name`, the module as its path without `.py`, `/` as `.`),
    one line per file; empty when every touched definition is on the input path."""
    declared = set(input_path)
    lines = []
    for path in sorted(before.keys() | after.keys()):
        if before.get(path) == after.get(path):
            continue
        module = path.removesuffix(".py").replace("/", ".")
        try:
            touched = changed_names(before.get(path), after.get(path))
            old_names = set(definitions(before.get(path) or b""))
        except SyntaxError as exc:
            lines.append(f"{path}: cannot be parsed ({exc.msg}, line {exc.lineno})")
            continue
        outside = sorted(n for n in touched if not _allowed(n, module, declared, old_names))
        if outside:
            lines.append(f"{path}: {', '.join(outside)} changed, not on the family's input path")
    return lines
