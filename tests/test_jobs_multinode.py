"""docs/jobs.md "A multi-node Ray cluster", as written, on this machine: a head node and a second node
started with `ray start` under token authentication (the pinned Ray 2.60), `avsim run render
--address HEAD:PORT` across both, a worker killed on the head and the second node's raylet killed
mid-item, the local engine's bytes, and Ray's own log lines in `OUT/ray.log` instead of the
terminal (issue 55).

Each node is its own `ray start --block` process (stopped with SIGTERM, which stops that node's
processes only, never another Ray on the machine) on ports picked free here. Which node ran a task
shows through the test hang (`avsim.jobs.items.HANG_ENV`): each node's raylet passes its own hang
folder to its workers, and the test kills every worker that claims a hang, so each item may run,
die and be retried on either node.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from job_hang import needs_ray

from avsim.cli.main import main
from avsim.jobs.items import HANG_ENV

ITEMS = ("a", "b", "c")
TINY = ["--frames", "3", "--size", "64x36", "--cameras", "camera_front_wide_120fov"]
BIN = Path(sys.executable).parent
# Ray's own lines: glog (`[2026-01-01 12:00:00,000 W 123 456]`, `file.cc:12:`), its nodes' errors and state dumps
RAY_LINE = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,]+ [IWEF] \d+ \d+\]|\.cc:\d+:|\(raylet\)|\[state-dump\]|(INFO|WARNING|ERROR) \w+\.py:\d+")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_ports() -> list[str]:
    names = ("--ray-client-server-port", "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--metrics-export-port",
             "--runtime-env-agent-port", "--node-manager-port", "--object-manager-port")  # fmt: skip
    return [f"{name}={port}" for name, port in zip(names, _free_ports(len(names)))]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`ray start ... --block` in the background; returns once the node says it runs."""
    with log.open("wb") as out:
        proc = subprocess.Popen([str(BIN / "ray"), "start", "--block", "--disable-usage-stats", *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"ray start {args[0]} did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the --block process stops its own node's processes
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], dict[str, Path], subprocess.Popen[bytes]]]:
    """Two nodes as docs/jobs.md starts them; yields the head's address, the driver's environment, each node's
    hang folder and the second node's `ray start --block` process."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != HANG_ENV}
    head_home, worker_home = tmp_path / "head_home", tmp_path / "worker_home"
    worker_home.mkdir()
    hang = {"head": tmp_path / "hang_head", "worker": tmp_path / "hang_worker"}
    for folder in hang.values():
        folder.mkdir()
    # on the head node: a token (docs: `ray get-auth-token --generate`), then `RAY_AUTH_MODE=token ray start --head`
    subprocess.run([str(BIN / "ray"), "get-auth-token", "--generate"], env={**base, "HOME": str(head_home)}, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    token = (head_home / ".ray" / "auth_token").read_text().strip()
    temp_dir = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # Ray's socket paths must stay short
    port, dashboard = _free_ports(2)
    head_env = {**base, "HOME": str(head_home), "RAY_AUTH_MODE": "token", HANG_ENV: str(hang["head"])}
    worker_env = {**base, "HOME": str(worker_home), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, HANG_ENV: str(hang["worker"])}
    nodes = []
    try:
        nodes.append(_start(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1", f"--temp-dir={temp_dir}",
                             "--include-dashboard=false", f"--dashboard-port={dashboard}", *_node_ports()], head_env,
                            tmp_path / "head.log"))  # fmt: skip
        nodes.append(_start([f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", "--num-cpus=1", *_node_ports()],
                            worker_env, tmp_path / "worker.log"))  # fmt: skip
        yield f"127.0.0.1:{port}", {**base, "HOME": str(head_home), "RAY_AUTH_MODE": "token"}, hang, nodes[1]
    finally:
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _raylet_of(proc: subprocess.Popen[bytes]) -> int:
    """The pid of the raylet a `ray start --block` process started (its child named raylet)."""
    for task in Path(f"/proc/{proc.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if Path(f"/proc/{child}/comm").read_text().strip() == "raylet":
                return int(child)
    raise AssertionError("the second node has no raylet")


def _tree(root: Path) -> dict[str, bytes]:
    skip = {"ray.log", "job_report.json"}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).as_posix() not in skip and not p.name.endswith("render_summary.json")}  # fmt: skip


@pytest.mark.distributed
@pytest.mark.subprocess
@needs_ray
def test_a_job_runs_across_two_token_authenticated_nodes(cluster, tmp_path: Path) -> None:
    address, driver_env, hang, second_node = cluster
    dataset = tmp_path / "scenes"
    assert main(["sample", str(dataset / ITEMS[0]), "--duration-s", "1"]) == 0
    for item in ITEMS[1:]:
        shutil.copytree(dataset / ITEMS[0], dataset / item)
    local = tmp_path / "local"
    assert main(["run", "render", str(dataset), str(local), *TINY, "--workers", "1"]) == 0
    for folder in hang.values():  # every item hangs once on each node it reaches; the test kills that worker
        for item in ITEMS:
            (folder / f"{item}.hang").write_text("")
    out = tmp_path / "ray"
    driver = subprocess.Popen([str(BIN / "avsim"), "run", "render", str(dataset), str(out), *TINY, "--engine", "ray",
                               "--address", address], env=driver_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    killed: dict[str, list[str]] = {"head": [], "worker": []}
    deadline = time.monotonic() + 900
    while driver.poll() is None and time.monotonic() < deadline:
        for node, folder in hang.items():
            for pid_file in folder.glob("*.pid"):
                text = pid_file.read_text().strip()
                if text:  # a worker on the head dies; the second node's first claim loses the whole node (its raylet)
                    os.kill(_raylet_of(second_node) if node == "worker" else int(text), signal.SIGKILL)
                    killed[node].append(pid_file.stem)
                    pid_file.unlink()
                    if node == "worker":
                        second_node.wait(120)  # the node's other processes go with its raylet
        time.sleep(0.2)
    if driver.poll() is None:
        driver.kill()
    stdout, stderr = driver.communicate(timeout=60)
    err = stderr.decode(errors="replace")
    assert driver.returncode == 0, err[-3000:]
    assert killed["head"] and killed["worker"] == killed["worker"][:1], killed  # tasks ran on both nodes, the second one lost
    assert _tree(out) == _tree(local)  # the local engine's bytes
    assert [p for p in out.rglob(".*")] == []  # the retries removed the dead workers' temporaries
    said = [line for line in (err + stdout.decode(errors="replace")).splitlines() if RAY_LINE.search(line)]
    assert said == [], said[:5]  # Ray's own lines (a lost node's state dump) stay off the terminal ...
    assert stdout == b"" and "3 done, 0 skipped, 0 failed" in err
    assert "(raylet)" in (out / "ray.log").read_text(errors="replace")  # ... in the job folder
