"""The Kubernetes adapter: list/watch through the official client, raw bytes into domain records."""

from .connection import ApiStatus, Transport, api_client
from .health import KindHealth
from .resources import RESOURCES, Resource
from .source import KubeSource

__all__ = ["RESOURCES", "ApiStatus", "KindHealth", "KubeSource", "Resource", "Transport", "api_client"]
