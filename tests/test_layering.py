"""The layering rule (docs/format.md, "Layering"), checked on the source with `ast`.

Layers, lowest first; a module may import only its own layer and the layers listed for it:

    core      avsim/*.py (types, transforms, cameras, rig, trajectory, agents, lights,
              scenario, errors, atomic, video)           -> core
    maps      maps/ (avsim.maps)                         -> core, maps
    scenario  avsim.io, avsim.sample (+ its avsim.sample_*
              helpers), avsim.core_cli, avsim/importers/
              (they build HD maps)                       -> core, maps, scenario
    render    render/                                    -> core, maps, scenario, render
    evaluation, edit  (siblings, not each other)         -> core, maps, scenario, render, self
    models    models/                                    -> core, models (+ torch)
    train     train/                                     -> everything but avsim.cli
    cli       avsim/cli.py: at module level only core; anything inside functions or through
              importlib (it mounts the other packages' `cli.py` lazily).

Every import counts: module level, inside functions, under `if TYPE_CHECKING`, and string
names given to `importlib.import_module` / `__import__`. Bare top-level names of the source
folders (`import maps`) are refused: installed, those folders exist only as `avsim.*`. Layers
below render must not import torch at module level, so `avsim info` stays light.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# source folder -> package name (see pyproject's package-dir)
FOLDERS = {
    "avsim": "avsim",
    "maps": "avsim.maps",
    "render": "avsim.render",
    "evaluation": "avsim.evaluation",
    "edit": "avsim.edit",
    "models": "avsim.models",
    "train": "avsim.train",
}
SCENARIO_MODULES = ("avsim.io", "avsim.sample", "avsim.core_cli")
SCENARIO_PACKAGES = ("avsim.importers",)
SCENARIO_PREFIXES = ("avsim.sample_",)  # the sample generator's helper modules
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "maps": {"core", "maps"},
    "scenario": {"core", "maps", "scenario"},
    "render": {"core", "maps", "scenario", "render"},
    "evaluation": {"core", "maps", "scenario", "render", "evaluation"},
    "edit": {"core", "maps", "scenario", "render", "edit"},
    "models": {"core", "models"},
    "train": {"core", "maps", "scenario", "render", "evaluation", "edit", "models", "train"},
    "cli": {"core", "maps", "scenario", "render", "evaluation", "edit", "models", "train"},  # lazily only
}
NO_TORCH_AT_IMPORT = {"core", "maps", "scenario", "cli"}
BARE_NAMES = set(FOLDERS) - {"avsim"}


def layer_of(module: str) -> str | None:
    """Layer of an avsim module name; None for third-party modules."""
    if module == "avsim.cli":
        return "cli"
    if (
        module in SCENARIO_MODULES
        or any(module == p or module.startswith(p + ".") for p in SCENARIO_PACKAGES)
        or module.startswith(SCENARIO_PREFIXES)
    ):
        return "scenario"
    for package in ("maps", "render", "evaluation", "edit", "models", "train"):
        name = f"avsim.{package}"
        if module == name or module.startswith(name + "."):
            return package
    if module == "avsim" or module.startswith("avsim."):
        return "core"
    return None


def module_name(path: Path, root: Path = REPO) -> str:
    rel = path.relative_to(root)
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:]]
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


def violations_in(module: str, source: str, is_package: bool, known: set[str]) -> list[str]:
    layer = layer_of(module)
    assert layer is not None, module
    out = []
    for imp in imports_of(source, module, is_package, known):
        top = imp.target.split(".")[0]
        where = f"{module}:{imp.line}"
        if top in BARE_NAMES:
            out.append(f"{where} imports bare {imp.target!r}; use 'avsim.{imp.target}'")
            continue
        if top == "torch" and layer in NO_TORCH_AT_IMPORT and not imp.lazy:
            out.append(f"{where} imports torch at module level ({layer} layer must not)")
            continue
        target_layer = layer_of(imp.target)
        if target_layer is None:
            continue
        if layer == "cli":
            if not imp.lazy and imp.via == "import" and target_layer != "core":
                out.append(f"{where} imports {imp.target} ({target_layer}) at module level; import it inside a function")
            continue
        if target_layer == "cli":
            out.append(f"{where} imports avsim.cli; only the console entry point may")
        elif target_layer not in ALLOWED[layer]:
            out.append(f"{where} ({layer}) imports {imp.target} ({target_layer}); allowed: {sorted(ALLOWED[layer])}")
    return out


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


def test_repository_follows_the_layering_rule() -> None:
    assert len(source_files()) > 10
    problems = all_violations()
    assert problems == [], "layering violations:\n" + "\n".join(problems)


# ---- the checker itself catches what it should -----------------------------------------------
KNOWN = {"avsim.maps", "avsim.maps.elements", "avsim.render", "avsim.render.raster", "avsim.io", "avsim.errors",
         "avsim.evaluation", "avsim.edit", "avsim.models", "avsim.train", "avsim.importers", "avsim.importers.common"}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("avsim.rig", "from avsim.maps import HDMap", "(core) imports avsim.maps (maps)"),
        ("avsim.rig", "def f():\n    from avsim.render import raster", "(core) imports avsim.render"),
        ("avsim.rig", "import importlib\nimportlib.import_module('avsim.render.raster')", "imports avsim.render.raster"),
        ("avsim.rig", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from avsim.io import x", "imports avsim.io (scenario)"),
        ("avsim.rig", "from avsim import maps", "imports avsim.maps (maps)"),
        ("avsim.rig", "import torch", "imports torch at module level"),
        ("avsim.maps.elements", "from avsim.io import load_scenario", "(maps) imports avsim.io (scenario)"),
        ("avsim.maps.elements", "from ..render import raster", "(maps) imports avsim.render"),
        ("avsim.importers.common", "from avsim.render.raster import x", "(scenario) imports avsim.render.raster"),
        ("avsim.render.raster", "from avsim.evaluation import fid", "(render) imports avsim.evaluation"),
        ("avsim.edit.ops", "from avsim.evaluation import let_ap", "(edit) imports avsim.evaluation"),
        ("avsim.evaluation.fid", "import avsim.edit", "(evaluation) imports avsim.edit"),
        ("avsim.models.dit", "from avsim.maps import HDMap", "(models) imports avsim.maps"),
        ("avsim.models.dit", "from avsim.io import load_scenario", "(models) imports avsim.io (scenario)"),
        ("avsim.models.dit", "from avsim.train import config", "(models) imports avsim.train"),
        ("avsim.render.raster", "from avsim.cli import main", "only the console entry point may"),
        ("avsim.cli", "from avsim.render import cli", "at module level; import it inside a function"),
        ("avsim.render.raster", "import maps", "bare 'maps'"),
    ],
)
def test_checker_flags(module: str, source: str, expected: str) -> None:
    problems = violations_in(module, source, False, KNOWN)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("avsim.io", "from avsim.maps import HDMap"),
        ("avsim.sample_roads", "from avsim.maps import HDMap"),
        ("avsim.importers.common", "from avsim.maps.elements import Polylines"),
        ("avsim.maps.elements", "from avsim.agents import box_corners"),
        ("avsim.render.raster", "from avsim.io import load_scenario\nfrom avsim.maps import HDMap"),
        ("avsim.edit.ops", "from avsim.render import raster"),
        ("avsim.models.dit", "import torch\nfrom avsim.errors import AvsimValueError"),
        ("avsim.train.loop", "from avsim.models import dit\nfrom avsim.evaluation import fid\nfrom avsim.io import x"),
        ("avsim.cli", "import importlib\nfrom avsim.errors import AvsimError\ndef f():\n    from avsim.train import cli"),
        ("avsim.rig", "def f():\n    import torch"),
    ],
)
def test_checker_allows(module: str, source: str) -> None:
    assert violations_in(module, source, False, KNOWN) == []


def test_relative_imports_resolve() -> None:
    imps = imports_of("from . import elements\nfrom ..io import x", "avsim.maps.queries", False, KNOWN)
    assert [i.target for i in imps] == ["avsim.maps.elements", "avsim.io"]


# ---- and at run time ---------------------------------------------------------------------------
def test_core_commands_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from avsim.cli import build_app\n"
        "build_app(['info', 'x'])\n"
        "import avsim.io, avsim.maps\n"
        "heavy = sorted(m for m in ('torch', 'avsim.render', 'avsim.models', 'avsim.train') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
