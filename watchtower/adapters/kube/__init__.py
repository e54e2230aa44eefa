"""The Kubernetes adapter: list/watch through the official client, raw bytes into domain records.

The client library takes about a second to import, and `analyze`, the simulator and the tests of the
domain need only the decoder (`kube.decoder`): the names below are imported when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import ApiStatus, KubeConfigError, Transport, api_client
    from .health import KindHealth
    from .resources import RESOURCES, Resource
    from .source import KubeSource

__all__ = [
    "RESOURCES",
    "ApiStatus",
    "KindHealth",
    "KubeConfigError",
    "KubeSource",
    "Resource",
    "Transport",
    "api_client",
]

_MODULE_OF = {
    "ApiStatus": ".connection",
    "KubeConfigError": ".connection",
    "Transport": ".connection",
    "api_client": ".connection",
    "KindHealth": ".health",
    "RESOURCES": ".resources",
    "Resource": ".resources",
    "KubeSource": ".source",
}


def __getattr__(name: str) -> Any:
    """Return one of the adapter's names, importing its module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
