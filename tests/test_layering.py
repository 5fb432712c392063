"""The import graph of the packages: no two modules need each other, and each package imports only
the layers below it (api → engine → scheduler, memory, model; scheduler → memory), and nothing
outside tests imports training.

Every import counts, at module level, inside a function or under TYPE_CHECKING: a cycle through a
lazy or type-only import is still two modules that each need the other.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What each package may import besides itself.
MAY_IMPORT = {
    "api": {"engine", "scheduler", "memory", "model"},
    "engine": {"scheduler", "memory", "model"},
    "scheduler": {"memory"},
    "memory": set(),
    "model": set(),
}


def module_files() -> dict[str, Path]:
    modules = {}
    for package in MAY_IMPORT:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Dotted names of what `module` imports: `from a.b import c` gives a.b.c (c may be a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of these packages it imports (the longest known prefix of each name)."""
    modules = module_files()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {
        module: {target for name in imported_names(module, path) if (target := owner(name)) not in (None, module)}
        for module, path in modules.items()
    }


def test_no_two_modules_import_each_other():
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None


def test_each_package_imports_only_the_layers_below_it():
    strays = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if (package := module.split(".")[0]) != (imported := target.split(".")[0])
        and imported not in MAY_IMPORT[package]
    )
    assert not strays


def test_nothing_outside_tests_imports_training():
    """Training code (teacher data, trainers) never reaches a server or a benchmark."""
    outside = {**module_files(), **{
        ".".join(path.relative_to(REPO).with_suffix("").parts): path for path in (REPO / "benchmarks").rglob("*.py")
    }}
    strays = sorted(
        f"{module} -> {name}"
        for module, path in outside.items()
        for name in imported_names(module, path)
        if name.split(".")[0] == "training"
    )
    assert not strays
