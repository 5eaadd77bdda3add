"""One client connection of the extender's server: the header deadline, and the fast path.

The fast path: kube-scheduler's requests are plain — ``POST <prefix>/filter`` (or prioritize) with
``Content-Length`` and the whole body in one write. Such a request, once all of it has arrived, is
answered here, straight from the bytes: the same ``ExtenderServer`` answer and metrics as through
aiohttp, without aiohttp's request, response and task objects around it (on the recorded stream of
bench/extender_replay.py aiohttp's part of a pod's two requests cost about as much as the no-op
extender's whole answer). Anything else on the connection — another path or method, a body not
all there yet, chunked encoding, ``Expect``, ``Connection: close``, HTTP/1.0, a header we do not
parse exactly, a body over ``max_body`` — hands the connection to aiohttp from that byte on, for
good, so every other status code and limit (400, 404, 405, 413) stays aiohttp's and the server's
(extender/server.py). aiohttp's protocol is only made for connections that need it. A body split
over several reads is waited for here, within the request's deadline (then 408, as through aiohttp).

Deadlines: the first request's headers must arrive within ``header_timeout`` of the connection
opening (aiohttp has no header timeout of its own; Go's ReadHeaderTimeout); a connection the fast
path answered closes after ``idle_timeout`` without a byte, as aiohttp closes an idle keep-alive
connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Literal, Protocol

from kubesched.extender.requests import Reply

log = logging.getLogger("kubesched.extender")

#: Longest request head the fast path parses; a longer one goes to aiohttp (which limits it).
_MAX_HEAD = 8190
#: Distinct request heads remembered per connection (then forgotten all at once), and the longest
#: remembered (kube-scheduler's are ~200 bytes): at most ~64 KiB per connection.
_HEADS_KEPT = 64
_HEAD_KEPT_BYTES = 1024
#: Headers after which the fast path leaves a request to aiohttp.
_NOT_FAST = frozenset((b"transfer-encoding", b"expect", b"upgrade"))


class FastAnswerer(Protocol):
    """What the fast path needs from the server (``ExtenderServer``); ``timeout``: how long a
    request's body may take to arrive."""

    @property
    def fast_paths(self) -> dict[bytes, str]: ...

    @property
    def max_body(self) -> int: ...

    @property
    def timeout(self) -> float: ...

    def answer_now(self, verb: str, body: bytes) -> Reply: ...

    def answered(self) -> None:
        """Called once ``answer_now``'s reply is written (the server's work ahead)."""
        ...

    def body_late(self, verb: str) -> Reply: ...


#: Each status's response head up to the Content-Length value (made once per status).
_HEADS: dict[int, bytes] = {}


def _response(reply: Reply) -> bytes:
    head = _HEADS.get(reply.status)
    if head is None:
        phrase = HTTPStatus(reply.status).phrase.encode()
        head = _HEADS[reply.status] = (
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: " % (reply.status, phrase))
    return b"%s%d\r\n\r\n%s" % (head, len(reply.body), reply.body)


class Connection(asyncio.Protocol):
    def __init__(self, make_inner: Callable[[], asyncio.Protocol], header_timeout: float, idle_timeout: float,
                 fast: FastAnswerer | None = None, open_connections: set[Connection] | None = None) -> None:
        self._make_inner = make_inner
        self._open = open_connections if open_connections is not None else set()
        self._inner: asyncio.Protocol | None = None
        self._header_timeout = header_timeout
        self._idle_timeout = idle_timeout
        self._fast = fast
        self._buffer = bytearray()
        #: The parsed head of the request at the buffer's start, while its body arrives.
        self._head: tuple[str, int, int] | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        #: Armed once and re-armed when it fires early, rather than a new timer per request:
        #: ``_idle_since`` is when the connection last went idle (None while a request is open).
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since: float | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._tail = b""
        #: Request heads parsed on this connection (_parse_head).
        self._heads: dict[bytes, tuple[str, int] | Literal[False]] = {}
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()

    # -- asyncio.Protocol ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._open.add(self)
        self._header_timer = self._loop.call_later(self._header_timeout, self._headers_late)
        if self._fast is None:
            self._to_aiohttp(b"")

    def data_received(self, data: bytes) -> None:
        if self._header_timer is not None:
            seen = self._tail + data
            if b"\r\n\r\n" in seen:
                self._header_timer.cancel()
                self._header_timer = None
            self._tail = seen[-3:]
        if self._inner is not None:
            self._inner.data_received(data)
            return
        if not self._buffer and self._head is None:
            # The usual case: one whole request (or the start of one) in this read. Answer it
            # from ``data`` itself; only what is left over is copied into the buffer.
            data = self._serve_whole(data)
            if not data:
                return
        self._buffer += data
        self._serve_buffer()

    def eof_received(self) -> bool | None:
        if self._inner is not None:
            return self._inner.eof_received()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._open.discard(self)
        for timer in (self._header_timer, self._idle_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._idle_timer = self._body_timer = None
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    # -- the fast path -------------------------------------------------------------------------------
    def _serve_whole(self, data: bytes) -> bytes:
        """Answer the whole requests at the start of ``data``; what remains (an incomplete request,
        or one for aiohttp) is returned for the buffer."""
        assert self._fast is not None and self._transport is not None
        at = 0
        while at < len(data):
            head = self._parse_head(data, at)
            if not head or len(data) < head[2]:
                break  # incomplete, or aiohttp's: the buffer path decides
            verb, start, end = head
            self._idle_since = None
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            self._transport.write(_response(self._fast.answer_now(verb, data[start:end])))
            self._fast.answered()
            at = end
            if self._transport.is_closing():
                return b""
        if at == len(data):
            self._went_idle()
            return b""
        return data[at:] if at else data

    def _serve_buffer(self) -> None:
        assert self._fast is not None and self._transport is not None
        buf = self._buffer
        while buf:
            if self._head is None:
                head = self._parse_head(buf)
                if head is None:  # the head has not all arrived yet
                    break
                if head is False:
                    self._to_aiohttp(bytes(buf))
                    return
                self._head = head
            verb, start, end = self._head
            if len(buf) < end:  # the body is on its way: within the request's deadline
                if self._body_timer is None:
                    self._body_timer = self._loop.call_later(self._fast.timeout, self._body_late, verb)
                break
            self._head = None
            self._idle_since = None
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            body = bytes(buf[start:end])
            del buf[:end]
            self._transport.write(_response(self._fast.answer_now(verb, body)))
            self._fast.answered()
            if self._transport.is_closing():
                return
        self._went_idle()

    def _went_idle(self) -> None:
        """Waiting for the next request: idle (or its head trickling in) at most idle_timeout from
        the last answer, as aiohttp's keep-alive timer bounds it. A body on its way has its own
        timer (the request's deadline)."""
        if self._body_timer is not None or self._head is not None:
            return
        if self._idle_since is None:  # (not again for each piece of a head trickling in)
            self._idle_since = self._loop.time()
        if self._idle_timer is None:
            self._idle_timer = self._loop.call_later(self._idle_timeout, self._idle)

    def _parse_head(self, buf: bytes | bytearray, at: int = 0) -> tuple[str, int, int] | Literal[False] | None:
        """The head of the request starting at ``buf[at]`` when the fast path answers it: (verb,
        where its body starts and ends in ``buf``); None while the head is incomplete; False for
        aiohttp."""
        head_end = buf.find(b"\r\n\r\n", at)
        if head_end < 0:
            return None if len(buf) - at <= _MAX_HEAD else False
        head = bytes(buf[at:head_end])
        # A client sends the same few heads again and again (they differ in Content-Length alone):
        # each is parsed once per connection.
        parsed = self._heads.get(head)
        if parsed is None:
            parsed = self._parse_head_lines(head)
            if len(head) <= _HEAD_KEPT_BYTES:
                if len(self._heads) >= _HEADS_KEPT:
                    self._heads.clear()
                self._heads[head] = parsed
        if parsed is False:
            return False
        verb, length = parsed
        return verb, head_end + 4, head_end + 4 + length

    def _parse_head_lines(self, head: bytes) -> tuple[str, int] | Literal[False]:
        """A whole request head (without its blank line): the verb and the body's length when the
        fast path answers it, else False (aiohttp's)."""
        assert self._fast is not None
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or parts[0] != b"POST" or parts[2] != b"HTTP/1.1":
            return False
        verb = self._fast.fast_paths.get(parts[1])
        if verb is None:
            return False
        length = -1
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                return False  # folded or malformed: aiohttp decides
            key = name.lower()
            if key == b"content-length":
                value = value.strip()
                if length >= 0 or not value.isdigit():
                    return False
                length = int(value)
            elif key in _NOT_FAST or (key == b"connection" and value.strip().lower() != b"keep-alive"):
                return False
        if length < 0 or length > self._fast.max_body:
            return False
        return verb, length

    def _body_late(self, verb: str) -> None:
        """The body did not all arrive within the request's deadline: 408, as aiohttp's path answers
        it, and the connection closes (the rest of that body would read as a request)."""
        self._body_timer = None
        assert self._fast is not None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(_response(self._fast.body_late(verb)))
            self._transport.close()

    # -- handing over --------------------------------------------------------------------------------
    def _to_aiohttp(self, pending: bytes) -> None:
        """aiohttp serves the connection from here on, starting with ``pending``."""
        assert self._transport is not None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._buffer = bytearray()
        inner = self._inner = self._make_inner()
        inner.connection_made(self._transport)
        if pending:
            inner.data_received(pending)

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._transport is not None:
            log.info("extender: closed a connection that sent no complete request headers in %gs",
                     self._header_timeout)
            self._transport.abort()

    def _idle(self) -> None:
        self._idle_timer = None
        if self._transport is None or self._inner is not None:
            return
        since = self._idle_since
        if since is None or self._body_timer is not None:
            return  # a request is open: _went_idle arms the timer again after its answer
        left = since + self._idle_timeout - self._loop.time()
        if left > 0:  # a request came and went since the timer was armed
            self._idle_timer = self._loop.call_later(left, self._idle)
        else:
            self._transport.close()

    def close(self) -> None:
        """The server is stopping: close the connection unless aiohttp serves it (aiohttp's
        shutdown closes those)."""
        if self._transport is not None and self._inner is None:
            self._transport.close()
