"""What ``make`` installs: the demo the core only, every other target the dev tools.

Read from ``make -n`` (what make would run, nothing run) against a virtual environment
path in a temporary directory, before and after a simulated ``make demo``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = "pip install --quiet -e ."
DEV = "pip install --quiet --group dev"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def planned(target: str, venv: Path) -> str:
    """The commands ``make target`` would run with ``VENV=venv``."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def after_demo(venv: Path) -> None:
    """Leave ``venv`` as ``make demo`` does: a Python and the core's stamp, both newer."""
    newer = (ROOT / "pyproject.toml").stat().st_mtime + 10
    (venv / "bin").mkdir(parents=True)
    for path in (venv / "bin" / "python", venv / ".installed-core"):
        path.touch()
        os.utime(path, (newer, newer))


def test_demo_on_a_fresh_clone_installs_the_core_only(tmp_path: Path) -> None:
    plan = planned("demo", tmp_path / "venv")
    assert "-m venv" in plan and CORE in plan
    assert "--group dev" not in plan and ".[dev]" not in plan
    assert "make demo: done in" in plan  # it says how long it took


def test_lint_on_a_fresh_clone_installs_the_dev_tools(tmp_path: Path) -> None:
    plan = planned("lint", tmp_path / "venv")
    assert CORE in plan and DEV in plan


def test_dev_tools_are_added_after_the_demo(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    after_demo(venv)
    assert CORE not in planned("demo", venv)  # the demo's install is done
    plan = planned("lint", venv)
    assert DEV in plan and CORE not in plan and "-m venv" not in plan
