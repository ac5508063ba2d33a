"""The layering rule, checked on the source with `ast`; the layers are the folders of src/avsim/.

Layers, lowest first; a module may import only the layers listed for it:

    folder (src/avsim/)  layer       may import
    core/                core        core (numpy, scipy, av, numba; no torch at module level)
    maps/                maps        core, maps
    scenario/            scenario    core, maps, scenario
    render/              render      core, maps, scenario, render (inside: RENDER_LAYERS below)
    evaluation/          evaluation  core, maps, scenario, render, evaluation
    edit/                edit        core, maps, scenario, render, edit
    view/                view        core, maps, scenario, render, edit, view (rerun only inside functions)
    sim/                 sim         core, maps, scenario, render, edit, sim (closed loop; gymnasium only inside functions)
    models/              models      core, models (+ torch)
    train/               train       every library layer
    jobs/                jobs        every library layer, sim, jobs (dataset-scale runs: the top layer)
    cli/                 cli         at module level core, maps, scenario, cli; the rest (view, sim, jobs too) only inside
                                     functions or through importlib (command groups mount lazily)
    devtools/            devtools    nothing from avsim (maintainer scripts)
    bench/ (repo root)   bench       every library layer and sim, never the CLI
    *.py, importers/     compat      aliases of moved modules (docs/core_api.md, "Moved names"):
                                     only their targets; no avsim module or bench script imports them

Inside render the four sub-packages are layers too, lowest first: raster < geometry < labels <
run, with `avsim.render`, `render.style` and `render.moved` below all of them and `render.cli` on
top. A folder's layer is its longest listed prefix; a Python file in a folder with no layer fails
the test, so a new folder must be given one here. Every import counts: module level, inside
functions, under `if TYPE_CHECKING`, and string names given to `importlib.import_module` /
`__import__`. No import of a renderer module by its old flat name (`avsim.render.moved`), and no
import cycle anywhere (`test_no_import_cycles`, function-level imports included). Bare top-level
names of the source folders (`import maps`) are refused: installed, those folders exist only as
`avsim.*`. The layers that `avsim info` loads (core, maps, scenario, cli) must not import torch
at module level.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# source roots -> package name: one source tree (src/avsim) plus the bench scripts
FOLDERS = {"src/avsim": "avsim", "bench": "bench"}
# package prefix -> layer; the longest matching prefix decides
PACKAGE_LAYERS = {
    "avsim": "compat",  # modules directly in avsim/ (and avsim/importers/) are aliases ...
    "avsim.core": "core",
    "avsim.maps": "maps",
    "avsim.scenario": "scenario",
    "avsim.render": "render",
    "avsim.evaluation": "evaluation",
    "avsim.edit": "edit",
    "avsim.models": "models",
    "avsim.train": "train",
    "avsim.view": "view",
    "avsim.sim": "sim",
    "avsim.jobs": "jobs",
    "avsim.cli": "cli",
    "avsim.devtools": "devtools",
    "bench": "bench",
}
ROOT_MODULE = "avsim"  # ... except the package root, which only holds the version (core)
LIBRARY = {"core", "maps", "scenario", "render", "evaluation", "edit", "models", "train"}
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "maps": {"core", "maps"},
    "scenario": {"core", "maps", "scenario"},
    "render": {"core", "maps", "scenario", "render"},
    "evaluation": {"core", "maps", "scenario", "render", "evaluation"},
    "edit": {"core", "maps", "scenario", "render", "edit"},
    "models": {"core", "models"},
    "train": LIBRARY,
    "view": {"core", "maps", "scenario", "render", "edit", "view"},
    "sim": {"core", "maps", "scenario", "render", "edit", "sim"},
    "jobs": LIBRARY | {"jobs", "sim"},
    "cli": LIBRARY | {"cli", "view", "jobs", "sim"},  # module level: CLI_EAGER only
    "devtools": {"devtools"},
    "bench": LIBRARY | {"bench", "sim"},
    "compat": {"core", "scenario"},
}
CLI_EAGER = {"core", "maps", "scenario", "cli"}
NO_TORCH_AT_IMPORT = {"core", "maps", "scenario", "cli", "devtools", "compat"}
BARE_NAMES = {"maps", "render", "evaluation", "edit", "models", "train", "view", "jobs", "sim", "core", "scenario"}


def layer_of(module: str) -> str | None:
    """Layer of an avsim (or bench) module name; None for third-party modules."""
    if module == ROOT_MODULE:
        return "core"
    matches = [p for p in PACKAGE_LAYERS if module == p or module.startswith(p + ".")]
    return PACKAGE_LAYERS[max(matches, key=len)] if matches else None


def module_name(path: Path, root: Path = REPO) -> str:
    folder = next(f for f in FOLDERS if path.is_relative_to(root / f))
    parts = [FOLDERS[folder], *path.relative_to(root / folder).parts]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass(frozen=True)
class Import:
    target: str
    line: int
    lazy: bool  # inside a function body
    via: str  # "import" or "importlib"


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([name] if name else []))


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> list[Import]:
    """Every import in `source` (module name `module`), resolved to absolute module names."""
    tree = ast.parse(source)
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_lazy = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, lazy, "import") for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = (
                    _resolve_relative(module, is_package, child.level, child.module) if child.level else child.module or ""
                )
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(sub if sub in known else base, child.lineno, lazy, "import"))
            elif isinstance(child, ast.Call) and _is_dynamic_import(child.func) and child.args:
                arg = child.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append(Import(arg.value, child.lineno, lazy, "importlib"))
            visit(child, child_lazy)

    visit(tree, False)
    return found


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in {"import_module", "__import__"}
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _is_cli_module(module: str) -> bool:
    """`cli` modules, `__main__` modules and the avsim.cli package parse options and nothing else."""
    last = module.rsplit(".", 1)[-1]
    return last in {"cli", "__main__"} or module == "avsim.cli" or module.startswith("avsim.cli.")


# inside avsim.render: sub-package -> rank; a render module imports render modules of its rank or lower
RENDER_LAYERS = {"avsim.render": 0, "avsim.render.style": 0, "avsim.render.moved": 0, "avsim.render.raster": 1,
                 "avsim.render.geometry": 2, "avsim.render.labels": 3, "avsim.render.run": 4, "avsim.render.cli": 5}  # fmt: skip


def render_rank(module: str) -> int | None:
    """The sub-layer of a module of avsim.render (None outside render)."""
    matches = [p for p in RENDER_LAYERS if module == p or module.startswith(p + ".")]
    return RENDER_LAYERS[max(matches, key=len)] if matches else None


def _moved_names() -> set[str]:
    from avsim.render.moved import MOVED

    return set(MOVED)


def _import_problem(layer: str, module: str, imp: Import) -> str | None:
    """What is wrong with one import of a module of layer `layer`; None when it is allowed."""
    if imp.target in _moved_names() or any(imp.target.startswith(m + ".") for m in _moved_names()):
        return f"imports {imp.target} by its old flat name; import {imp.target.split('.', 2)[-1]}'s new module (avsim.render.moved)"
    own, theirs = render_rank(module), render_rank(imp.target)
    if own is not None and theirs is not None and theirs > own:
        return f"(render layer {own}) imports {imp.target} (render layer {theirs}): render's sub-packages import downward only"
    top = imp.target.split(".")[0]
    if top in BARE_NAMES:
        return f"imports bare {imp.target!r}; use 'avsim.{imp.target}'"
    if top == "torch" and layer in NO_TORCH_AT_IMPORT and not imp.lazy:
        return f"imports torch at module level ({layer} layer must not)"
    target_layer = layer_of(imp.target)
    if target_layer is None:
        return None
    if target_layer == "compat" and layer != "compat":
        return f"imports the alias {imp.target}; import the module it names (docs/core_api.md)"
    if _is_cli_module(imp.target) and layer != "cli" and not _is_cli_module(module):
        return f"imports the CLI module {imp.target}; import the library entry point it calls"
    if target_layer not in ALLOWED[layer]:
        return f"({layer}) imports {imp.target} ({target_layer}); allowed: {sorted(ALLOWED[layer])}"
    if layer == "cli" and target_layer not in CLI_EAGER and not imp.lazy and imp.via == "import":
        return f"imports {imp.target} ({target_layer}) at module level; import it inside a function"
    return None


def violations_in(module: str, source: str, is_package: bool, known: set[str]) -> list[str]:
    layer = layer_of(module)
    assert layer is not None, module
    if layer == "compat" and not _is_compat_location(module):
        return [f"{module}: its folder has no layer; give it one in tests/test_layering.py"]
    out = []
    for imp in imports_of(source, module, is_package, known):
        problem = _import_problem(layer, module, imp)
        if problem:
            out.append(f"{module}:{imp.line} {problem}")
    return out


def _is_compat_location(module: str) -> bool:
    """Aliases live directly in avsim/ or in avsim/importers/, nowhere else."""
    parts = module.split(".")
    return len(parts) == 2 or (len(parts) == 3 and parts[1] == "importers") or module == "avsim.importers"


def source_files(root: Path = REPO) -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def all_violations(root: Path = REPO) -> list[str]:
    files = source_files(root)
    names = {module_name(p, root): p for p in files}
    known = set(names)
    out = []
    for name, path in names.items():
        out += violations_in(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", known)
    return out


@pytest.mark.slow
def test_repository_follows_the_layering_rule() -> None:
    assert len(source_files()) > 10
    assert any(p.parts[-2] == "bench" for p in source_files()), "bench/ is checked too"
    problems = all_violations()
    assert problems == [], "layering violations:\n" + "\n".join(problems)


# ---- the checker itself catches what it should -----------------------------------------------
KNOWN = {"avsim.maps", "avsim.maps.elements", "avsim.render", "avsim.render.raster.draw", "avsim.scenario.io", "avsim.core.errors",
         "avsim.evaluation", "avsim.edit", "avsim.models", "avsim.train", "avsim.scenario.importers", "avsim.scenario.importers.common"}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("avsim.core.rig", "from avsim.maps import HDMap", "(core) imports avsim.maps (maps)"),
        ("avsim.core.rig", "def f():\n    from avsim.render import raster", "(core) imports avsim.render"),
        ("avsim.core.rig", "import importlib\nimportlib.import_module('avsim.render.raster.draw')", "imports avsim.render.raster.draw"),
        ("avsim.core.rig", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from avsim.scenario.io import x", "imports avsim.scenario.io (scenario)"),
        ("avsim.core.rig", "from avsim import maps", "imports avsim.maps (maps)"),
        ("avsim.core.rig", "import torch", "imports torch at module level"),
        ("avsim.maps.elements", "from avsim.scenario.io import load_scenario", "(maps) imports avsim.scenario.io (scenario)"),
        ("avsim.maps.elements", "from ..render import raster", "(maps) imports avsim.render"),
        ("avsim.scenario.importers.common", "from avsim.render.raster.draw import x", "(scenario) imports avsim.render.raster.draw"),
        ("avsim.render.raster.draw", "from avsim.evaluation import fid", "(render) imports avsim.evaluation"),
        ("avsim.edit.ops", "from avsim.evaluation import let_ap", "(edit) imports avsim.evaluation"),
        ("avsim.evaluation.fid", "import avsim.edit", "(evaluation) imports avsim.edit"),
        ("avsim.models.dit", "from avsim.maps import HDMap", "(models) imports avsim.maps"),
        ("avsim.models.dit", "from avsim.scenario.io import load_scenario", "(models) imports avsim.scenario.io (scenario)"),
        ("avsim.models.dit", "from avsim.train import config", "(models) imports avsim.train"),
        ("avsim.render.raster.draw", "from avsim.cli import main", "imports the CLI module avsim.cli"),
        ("bench.render", "from avsim.render.cli import render_command", "imports the CLI module avsim.render.cli"),
        ("avsim.train.loop", "from avsim.models.cli import generate", "imports the CLI module"),
        ("avsim.render.geometry.scene", "from avsim.cameras import PinholeCamera", "imports the alias avsim.cameras"),
        ("bench.render", "from avsim.io import load_scenario", "imports the alias avsim.io"),
        ("avsim.devtools.sizes", "from avsim.core import errors", "(devtools) imports avsim.core"),
        ("avsim.cli.scenario", "from avsim.render import frame", "at module level; import it inside a function"),
        ("avsim.cli.scenario", "import torch", "imports torch at module level"),
        ("avsim.io", "from avsim.render.geometry.scene import x", "(compat) imports avsim.render.geometry.scene"),
        ("avsim.newfolder.x", "import numpy", "its folder has no layer"),
        ("avsim.cli", "from avsim.render import cli", "at module level; import it inside a function"),
        ("avsim.render.raster.draw", "import maps", "bare 'maps'"),
        ("avsim.render.raster.draw", "from avsim.render.geometry.scene import SceneRenderer", "render's sub-packages import downward only"),
        ("avsim.render.labels.boxes", "def f():\n    from avsim.render.run import pool", "render's sub-packages import downward only"),
        ("avsim.render.run.runner", "from avsim.render.frame import SceneRenderer", "by its old flat name"),
        ("avsim.edit.ops", "from avsim.render.runner import run_render", "by its old flat name"),
    ],
)
def test_checker_flags(module: str, source: str, expected: str) -> None:
    problems = violations_in(module, source, False, KNOWN)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("avsim.scenario.io", "from avsim.maps import HDMap"),
        ("avsim.scenario.sample.roads", "from avsim.maps import HDMap"),
        ("avsim.scenario.importers.common", "from avsim.maps.elements import Polylines"),
        ("avsim.maps.elements", "from avsim.core.agents import box_corners"),
        ("avsim.render.raster.draw", "from avsim.scenario.io import load_scenario\nfrom avsim.maps import HDMap"),
        ("avsim.edit.ops", "from avsim.render import raster"),
        ("avsim.models.dit", "import torch\nfrom avsim.core.errors import AvsimValueError"),
        ("avsim.train.loop", "from avsim.models import dit\nfrom avsim.evaluation import fid\nfrom avsim.scenario.io import x"),
        ("avsim.cli", "import importlib\nfrom avsim.core.errors import AvsimError\ndef f():\n    from avsim.train import cli"),
        ("avsim.core.rig", "def f():\n    import torch"),
        ("avsim.cli.scenario", "from avsim.scenario.io import load_scenario\ndef f():\n    from avsim.render import runner"),
        ("avsim.render.cli", "from avsim.render.run.runner import run_render"),
        ("bench.render", "from avsim.render.run.runner import run_render\nfrom avsim.models import dit"),
        ("avsim.io", "from avsim.scenario.io import *"),
        ("avsim.importers.registry", "from avsim.scenario.importers.registry import *"),
    ],
)
def test_checker_allows(module: str, source: str) -> None:
    assert violations_in(module, source, False, KNOWN) == []


def test_relative_imports_resolve() -> None:
    imps = imports_of("from . import elements\nfrom ..io import x", "avsim.maps.queries", False, KNOWN)
    assert [i.target for i in imps] == ["avsim.maps.elements", "avsim.io"]


def test_one_source_tree() -> None:
    """Every package is found below src/ (no top-level package folder can shadow or mix in)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["where"] == ["src"]
    assert "package-dir" not in setuptools
    stray = sorted(p.name for p in REPO.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert stray == [], f"package folders outside src/: {stray}"


def test_installed_avsim_is_this_tree() -> None:
    """Run from another directory, `avsim` and its subpackages all come from this src/ tree."""
    code = "import avsim, avsim.render, avsim.core; print(avsim.__file__); print(avsim.render.__file__); print(avsim.core.__file__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO / "tests", timeout=360)
    assert result.returncode == 0, result.stderr
    source = (REPO / "src" / "avsim").resolve()
    for line in result.stdout.split():
        assert Path(line).resolve().is_relative_to(source), line


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the avsim modules it imports (every import, function-level and TYPE_CHECKING ones included)."""
    files = source_files(root)
    names = {module_name(p, root): p for p in files}
    known = set(names)
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets = set()
        for imp in imports_of(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", known):
            t = imp.target
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                targets.add(t)
        graph[name] = targets
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def test_no_import_cycles() -> None:
    cycles = strongly_connected(import_graph())
    assert cycles == [], "import cycles (function-level and TYPE_CHECKING imports count):\n" + "\n".join(map(str, cycles))


def test_cycle_finder_finds_a_lazy_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


# ---- and at run time ---------------------------------------------------------------------------
@pytest.mark.subprocess
def test_core_commands_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from avsim.cli import build_app\n"
        "build_app(['info', 'x'])\n"
        "import avsim.scenario.io, avsim.maps\n"
        "heavy = sorted(m for m in ('torch', 'avsim.render', 'avsim.models', 'avsim.train') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=360)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
