"""Every import in lib/stagelab names a module that exists, the ones inside functions included:
a lazy import of a module that moved (issue 14's layers) fails only when its function runs, as
explore.try_variants did in an acceptance run's exploration cell."""

import ast
import importlib.util
from pathlib import Path

import stagelab

PACKAGE_ROOT = Path(stagelab.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path):
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            yield node.lineno, f"{base}.{node.module}" if node.module else base
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stagelab"):
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("stagelab"):
                    yield node.lineno, alias.name


def test_every_stagelab_import_resolves():
    missing = [f"{path.relative_to(PACKAGE_ROOT.parent)}:{line}: {name}"
               for path in sorted(PACKAGE_ROOT.rglob("*.py"))
               for line, name in _imported_modules(path)
               if importlib.util.find_spec(name) is None]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)
