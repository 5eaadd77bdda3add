"""kubernetes_asyncio's kubeconfig and in-cluster loaders, without the rest of kubernetes_asyncio.

``import kubernetes_asyncio.config`` runs the package's ``__init__``, which imports
``kubernetes_asyncio.client`` and with it every generated API class and model: ~860 modules,
0.6-0.8 s and ~33 MiB of RSS (measured, issue 32), paid by every ``kubesched run`` before it could
say anything. The loaders themselves (``config/kube_config.py``, ``config/incluster_config.py``)
need two classes of the client package: ``Configuration`` (where they write host, certificates
and tokens) and ``ApiClient`` (only for ``new_client_from_config``, never called here); and
``ApiClient``'s module imports ``client.models`` only to deserialize generated models.

So the loaders are imported under placeholder parent packages (``kubernetes_asyncio``,
``kubernetes_asyncio.client``, ``kubernetes_asyncio.client.models``: empty modules whose
``__path__`` is the real directory, so each submodule is the package's own file, unchanged). Once
imported, every ``kubernetes_asyncio`` entry is taken out of ``sys.modules`` again: the loader
modules live on through the functions returned, and a plugin that imports ``kubernetes_asyncio``
later gets the whole real package, not the placeholders. When the package is already imported
(a plugin did), it is used as it is.

Two more imports wait for their first use (measured for issue 32 item 2, ~0.05 CPU s of every
``kubesched run`` before its first request): ``client/api_client.py`` (python-dateutil's parser,
``multiprocessing.pool``, the REST client), which the loaders reach only through
``new_client_from_config``, and urllib3, which ``client/configuration.py`` imports at its top but
uses only by name (a logger's). The loaders get stand-ins that import the real module at their
first use (:class:`_ModuleOnFirstUse`, :func:`_api_client_on_first_use`), after checking now that it
is installed: a missing module fails here, with its name, never later.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

_PACKAGE = "kubernetes_asyncio"
#: The parent packages replaced by placeholders while the loaders are imported (their
#: ``__init__`` is what imports every generated class).
_PLACEHOLDERS = (_PACKAGE, f"{_PACKAGE}.client", f"{_PACKAGE}.client.models")


@dataclass(frozen=True)
class KubeconfigLoaders:
    """``kubernetes_asyncio.config`` (load_kube_config, load_incluster_config, refresh_token) and
    ``kubernetes_asyncio.client.Configuration``."""

    config: Any
    configuration_class: type[Any]


@functools.cache
def kubeconfig_loaders() -> KubeconfigLoaders:
    """The loaders, imported once per process (see the module docstring)."""
    if _PACKAGE in sys.modules:  # its __init__ imported client and config already
        return _from_real_package()
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.origin is None:
        raise ImportError(f"No module named {_PACKAGE!r}")
    root = Path(spec.origin).parent
    before = set(sys.modules)
    try:
        parent: ModuleType | None = None
        for name in _PLACEHOLDERS:
            module = ModuleType(name)
            module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
            sys.modules[name] = module
            if parent is not None:
                setattr(parent, name.rsplit(".", 1)[1], module)
            parent = module
        for name in _ON_FIRST_USE:
            if name not in sys.modules:
                sys.modules[name] = _ModuleOnFirstUse(name)
        client = sys.modules[f"{_PACKAGE}.client"]
        configuration = importlib.import_module(f"{_PACKAGE}.client.configuration")
        _require(f"{_PACKAGE}.client.api_client")
        client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
        client.ApiClient = _api_client_on_first_use  # type: ignore[attr-defined]
        config = importlib.import_module(f"{_PACKAGE}.config")
        return KubeconfigLoaders(config, configuration.Configuration)
    finally:
        for name in set(sys.modules) - before:
            if name == _PACKAGE or name.startswith(f"{_PACKAGE}.") or isinstance(sys.modules[name], _ModuleOnFirstUse):
                del sys.modules[name]


#: Modules the loaders' files import at their top without needing them to load credentials.
_ON_FIRST_USE = ("urllib3",)


def _require(name: str) -> None:
    """Fail now, naming ``name``, when it is not installed (its import is put off)."""
    if importlib.util.find_spec(name) is None:
        raise ImportError(f"No module named {name!r}", name=name)


class _ModuleOnFirstUse(ModuleType):
    """Stands in for the installed module ``name`` (checked to exist): its first attribute read
    imports the module and is answered by it."""

    def __init__(self, name: str) -> None:
        _require(name)
        super().__init__(name)

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def _api_client_on_first_use(*args: Any, **kwargs: Any) -> Any:
    """``kubernetes_asyncio.client.ApiClient`` for ``new_client_from_config``: the whole real
    package imported then (its placeholders are gone by then), as it would have been."""
    from kubernetes_asyncio.client import ApiClient

    return ApiClient(*args, **kwargs)


def _from_real_package() -> KubeconfigLoaders:
    from kubernetes_asyncio import config
    from kubernetes_asyncio.client import Configuration

    return KubeconfigLoaders(config, Configuration)
