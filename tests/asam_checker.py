"""Run ASAM's OpenDRIVE checker (asam-qc-opendrive 1.0.0, the dev extra) on a file, as its users do.

`check_xodr(path, workdir)` writes a checker configuration, runs the checker's own command line
(`python -m qc_opendrive -c CONFIG`) in a subprocess and reads its result file back with
qc_baselib. It returns every issue as (severity name, checker id, description, status of the
checker) and every checker's status, so a test can require no error and no skipped checker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def check_xodr(path: Path, workdir: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Issues (level, checker, description) and checker statuses of ASAM's checker on `path`."""
    from qc_baselib import Configuration, Result

    config = Configuration()
    config.set_config_param(name="InputFile", value=str(path))
    config.register_checker_bundle(checker_bundle_name="xodrBundle")
    result_file = workdir / f"{path.stem}.xqar"
    config.set_checker_bundle_param(checker_bundle_name="xodrBundle", name="resultFile", value=str(result_file))
    config_file = workdir / f"{path.stem}.config.xml"
    config.write_to_file(str(config_file))
    proc = subprocess.run([sys.executable, "-m", "qc_opendrive", "-c", str(config_file)], capture_output=True, text=True, cwd=workdir, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"qc_opendrive failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = Result()
    result.load_from_file(str(result_file))
    issues, statuses = [], {}
    for checker in result.get_checker_results("xodrBundle"):
        statuses[checker.checker_id] = checker.status.name if hasattr(checker.status, "name") else str(checker.status)
        for issue in checker.issues:
            issues.append((issue.level.name if hasattr(issue.level, "name") else str(issue.level), checker.checker_id, issue.description))
    return issues, statuses
