"""How the objects of one watched kind reach the state: the upsert and delete a form's state part
offers, the objects it holds by key (for a re-list to drop the ones no longer listed), and that key.

Each part of `ClusterState` declares the bindings of its kinds (`bindings()`); the Ingestor reads them
by kind name (services/ingest.py), so that no table of kinds sits outside the forms.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Binding(Generic[T]):
    upsert: Callable[[T], list[Any] | None]  # returns what newly happened (state.Happening), if anything
    delete: Callable[[T], list[Any] | None] | None  # None: a deletion changes nothing
    held: Mapping[Any, T] | None  # the state's objects by key; None: a re-list drops none of them
    key: Callable[[T], Hashable]  # of an object in `held`
    # Listed by the hundred thousand: the decoder reads a whole LIST page in one pass.
    paged: bool = False
