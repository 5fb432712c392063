"""The import graph of the whole tree: every import placed, each package importing only the layers
below it, no two project modules needing each other, and the Ray router free of torch.

The tree is walked, not listed: every `.py` file under a top-level folder of the repository is a
module of a top-level package (a folder without `__init__.py` is a namespace package), and each
top-level package must have a row in LAYERS, so a new package cannot slip past these checks.
Every import counts, at module level, inside a function or under TYPE_CHECKING; relative imports
are resolved against the importing module's package. Each imported name is placed as

- a project module: `import a.b` and the `a.b` of `from a.b import c` must be modules (files or
  folders) of the tree, `c` a submodule or a name in `a.b`; the edge goes to the module imported;
- the standard library (`sys.stdlib_module_names`);
- a third-party distribution declared in pyproject.toml, under its import name (IMPORT_NAMES maps
  the distributions whose import name differs from their own); serving code may use only the
  run-time dependencies and the optional extras other than `dev`;

and an import that is none of these fails the test (a typo, an undeclared dependency, a stale path
after a move). Imports through `importlib.import_module` with a computed name are not seen.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SERVING = ("capacity", "memory", "scheduler", "model", "engine", "api")
# What each top-level package may import of the project besides itself (lower never imports higher):
# capacity (standard library only) < memory < scheduler < engine < api, and model < engine; the
# benchmarks and training sit on top of the serving packages, side by side (neither imports the
# other: what both read, the evaluation texts, is a package of its own), and nothing imports tests.
LAYERS: dict[str, frozenset[str]] = {
    "capacity": frozenset(),
    "evaluation": frozenset(),
    "memory": frozenset({"capacity"}),
    "scheduler": frozenset({"capacity", "memory"}),
    "model": frozenset({"capacity"}),
    "engine": frozenset({"capacity", "memory", "scheduler", "model"}),
    "api": frozenset({"capacity", "memory", "scheduler", "model", "engine"}),
    "deploy": frozenset(SERVING),
    "benchmarks": frozenset({*SERVING, "evaluation"}),
    "training": frozenset({*SERVING, "evaluation"}),
    "tests": frozenset({*SERVING, "evaluation", "benchmarks", "training"}),
}
# Which declared third-party distributions each package may import: none, the run-time ones
# (`dependencies` and every optional extra but `dev`), or all of them (`dev` too).
NONE, RUNTIME, ALL = "none", "runtime", "all"
THIRD_PARTY = {"capacity": NONE, "evaluation": NONE, "memory": RUNTIME, "scheduler": RUNTIME, "model": RUNTIME,
               "engine": RUNTIME, "api": RUNTIME, "deploy": RUNTIME, "benchmarks": ALL, "training": ALL, "tests": ALL}
DEV_EXTRA = "dev"
# Distributions imported under another name (normalized distribution name → import names); () for
# tools that are never imported.
IMPORT_NAMES: dict[str, tuple[str, ...]] = {
    "pyyaml": ("yaml",),
    "piper-tts": ("piper",),
    "deepgram-sdk": ("deepgram",),
    "pipecat-ai": ("pipecat",),
    "py-spy": (),  # a profiler run as a command (benchmarks/profile.sh)
    "pytest-timeout": (),  # a pytest plugin, loaded by pytest itself
}
# Folders of the repository that hold no project code.
NOT_PACKAGES = {"build", "dist", "node_modules", "__pycache__"}
# The modules that define a Ray Serve request router: the Serve proxy imports them to route, and must
# not load torch for it.
ROUTER_IMPORT = "ray.serve.request_router"


# ---------------------------------------------------------------------------------------------------
# The analysis: pure functions of a tree of files and the declared dependencies.


@dataclass(frozen=True)
class Import:
    """One imported name of one module: `name` absolute and dotted; `attribute` for the `c` of
    `from a.b import c` (a submodule or a name defined in a.b)."""

    module: str
    line: int
    name: str
    attribute: str | None = None


@dataclass
class Analysis:
    packages: dict[str, Path]  # top-level package → its folder
    modules: dict[str, Path]  # dotted module → file (or folder, for a namespace package)
    imports: dict[str, list[Import]]
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # module → project module → line
    externals: dict[str, dict[str, int]] = field(default_factory=dict)  # module → third-party top name → line
    unplaced: list[str] = field(default_factory=list)
    undeclared_for_layer: list[str] = field(default_factory=list)


def normalize(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"cannot read the distribution of requirement {requirement!r}"
    return normalize(match.group(1))


def import_names(distribution: str) -> tuple[str, ...]:
    return IMPORT_NAMES.get(distribution, (distribution.replace("-", "_"),))


def declared_imports(pyproject: dict) -> dict[str, set[str]]:
    """RUNTIME and ALL → the top-level import names of the distributions pyproject.toml declares."""
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {})
    runtime = [*project.get("dependencies", []), *(r for name, reqs in extras.items() if name != DEV_EXTRA
                                                    for r in reqs)]
    every = [*runtime, *extras.get(DEV_EXTRA, [])]

    def names(requirements: list[str]) -> set[str]:
        return {name for r in requirements for name in import_names(requirement_name(r))}

    return {NONE: set(), RUNTIME: names(runtime), ALL: names(every)}


def declared_distributions(pyproject: dict) -> set[str]:
    project = pyproject["project"]
    requirements = [*project.get("dependencies", []),
                    *(r for reqs in project.get("optional-dependencies", {}).values() for r in reqs)]
    return {requirement_name(r) for r in requirements}


def find_modules(root: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """(top-level packages, modules) of every `.py` file below the top-level folders of `root`."""
    packages, modules = {}, {}
    for top in sorted(root.iterdir()):
        if not top.is_dir() or top.name.startswith(".") or top.name in NOT_PACKAGES or top.name.endswith(".egg-info"):
            continue
        for folder, subfolders, files in os.walk(top):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in NOT_PACKAGES)
            parts = Path(folder).relative_to(root).parts
            python = sorted(f for f in files if f.endswith(".py"))
            if not python:
                continue
            packages[top.name] = top
            for depth in range(1, len(parts) + 1):  # the folder and those above it are packages
                modules.setdefault(".".join(parts[:depth]), root.joinpath(*parts[:depth]))
            for name in python:
                dotted = ".".join(parts) if name == "__init__.py" else ".".join((*parts, name[:-3]))
                modules[dotted] = Path(folder) / name
    return packages, modules


def parse_imports(module: str, path: Path) -> tuple[list[Import], list[str]]:
    """Every import of the file, anywhere in it, relative ones made absolute; and the errors."""
    if path.is_dir():
        return [], []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found, errors = [], []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                if node.level - 1 >= len(anchor):
                    errors.append(f"{module}:{node.lineno}: relative import beyond the top-level package")
                    continue
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [Import(module, node.lineno, base, None if alias.name == "*" else alias.name)
                      for alias in node.names]
    return found, errors


def top_package(module: str) -> str:
    return module.partition(".")[0]


def analyse(root: Path, pyproject: dict) -> Analysis:
    packages, modules = find_modules(root)
    allowed = declared_imports(pyproject)
    analysis = Analysis(packages, modules, {})
    for module, path in modules.items():
        imports, errors = parse_imports(module, path)
        analysis.imports[module] = imports
        analysis.unplaced += errors
        edges = analysis.edges.setdefault(module, {})
        externals = analysis.externals.setdefault(module, {})
        for imp in imports:
            where = f"{module}:{imp.line}"
            top = top_package(imp.name)
            if top in packages:
                if imp.name not in modules:
                    analysis.unplaced.append(f"{where}: {imp.name}: no such module in the tree")
                    continue
                target = f"{imp.name}.{imp.attribute}" if f"{imp.name}.{imp.attribute}" in modules else imp.name
                if target != module:
                    edges.setdefault(target, imp.line)
            elif top in sys.stdlib_module_names:
                continue
            elif top in allowed[ALL]:
                externals.setdefault(top, imp.line)
                policy = THIRD_PARTY.get(top_package(module), NONE)
                if top not in allowed[policy]:
                    need = "nothing outside the standard library" if policy == NONE else "run-time dependencies only"
                    analysis.undeclared_for_layer.append(f"{where}: {imp.name} ({top_package(module)} may use {need})")
            else:
                analysis.unplaced.append(f"{where}: {imp.name}: neither the standard library, a package of this "
                                         "repository nor a dependency declared in pyproject.toml")
    # One line per import statement and name (`from a import b, c` of a third-party a is one line).
    analysis.unplaced = list(dict.fromkeys(analysis.unplaced))
    analysis.undeclared_for_layer = list(dict.fromkeys(analysis.undeclared_for_layer))
    return analysis


def layer_violations(analysis: Analysis) -> list[str]:
    strays = []
    for module, targets in analysis.edges.items():
        package = top_package(module)
        for target, line in targets.items():
            imported = top_package(target)
            if imported != package and imported not in LAYERS.get(package, frozenset()):
                strays.append(f"{module}:{line} imports {target} ({package} may import "
                              f"{', '.join(sorted(LAYERS.get(package, ()))) or 'no other package'})")
    return sorted(strays)


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (a path that ends where it starts) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in edges.get(node, ()):
                    groups.append(sorted(group))
    return [cycle_through(group, edges) for group in groups]


def cycle_through(group: list[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """The shortest path from the group's first module back to itself, inside the group."""
    members, start = set(group), group[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {group}")


def loaded_with(module: str, modules: dict[str, Path]) -> list[str]:
    """What importing `module` runs besides it: its enclosing packages' __init__ files."""
    parts = module.split(".")
    return [".".join(parts[:depth]) for depth in range(1, len(parts)) if ".".join(parts[:depth]) in modules]


def path_to_external(analysis: Analysis, start: str, external: str) -> list[str] | None:
    """The chain of project modules from `start` to one that imports the third-party `external`,
    through every import (lazy ones too) and the packages each import runs; None if there is none."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            if external in analysis.externals.get(node, {}):
                chain = [node]
                while previous[chain[-1]] is not None:
                    chain.append(previous[chain[-1]])
                return [*reversed(chain), external]
            for child in [*loaded_with(node, analysis.modules), *sorted(analysis.edges.get(node, ()))]:
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return None


def routers(analysis: Analysis) -> list[str]:
    return sorted(module for module, imports in analysis.imports.items()
                  if any(f"{imp.name}.{imp.attribute}".startswith(ROUTER_IMPORT) or imp.name.startswith(ROUTER_IMPORT)
                         for imp in imports))


# ---------------------------------------------------------------------------------------------------
# The checks on this repository.

tomllib = pytest.importorskip("tomllib")


@functools.cache
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@functools.cache
def repository() -> Analysis:
    return analyse(REPO, pyproject())


def test_every_top_level_package_has_a_layer():
    unknown = sorted(set(repository().packages) - set(LAYERS))
    assert not unknown, f"top-level packages without a row in LAYERS and THIRD_PARTY: {unknown}"
    assert set(THIRD_PARTY) == set(LAYERS)


def test_every_import_is_placed():
    """The standard library, a module of this tree, or a declared dependency: nothing else."""
    assert not repository().unplaced, "\n".join(repository().unplaced)


def test_serving_code_imports_only_run_time_dependencies():
    assert not repository().undeclared_for_layer, "\n".join(repository().undeclared_for_layer)


def test_each_package_imports_only_the_layers_below_it():
    strays = layer_violations(repository())
    assert not strays, "\n".join(strays)


def test_no_import_cycles():
    found = cycles(repository().edges)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


@pytest.mark.parametrize("package", ["capacity", "evaluation"])
def test_bottom_packages_import_only_the_standard_library(package):
    analysis = repository()
    if package not in analysis.packages:
        pytest.skip(f"no {package}/ package in this tree")
    strays = sorted({f"{imp.module}:{imp.line}: {imp.name}" for module, imports in analysis.imports.items()
                    if top_package(module) == package for imp in imports
                    if top_package(imp.name) not in (sys.stdlib_module_names | {package})})
    assert not strays, "\n".join(strays)


def test_ray_router_never_loads_torch():
    """The Serve proxy imports the router module: through no chain of project imports may it load torch."""
    analysis = repository()
    found = routers(analysis)
    assert found, f"no module imports {ROUTER_IMPORT}: where did the Ray router go?"
    chains = [" -> ".join(chain) for router in found if (chain := path_to_external(analysis, router, "torch"))]
    assert not chains, "\n".join(chains)


def test_import_names_map_declared_distributions():
    """IMPORT_NAMES stays honest: each entry names a distribution pyproject.toml declares."""
    assert set(IMPORT_NAMES) <= declared_distributions(pyproject())


# ---------------------------------------------------------------------------------------------------
# The checker itself fails on a tree that breaks each rule.

SYNTHETIC_PYPROJECT = {"project": {"dependencies": ["torch>=2", "PyYAML>=6", "ray[serve]>=2"],
                                   "optional-dependencies": {"dev": ["pytest>=8"]}}}
SYNTHETIC_TREE = {
    "capacity/__init__.py": "",
    "capacity/cost.py": "import math\n\ndef f():\n    import torch\n",
    "memory/__init__.py": "",
    "memory/blocks.py": "from scheduler import queue\n",
    "scheduler/__init__.py": "",
    "scheduler/queue.py": "from . import policy\n",
    "scheduler/policy.py": "from .queue import thing\nimport leftpad\nimport pytest\n",
    "model/__init__.py": "",
    "model/heavy.py": "import torch\n",
    "engine/__init__.py": "",
    "engine/core.py": "from benchmarks.load import main\nfrom scheduler.gone import x\n",
    "api/__init__.py": "",
    "api/scale/__init__.py": "",
    "api/scale/router.py": "from ray.serve.request_router import RequestRouter\nfrom ..helpers import h\n",
    "api/helpers.py": "def h():\n    from model.heavy import x\n",
    "benchmarks/__init__.py": "",
    "benchmarks/load.py": "import yaml\nfrom training import t\n",
    "training/__init__.py": "",
    "extras/thing.py": "from ... import nothing\n",
}


@pytest.fixture()
def synthetic(tmp_path: Path) -> Analysis:
    for name, text in SYNTHETIC_TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return analyse(tmp_path, SYNTHETIC_PYPROJECT)


def test_checker_finds_every_planted_violation(synthetic: Analysis):
    assert "extras" in set(synthetic.packages) - set(LAYERS)
    unplaced = "\n".join(synthetic.unplaced)
    assert "scheduler.policy:2: leftpad" in unplaced
    assert "engine.core:2: scheduler.gone: no such module in the tree" in unplaced
    assert "extras.thing:1: relative import beyond the top-level package" in unplaced
    layered = "\n".join(synthetic.undeclared_for_layer)
    assert "scheduler.policy:3: pytest (scheduler may use run-time dependencies only)" in layered
    assert "capacity.cost:4: torch (capacity may use nothing outside the standard library)" in layered
    strays = "\n".join(layer_violations(synthetic))
    assert "memory.blocks:1 imports scheduler.queue" in strays
    assert "engine.core:1 imports benchmarks.load" in strays
    assert "benchmarks.load:2 imports training" in strays
    assert "api.helpers:2 imports model.heavy" not in strays  # api may import model
    assert cycles(synthetic.edges) == [["scheduler.policy", "scheduler.queue", "scheduler.policy"]]
    assert routers(synthetic) == ["api.scale.router"]
    assert path_to_external(synthetic, "api.scale.router", "torch") == [
        "api.scale.router", "api.helpers", "model.heavy", "torch"]
    assert path_to_external(synthetic, "memory.blocks", "yaml") is None


def test_cycles_reports_each_loop_once():
    edges = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"e": 1}, "f": {"a": 1}}
    assert cycles(edges) == [["a", "b", "c", "a"], ["e", "e"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_distribution_names_map_to_import_names():
    declared = declared_imports(SYNTHETIC_PYPROJECT)
    assert declared[RUNTIME] == {"torch", "yaml", "ray"}
    assert declared[ALL] == declared[RUNTIME] | {"pytest"}
    assert declared[NONE] == set()
