"""Opt-in tests against a real model: skipped unless CONTEXT_PIPELINE_REAL_LLM_URL is set.

``make test-real-llm`` (``scripts/real-llm.sh``) builds llama.cpp's OpenAI-compatible
server, serves the Gemma 3 270M GGUF on a free loopback port, exports the variable
and runs this directory. Pointed at any other OpenAI-compatible server by hand,
the tests may connect only to that server's host.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from pytest_socket import enable_socket, socket_allow_hosts

URL_ENV = "CONTEXT_PIPELINE_REAL_LLM_URL"

SKIP_REASON = (
    f"{URL_ENV} is not set: these tests need a real OpenAI-compatible model server; "
    "run `make test-real-llm` to start a local llama.cpp server and run them"
)


@pytest.fixture(autouse=True)
def real_llm_url() -> Iterator[str]:
    """The server's base URL (``http://HOST:PORT/v1``); skips the test when it is unset."""
    url = os.environ.get(URL_ENV, "").strip()
    if not url:
        pytest.skip(SKIP_REASON)
    host = urlsplit(url).hostname or "127.0.0.1"
    enable_socket()
    socket_allow_hosts(sorted({"127.0.0.1", socket.gethostbyname(host)}), allow_unix_socket=True)
    yield url.rstrip("/")
