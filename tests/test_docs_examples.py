"""Every Python and shell code block in README.md and docs/*.md runs, in order, on the sample.

Each document's blocks run one after another in a fresh folder (so later blocks see what earlier
ones wrote), with `avsim` on PATH and the repository's `docs/` and `bench/` linked in, so the
commands read exactly as a user types them from a checkout. Two HTML comments, invisible on a
rendered page, steer a block; they stand on the lines directly above its fence:

    <!-- docs-test: setup COMMAND -->   a shell command run first (e.g. `avsim sample scene`)
    <!-- docs-test: skip REASON -->     not run here (model weights, real recordings, a GPU ...)

A block with no language that holds commands fails the test: label it so it is either run or
skipped with a reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.subprocess]

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<kind>skip|setup)\s+(?P<arg>.*?)\s*-->\s*$")
SHELL = {"bash", "sh", "shell"}
RUNNABLE = SHELL | {"python"}
COMMAND_START = re.compile(r"^\s*(avsim|python3?|torchrun|\.venv/bin/|from \w|import \w|pip )")
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    setup: tuple[str, ...]
    skip: str | None

    @property
    def where(self) -> str:
        path = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{path}:{self.line}"


def _markers(lines: list[str], fence_index: int) -> tuple[tuple[str, ...], str | None]:
    setup: list[str] = []
    skip = None
    i = fence_index - 1
    while i >= 0 and (match := MARKER.match(lines[i])):
        if match["kind"] == "skip":
            skip = match["arg"]
        else:
            setup.insert(0, match["arg"])
        i -= 1
    return tuple(setup), skip


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, with their docs-test markers."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for match in FENCE.finditer(text):
        index = text.count("\n", 0, match.start())
        setup, skip = _markers(lines, index)
        out.append(Block(path, index + 1, match["lang"], match["body"], setup, skip))
    return out


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def _run(block: Block, command: list[str], cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, env=_environment(), capture_output=True, text=True,
                            timeout=BLOCK_TIMEOUT_S, check=False)
    assert result.returncode == 0, (
        f"{block.where}: the {block.lang or 'shell'} block failed (exit {result.returncode})\n"
        f"--- block ---\n{block.body}--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )


def run_block(block: Block, cwd: Path) -> None:
    """Run one block (after its setup commands) in `cwd`; fail naming the block's line."""
    for command in block.setup:
        _run(block, ["bash", "-euo", "pipefail", "-c", command], cwd)
    if block.lang in SHELL:
        _run(block, ["bash", "-euo", "pipefail", "-c", block.body], cwd)
    else:
        script = cwd / f"_docs_block_{block.line}.py"
        script.write_text(block.body, encoding="utf-8")
        _run(block, [sys.executable, script.name], cwd)
        script.unlink()


def _workspace(tmp_path: Path) -> Path:
    for name in ("docs", "bench"):
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_document_examples_run(path: Path, tmp_path: Path) -> None:
    cwd = _workspace(tmp_path)
    for block in blocks_of(path):
        if block.lang in RUNNABLE and block.skip is None:
            run_block(block, cwd)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_code_blocks_are_labelled(path: Path) -> None:
    """Commands sit in python/bash blocks (run or skipped with a reason), never in plain ones."""
    unlabelled = [b.where for b in blocks_of(path) if not b.lang and any(COMMAND_START.match(x) for x in b.body.splitlines())]
    assert unlabelled == [], "label these blocks python or bash: " + ", ".join(unlabelled)
    no_reason = [b.where for b in blocks_of(path) if b.skip is not None and not b.skip.strip()]
    assert no_reason == []


def test_markers_are_read(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n<!-- docs-test: setup avsim sample s -->\n```bash\navsim info s\n```\n"
        "<!-- docs-test: skip needs model weights -->\n```python\nimport weights\n```\n```\nplain\n```\n"
    )
    blocks = blocks_of(doc)
    assert [(b.line, b.lang, b.setup, b.skip) for b in blocks] == [
        (3, "bash", ("avsim sample s",), None),
        (7, "python", (), "needs model weights"),
        (10, "", (), None),
    ]
    assert blocks[0].body == "avsim info s\n"


def test_a_failing_block_fails_naming_its_line(tmp_path: Path) -> None:
    block = Block(tmp_path / "doc.md", 12, "python", "raise SystemExit(3)\n", (), None)
    (tmp_path / "doc.md").write_text("")
    with pytest.raises(AssertionError, match=r"doc.md:12: the python block failed \(exit 3\)"):
        run_block(block, tmp_path)
