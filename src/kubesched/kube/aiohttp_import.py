"""aiohttp, imported without reading the system CA bundle twice at import time.

``aiohttp.connector`` builds two default SSL contexts when it is imported (``_SSL_CONTEXT_VERIFIED``
and ``_SSL_CONTEXT_UNVERIFIED``), each loading every certificate of the system's CA bundle
(``set_default_verify_paths``): 0.03-0.05 CPU s each and ~2 MiB of RSS (measured for issue 32) that every
``kubesched run`` paid before its first request. kubesched's own clients never use them (kube/api.py
gives aiohttp an SSL context of its own, made from the kubeconfig's CA); a plugin's session with the
default ``ssl=True`` would (e.g. real_usage's Prometheus client).

So while aiohttp is imported, ``set_default_verify_paths`` only notes the contexts asking for it, and
those contexts load the CA bundle when they are first used: at their first TLS connection
(``wrap_bio``, which asyncio calls for every connection, or ``wrap_socket``), before any certificate
is verified. Nothing is trusted that would not have been. When aiohttp is already imported (a plugin
did first), it is used as it is.

Import aiohttp through this module (``from kubesched.kube.aiohttp_import import aiohttp``) in the
modules ``kubesched run`` imports first.
"""

from __future__ import annotations

import ssl
import sys
import threading
from typing import Any


class _CertsAtFirstUse(ssl.SSLContext):
    """An SSL context that loads the system's CA certificates before its first connection."""

    _load_lock = threading.Lock()

    def _load_certs(self) -> None:
        with self._load_lock:
            if self.__dict__.pop("_certs_deferred", False):
                ssl.SSLContext.set_default_verify_paths(self)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load_certs()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_certs()
        return super().wrap_socket(*args, **kwargs)


def _import() -> None:
    if "aiohttp" in sys.modules:
        return
    deferred: list[ssl.SSLContext] = []

    def note(self: ssl.SSLContext) -> None:
        deferred.append(self)

    # ssl.SSLContext inherits the method from the C type: shadow it on the Python class, then
    # delete the shadow (the C method is inherited again).
    ssl.SSLContext.set_default_verify_paths = note  # type: ignore[method-assign]
    try:
        import aiohttp  # noqa: F401
    finally:
        del ssl.SSLContext.set_default_verify_paths
    for ctx in deferred:
        if type(ctx) is ssl.SSLContext:
            ctx.__class__ = _CertsAtFirstUse
            ctx.__dict__["_certs_deferred"] = True
        else:  # not a context this module knows how to defer: load now, as aiohttp asked
            ctx.set_default_verify_paths()


_import()

import aiohttp  # noqa: E402  (after _import, which imported it)

__all__ = ["aiohttp"]
