"""How a form declares the shape of its JSON, so that /openapi.json documents it without naming the form.

A shape is a `TypedDict` named by the form's registration (`QueueForm.workload_shape`, `queue_shape`): its
keys in the order its presenter returns them, each key's type, and under each key a string literal saying
what it means, as the API's models are written (api/schemas/). A value that is an object is a `TypedDict`
too, whose docstring says what it is. The API turns each registered form's shapes into the fields of its
`Workload`, `Queue` and `analyze` models (api/schemas/shapes.py), which forbid any key they do not declare.

`Time` and `Number` below are the two JSON types the standard library does not name.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated


class JsonType(Enum):
    """A mark on a shape's type (`Annotated[T, JsonType.X]`) for what the JSON schema says of it."""

    TIME = "time"  # an RFC 3339 UTC string, as domain/timefmt.py builds it: `format: date-time`
    NUMBER = "number"  # an int or a float, printed as built (300 stays 300, not 300.0): `type: number`


Time = Annotated[str, JsonType.TIME]
Number = Annotated[int | float, JsonType.NUMBER]
