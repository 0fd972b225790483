"""A small OpenAI-compatible server on loopback, for tests with real HTTP clients.

    with OpenAIStub() as stub:
        stub.script(StubReply(status=429), StubReply(content="a summary"))
        model = ChatOpenAI(base_url=stub.base_url, api_key="test", max_retries=0)
        ...
        stub.requests[0].json["messages"]

It serves ``POST /v1/chat/completions`` (plain JSON, or server-sent events when the
request asks for ``"stream": true``) and ``GET /v1/models``. Every request is
recorded. Replies come from a script (a queue of :class:`StubReply`), then from a
``responder`` callable, then from ``default``; each reply may set an HTTP status
(429, 500, ...), a delay before answering, raw body bytes, extra headers, tool
calls, or ``drop=True`` to close the connection without answering.
:func:`context_length_exceeded` is OpenAI's own error for a request over the
model's window (HTTP 400, ``code: context_length_exceeded``).

The server is a threaded ``http.server`` bound to 127.0.0.1 on a free port; it
needs no network and stops cleanly (``stop()`` or leaving the ``with`` block).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "OpenAIStub",
    "RecordedRequest",
    "StubReply",
    "context_length_body",
    "context_length_exceeded",
]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


@dataclass
class StubReply:
    """What the stub answers to one request."""

    content: str | None = "stub reply"
    """The assistant's text (``None`` for a tool-call-only reply)."""
    status: int = 200
    """HTTP status; anything but 200 sends an OpenAI-style error body."""
    delay: float = 0.0
    """Seconds to wait before answering (to test timeouts)."""
    tool_calls: list[dict[str, Any]] | None = None
    """OpenAI-format tool calls: ``{"id", "type": "function", "function": {...}}``."""
    finish_reason: str = "stop"
    """The choice's finish reason."""
    usage: dict[str, int] | None = None
    """Token usage to report; computed roughly from the request when None."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. ``retry-after``)."""
    body: bytes | dict[str, Any] | None = None
    """A raw body (bytes or JSON) sent instead of the generated one."""
    error_message: str = "stub error"
    """The message of an error body."""
    drop: bool = False
    """Close the connection without sending anything."""


@dataclass
class RecordedRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None if empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


Responder = Callable[[RecordedRequest], StubReply]


def context_length_body(window: int, requested: int) -> dict[str, Any]:
    """OpenAI's error body for a request of ``requested`` tokens over a ``window``."""
    return {
        "error": {
            "message": (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {requested} tokens. Please reduce the length of "
                "the messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def context_length_exceeded(window: int, requested: int) -> StubReply:
    """The HTTP 400 OpenAI answers a request of ``requested`` tokens over ``window`` with."""
    return StubReply(status=400, body=context_length_body(window, requested))


class OpenAIStub:
    """An OpenAI-compatible chat completions server on 127.0.0.1, for tests."""

    def __init__(
        self,
        replies: Iterable[StubReply] = (),
        *,
        default: StubReply | None = None,
        responder: Responder | None = None,
        model: str = "stub-model",
    ) -> None:
        """Prepare the stub; :meth:`start` (or ``with``) starts it.

        Args:
            replies: replies to send first, in order, one per request.
            default: the reply once the script is used up (a plain text reply if None).
            responder: called with each request once the script is used up; wins
                over ``default``.
            model: the model name the stub reports.
        """
        self.model = model
        self.default = default or StubReply()
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._script: deque[StubReply] = deque(replies)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------

    def script(self, *replies: StubReply) -> None:
        """Queue replies for the next requests."""
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests and queued replies."""
        with self._lock:
            self.requests.clear()
            self._script.clear()

    @property
    def port(self) -> int:
        """The port the stub listens on."""
        if self._server is None:
            raise RuntimeError("the stub is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``base_url`` for an OpenAI client: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Recorded ``POST .../chat/completions`` requests."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def start(self) -> OpenAIStub:
        """Start serving on a free port of 127.0.0.1."""
        if self._server is not None:
            return self
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering -------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> StubReply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(request)
        return self.default

    def completion(self, request: RecordedRequest, reply: StubReply) -> dict[str, Any]:
        """The JSON body of a successful chat completion."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        prompt_chars = len(request.body)
        usage = reply.usage or {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(reply.content or "") // 4,
            "total_tokens": prompt_chars // 4 + len(reply.content or "") // 4,
        }
        return {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(request.received_at),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool_calls else reply.finish_reason,
                }
            ],
            "usage": usage,
        }

    def stream_events(self, request: RecordedRequest, reply: StubReply) -> list[dict[str, Any]]:
        """The chunks of a streamed chat completion."""
        base = {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": int(request.received_at),
            "model": self.model,
        }
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
        text = reply.content or ""
        for start in range(0, len(text), 16):
            delta = {"content": text[start : start + 16]}
            chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
        if reply.tool_calls:
            calls = [{"index": i, **call} for i, call in enumerate(reply.tool_calls)]
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": calls}}]})
        finish = "tool_calls" if reply.tool_calls else reply.finish_reason
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        return chunks


def _handler_for(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _read(self) -> RecordedRequest:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            return RecordedRequest(self.command, self.path, headers, body, time.time())

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            request = self._read()
            with stub._lock:
                stub.requests.append(request)
            if self.path.rstrip("/").endswith("/models"):
                body = {"object": "list", "data": [{"id": stub.model, "object": "model"}]}
                self._send(200, json.dumps(body).encode(), {})
            else:
                self._send(404, b'{"error": {"message": "not found"}}', {})

        def do_POST(self) -> None:
            request = self._read()
            reply = stub._record(request)
            try:
                self._answer(request, reply)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up
                self.close_connection = True

        def _answer(self, request: RecordedRequest, reply: StubReply) -> None:
            if reply.delay:
                time.sleep(reply.delay)
            if reply.drop:
                self.close_connection = True
                return
            if reply.body is not None:
                raw = (
                    reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                )
                self._send(reply.status, raw, reply.headers)
                return
            if reply.status != 200:
                error = {
                    "error": {
                        "message": reply.error_message,
                        "type": _ERROR_TYPES.get(reply.status, "server_error"),
                        "code": str(reply.status),
                    }
                }
                self._send(reply.status, json.dumps(error).encode(), reply.headers)
                return
            if not request.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}', {})
                return
            payload = request.json if isinstance(request.json, dict) else {}
            if payload.get("stream"):
                self._stream(request, reply)
                return
            body = json.dumps(stub.completion(request, reply)).encode()
            self._send(200, body, reply.headers)

        def _stream(self, request: RecordedRequest, reply: StubReply) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            for chunk in stub.stream_events(request, reply):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler
