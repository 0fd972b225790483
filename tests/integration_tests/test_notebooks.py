"""Every notebook runs top to bottom offline, and is stored without outputs.

No notebook silences warnings: a reader sees what LangGraph deprecates (notebook 02
calls ``create_react_agent`` and shows its warning).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.integration, pytest.mark.notebook]

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
# Text a notebook's run must show on stderr (warnings a reader is meant to see).
SHOWN = {"02_langgraph_pre_model_hook": "create_react_agent has been moved"}
SILENCERS = ("filterwarnings", "simplefilter", "catch_warnings", "PYTHONWARNINGS")


def test_there_are_six_notebooks() -> None:
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_does_not_silence_warnings(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            found = [word for word in SILENCERS if word in cell.source]
            assert not found, f"{path.name} cell {cell.id} silences warnings: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert errors == []
    streams = [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream"
    ]
    printed = "".join(output.get("text", "") for output in streams)
    assert printed.strip(), "the notebook printed nothing"
    if path.stem in SHOWN:
        stderr = "".join(output.get("text", "") for output in streams if output.name == "stderr")
        assert SHOWN[path.stem] in stderr, f"{path.name} does not show {SHOWN[path.stem]!r}"
