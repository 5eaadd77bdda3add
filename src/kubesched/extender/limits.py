"""Defaults shared by the CLI and the server (kept import-light: the CLI loads it at start-up)."""

from __future__ import annotations

#: Largest request body accepted (a 5,000-node NodeList is ~10 MiB).
DEFAULT_MAX_BODY = 64 * 1024 * 1024
#: Per-request deadline, well under the kube-scheduler's default extender httpTimeout (5 s).
DEFAULT_TIMEOUT = 3.0
#: A connection must deliver its first request's headers this soon after it opens (a slow-loris
#: client trickling headers holds a connection at most this long; Go's ReadHeaderTimeout).
HEADER_TIMEOUT = 10.0
#: Idle keep-alive connections are closed after this long: above the 90 s IdleConnTimeout of
#: kube-scheduler's extender transport (client-go SetTransportDefaults), so the scheduler always
#: closes an idle connection first and never sends a POST into one the server is closing. It is
#: also the bound on slow headers of a later request on a kept-alive connection.
IDLE_TIMEOUT = 100.0
#: Seconds a pod approved by filter/prioritize stays held on its node when neither the extender's
#: bind nor its watch settles it (extender/holds.py): long past any bind, short enough that a pod
#: the scheduler dropped without a retry does not keep its node's resources for long.
DEFAULT_HOLD_TIMEOUT = 30.0


def normalize_prefix(prefix: str) -> str:
    """URL prefix as a path that ends without "/" ("" for the root); upstream calls
    ``strings.TrimRight(urlPrefix, "/") + "/" + verb``. A full URL is reduced to its path."""
    p = prefix.strip()
    if "://" in p:
        p = "/" + p.split("://", 1)[1].partition("/")[2]
    if not p.startswith("/"):
        p = "/" + p
    return p.rstrip("/")
