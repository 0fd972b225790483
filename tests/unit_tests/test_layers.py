"""The package's folders are layers: each imports only the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

import langchain_context_pipeline

LAYERS = ["messages", "tokens", "stages", "core", "integrations", "cli"]
"""Lowest first. ``errors.py`` sits below them all."""

PACKAGE = Path(langchain_context_pipeline.__file__).parent


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.startswith("langchain_context_pipeline.")]


def test_every_module_is_in_a_layer_folder_or_an_entry_point() -> None:
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert top == {
        "__init__.py",
        "__main__.py",
        "_moved.py",
        "errors.py",
        "langgraph.py",
        "middleware.py",
        "deepagents.py",
        "recall.py",
    }
    assert {
        path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name[0] != "_"
    } == set(LAYERS)


def test_no_layer_imports_a_layer_above_it() -> None:
    upward: list[str] = []
    checked = 0
    for path in PACKAGE.rglob("*.py"):
        layer = path.relative_to(PACKAGE).parts[0]
        if layer not in LAYERS:
            continue
        for name in _imports(path):
            target = name.split(".")[1]
            checked += 1
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                upward.append(f"{path.relative_to(PACKAGE)} imports {name}")
            elif target not in LAYERS and target != "errors":
                upward.append(f"{path.relative_to(PACKAGE)} imports the entry point {name}")
    assert checked > 100
    assert upward == []


def test_the_entry_points_are_re_exports_only() -> None:
    for name in ("langgraph", "middleware", "deepagents", "recall"):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        statements = [node for node in tree.body if not isinstance(node, ast.Expr)]
        assert all(isinstance(node, ast.ImportFrom) for node in statements), name
        assert {node.module for node in statements if isinstance(node, ast.ImportFrom)} == {
            f"langchain_context_pipeline.integrations.{name}"
        }
