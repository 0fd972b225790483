"""Integration tests talk to servers they start themselves, on loopback only.

Whatever socket options the run was given (``--disable-socket`` for the whole tree,
say), every integration test may open sockets but connect only to 127.0.0.1 (and
Unix sockets, which the event loop uses): nothing here reaches the network.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_socket import enable_socket, socket_allow_hosts

from tests.integration_tests.openai_stub import OpenAIStub

LOOPBACK = ["127.0.0.1"]


@pytest.fixture(autouse=True)
def _loopback_only() -> Iterator[None]:
    enable_socket()
    socket_allow_hosts(LOOPBACK, allow_unix_socket=True)
    yield
    # pytest-socket's own teardown hook lifts the connect() restriction.


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A started OpenAI-compatible stub server on 127.0.0.1."""
    with OpenAIStub() as stub:
        yield stub
