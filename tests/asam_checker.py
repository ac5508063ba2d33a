"""Run ASAM's checkers (asam-qc-opendrive 1.0.0, asam-qc-openscenarioxml 1.0.0, the dev extra) on a file, as their users do.

`check_xodr(path, workdir)` / `check_xosc(path, workdir)` write a checker configuration, run the
checker's own command line (`python -m qc_opendrive -c CONFIG`, `python -m qc_openscenario -c CONFIG`)
in a subprocess and read its result file back with qc_baselib. They return every issue as
(severity name, checker id, description) and every checker's status, so a test can require no
error and no skipped checker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def check_xodr(path: Path, workdir: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Issues (level, checker, description) and checker statuses of ASAM's OpenDRIVE checker on `path`."""
    return _check(path, workdir, "qc_opendrive", "xodrBundle")


def check_xosc(path: Path, workdir: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Issues (level, checker, description) and checker statuses of ASAM's OpenSCENARIO checker on `path`
    (it reads the road network the scenario names, too)."""
    return _check(path, workdir, "qc_openscenario", "xoscBundle")


def _check(path: Path, workdir: Path, module: str, bundle: str) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    from qc_baselib import Configuration, Result

    config = Configuration()
    config.set_config_param(name="InputFile", value=str(path))
    config.register_checker_bundle(checker_bundle_name=bundle)
    result_file = workdir / f"{path.stem}.xqar"
    config.set_checker_bundle_param(checker_bundle_name=bundle, name="resultFile", value=str(result_file))
    config_file = workdir / f"{path.stem}.config.xml"
    config.write_to_file(str(config_file))
    proc = subprocess.run([sys.executable, "-m", module, "-c", str(config_file)], capture_output=True, text=True, cwd=workdir, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = Result()
    result.load_from_file(str(result_file))
    issues, statuses = [], {}
    for checker in result.get_checker_results(bundle):
        statuses[checker.checker_id] = checker.status.name if hasattr(checker.status, "name") else str(checker.status)
        for issue in checker.issues:
            issues.append((issue.level.name if hasattr(issue.level, "name") else str(issue.level), checker.checker_id, issue.description))
    return issues, statuses
