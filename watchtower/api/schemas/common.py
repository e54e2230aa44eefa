"""What every response body shares: the base model, the time and number types, the error body."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

# The builders' values pass through unchanged: an int stays an int (a `float` field would print 300.0).
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]
# RFC 3339 UTC, built by the presenters (second precision in the queue documents, milliseconds in the
# Alertmanager-shaped ones); kept as the string they built.
Time = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class Body(BaseModel):
    """A response body (or part of one) with every key declared and described.

    `extra="forbid"`: a key a presenter returns but no model declares is an error, not a silent drop, so
    /openapi.json cannot fall behind the JSON. The attribute docstrings are the field descriptions.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Problem(Body):
    """An error: what is wrong and what to change."""

    detail: str
    """a sentence saying what to change (an unknown tier lists the tiers, ...)"""
