"""bench/gpu_check.py in its --dry mode (CPU, debug configs): every row reports, failures stay local.

The GPU figures themselves need a GPU; this keeps the script's code paths (render backends,
bf16 parity, FSDP2 + Ulysses CP on a process group of one, the pipeline's generation step, a
training step) running on the CPU so that the one-shot GPU run cannot rot.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_check.py"
ROWS = [
    "render.torch", "render.equal", "parity.dit_forward", "parity.sampler_step", "dist.fsdp2_cp",
    "gen.vae_encode", "gen.vae_decode", "gen.dit_sdpa", "gen.dit_flash", "train.step", "sim.closed_loop_chunk",
]  # fmt: skip
CUDA_ONLY = {"gen.dit_flash"}
HEADER = "| row | figure | target | result |"


def _run(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = cwd / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry", "--out", str(out), *args],
        capture_output=True, text=True, cwd=cwd, timeout=900, check=False,
    )  # fmt: skip
    assert (out / "gpu_check.json").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "gpu_check.json").read_text())


def _table_rows(stdout: str) -> dict[str, list[str]]:
    """The printed Markdown table (the last one): row name -> its cells."""
    table = stdout.rsplit(HEADER, 1)[1].split("\n\n", 1)[0]
    cells = [line.strip("|").split(" | ") for line in table.strip().splitlines()[1:]]
    return {c[0].strip(): [x.strip() for x in c[1:]] for c in cells}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dry_run_reports_every_row_and_passes(tmp_path: Path) -> None:
    proc, data = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert data["mode"].startswith("dry") and data["machine"] and "torch" in data["versions"]
    rows = {r["name"]: r for r in data["rows"]}
    assert list(rows) == ROWS
    for name, row in rows.items():
        if name in CUDA_ONLY:
            assert row["status"] == "SKIP" and "CUDA" in row["note"], row
        else:
            assert row["status"] == "PASS", row
            assert row["figure"] not in ("", "-"), row
    printed = _table_rows(proc.stdout)
    assert list(printed) == ROWS
    assert printed["render.equal"][2] == "PASS" and printed["gen.dit_flash"][2].startswith("SKIP: ")
    assert "relative error" in rows["parity.dit_forward"]["figure"]
    assert "FSDP2 + Ulysses CP" in rows["dist.fsdp2_cp"]["figure"]
    assert (tmp_path / "out" / "gpu_check.md").read_text().count("| ") >= len(ROWS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing written to the working directory


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_failing_row_fails_alone_and_the_exit_status_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In this process (the CLI itself is the test above): forced failures stay in their rows."""
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # --dry sets it; restored after the test
    script = _load_script()
    out = tmp_path / "out"
    with torch.random.fork_rng(devices=[]):
        status = script.main([
            "--dry", "--out", str(out), "--only", "parity,dist,generate",
            "--force-fail", "parity.dit_forward",  # a measured row whose target is made impossible
            "--force-error", "gen.vae_encode,dist",  # a row that raises, and a whole check that raises
        ])  # fmt: skip
    stdout = capsys.readouterr().out
    assert status == 1, stdout[-4000:]
    rows = {r["name"]: r for r in json.loads((out / "gpu_check.json").read_text())["rows"]}
    assert list(rows) == [n for n in ROWS if n.split(".")[0] in ("parity", "dist", "gen")]
    forced = rows["parity.dit_forward"]
    assert forced["status"] == "FAIL" and "relative error" in forced["figure"] and "--force-fail" in forced["note"]
    assert rows["gen.vae_encode"]["status"] == rows["dist.fsdp2_cp"]["status"] == "FAIL"
    assert rows["gen.vae_encode"]["note"] == "RuntimeError: forced error (--force-error)"
    for name in ("parity.sampler_step", "gen.vae_decode", "gen.dit_sdpa"):
        assert rows[name]["status"] == "PASS", rows[name]
    printed = _table_rows(stdout)
    assert printed["gen.vae_encode"][2].startswith("FAIL: RuntimeError") and printed["gen.dit_sdpa"][2] == "PASS"
    assert "3 FAIL" in stdout.rsplit("rows:", 1)[1]
