#!/usr/bin/env bash
# Build the wheel and the sdist, install each in a clean virtual environment and
# check what they promise:
#   - the core imports without LangGraph (and without langchain or deepagents);
#   - the sdist installs and imports the same way;
#   - each extra installs what it names (its entry-point module imports).
# Usage: scripts/check-package.sh [python-with-build]   (default: python3)
# Packages come from the package index pip is configured with; pip's cache is reused.
set -euo pipefail

BUILDER=${1:-python3}
# The clean environments use the interpreter that runs the builder.
PYTHON=$("$BUILDER" -c 'import sys; print(sys.executable)')
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_QUIET=1
unset PYTHONPATH  # the clean environments must see only what they installed
start=$SECONDS

step() { printf 'check-package: %s (%ss)\n' "$1" "$((SECONDS - start))"; }

# A copy of the sources, so the build never writes into the work tree.
mkdir "$TMP/src"
(cd "$ROOT" && git ls-files -z 2>/dev/null || find . -type f -not -path './.*' -print0) \
    | (cd "$ROOT" && xargs -0 cp --parents -t "$TMP/src")
"$BUILDER" -m build --outdir "$TMP/dist" "$TMP/src" >"$TMP/build.log" 2>&1 \
    || { cat "$TMP/build.log"; exit 1; }
WHEEL=$(ls "$TMP"/dist/*.whl)
SDIST=$(ls "$TMP"/dist/*.tar.gz)
step "built $(basename "$WHEEL") and $(basename "$SDIST")"

core_check='
import importlib, importlib.util, sys
import langchain_context_pipeline as p
assert p.ContextPipeline(threshold=100).compress([("user", "hi")]).messages
for name in ("langgraph", "langchain", "deepagents"):
    assert importlib.util.find_spec(name) is None, f"{name} is installed by the core"
try:
    importlib.import_module("langchain_context_pipeline.langgraph")
except ImportError as exc:
    assert "[langgraph]" in str(exc), exc
else:
    raise AssertionError("the LangGraph hook imported without LangGraph")
assert p.__file__.startswith(sys.prefix), p.__file__
'

fresh() {  # fresh NAME: a clean virtual environment
    "$PYTHON" -m venv "$TMP/$1"
    echo "$TMP/$1/bin/python"
}

# The sdist installs in its own environment meanwhile (pip builds it from source).
sdist_py=$(fresh sdist)
"$sdist_py" -m pip install "$SDIST" >"$TMP/sdist.log" 2>&1 &
sdist_pid=$!

wheel_py=$(fresh wheel)
"$wheel_py" -m pip install "$WHEEL" >"$TMP/pip.log" 2>&1 || { cat "$TMP/pip.log"; exit 1; }
(cd "$TMP" && "$wheel_py" -c "$core_check")
step "wheel: the core imports without LangGraph"

# Each extra, installed with its dependencies (resolved by pip) into the wheel's env.
extra() {  # extra NAME CODE: install the extra, then run CODE in that environment
    "$wheel_py" -m pip install "${WHEEL}[$1]" >"$TMP/pip.log" 2>&1 || { cat "$TMP/pip.log"; exit 1; }
    (cd "$TMP" && "$wheel_py" -c "$2")
    step "[$1] installs what it promises"
}
extra langgraph 'import langchain_context_pipeline.langgraph, langgraph.prebuilt'
extra agents 'import langchain_context_pipeline.middleware'
extra tiktoken '
from langchain_core.messages import HumanMessage
from langchain_context_pipeline import tiktoken_counter
assert tiktoken_counter()([HumanMessage("hello world")]) > 0'
extra openai 'import langchain_openai'
extra deepagents 'import langchain_context_pipeline.deepagents, deepagents'

wait "$sdist_pid" || { cat "$TMP/sdist.log"; exit 1; }
(cd "$TMP" && "$sdist_py" -c "$core_check")
step "sdist: the core imports without LangGraph"
