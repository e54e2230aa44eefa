"""The forms' JSON shapes (domain/forms/shapes.py) as pydantic fields, and the models composed of them.

A form declares its workload keys and its queue-document sections as TypedDicts with a string literal under
each key; here they become fields of `Body` models (extra keys forbidden, every key described) placed where
services/queue_json.py places the form's JSON, so that a form added to the registry is documented in
/openapi.json without an edit to this package. A nested TypedDict becomes a model of its own name.
"""

from __future__ import annotations

import ast
import copy
import inspect
import operator
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping
from functools import cache, reduce
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import Field, create_model

from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.shapes import JsonType

from .common import Body, Number, Time

# A field as `create_model` takes it: its type and its FieldInfo (description, JSON schema marks).
FieldSpec = tuple[Any, Any]


def attribute_docs(cls: type) -> dict[str, str]:
    """Return key → the string literal under it in the class's source, cleaned as pydantic's
    `use_attribute_docstrings` cleans it (the source is read: a TypedDict keeps no such string)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def rebuilt(t: Any, convert: Callable[[Any], Any]) -> Any:
    """Return the type `t` with `convert` applied to its arguments: a list's item, a map's key and value, a
    union's members (a `Literal`, an `Annotated` or a plain type is returned as it is)."""
    origin, args = get_origin(t), get_args(t)
    if origin is None or origin is Literal or origin is Annotated or not args:
        return t
    converted = tuple(convert(a) for a in args)
    if converted == args:
        return t
    if origin is Union or origin is types.UnionType:
        return reduce(operator.or_, converted)
    return origin[converted]


def annotation(t: Any) -> Any:
    """Return the pydantic type of a shape's type: a TypedDict becomes its model, `Time` and `Number` the
    API's, through lists, maps and unions."""
    if get_origin(t) is Annotated:
        base, *marks = get_args(t)
        if JsonType.TIME in marks:
            return Time
        if JsonType.NUMBER in marks:
            return Number
        return annotation(base)
    if is_typeddict(t):
        return model_of(t)
    return rebuilt(t, annotation)


def swapped(t: Any, old: type, new: type) -> Any:
    """Return the type `t` with `new` wherever it names `old` (`list[old] | None` → `list[new] | None`)."""
    return new if t is old else rebuilt(t, lambda a: swapped(a, old, new))


def fields_of(shape: type) -> dict[str, FieldSpec]:
    """Return a shape's keys as fields, in its order, each described by the string under it."""
    docs = attribute_docs(shape)
    return {
        key: (annotation(t), Field(description=docs.get(key)))
        for key, t in get_type_hints(shape, include_extras=True).items()
    }


@cache
def model_of(shape: type) -> type[Body]:
    """Return the model of a nested shape: its name, its docstring, its fields (one per shape, so that
    /openapi.json names it once)."""
    model: type[Body] = create_model(  # type: ignore[call-overload]
        shape.__name__,
        __base__=Body,
        __doc__=inspect.cleandoc(shape.__doc__ or ""),
        __module__=shape.__module__,
        **fields_of(shape),
    )
    return model


def form_fields(shapes: Iterable[type | None]) -> dict[str, FieldSpec]:
    """Return the fields of the forms' shapes, form after form; a key two forms declare is an error."""
    out: dict[str, FieldSpec] = {}
    for shape in shapes:
        if shape is None:
            continue
        for key, spec in fields_of(shape).items():
            if key in out:
                raise ValueError(f"{shape.__name__} declares {key!r}, which another form declares")
            out[key] = spec
    return out


def workload_fields(forms: tuple[QueueForm, ...]) -> dict[str, FieldSpec]:
    return form_fields(f.workload_shape for f in forms)


def section_fields(forms: tuple[QueueForm, ...]) -> dict[str, FieldSpec]:
    return form_fields(f.queue_shape for f in forms)


def compose(
    name: str,
    common: type[Body],
    added: Mapping[str, FieldSpec],
    *,
    after: str | None = None,
    swap: tuple[type[Body], type[Body]] | None = None,
) -> type[Body]:
    """Return the model `name`: the fields of `common` in its order, the `added` ones right after the field
    `after`, and, when `swap` is (old, new), `new` wherever a field's type names `old` (the composed
    `Workload` where `common` names the common one). The model's docstring is `common`'s."""
    clash = sorted(set(added) & set(common.model_fields))
    if clash:
        raise ValueError(f"{name}: a form declares {clash}, which are common keys")
    if added and after not in common.model_fields:
        raise ValueError(f"{name}: no field {after!r} to put the forms' keys after")
    fields: dict[str, FieldSpec] = {}
    for key, info in common.model_fields.items():
        # A copy: the common model keeps its own FieldInfo whatever create_model does with this one.
        t = swapped(info.annotation, *swap) if swap is not None else info.annotation
        fields[key] = (t, copy.copy(info))
        if key == after:
            fields.update(added)
    model: type[Body] = create_model(  # type: ignore[call-overload]
        name, __base__=Body, __doc__=common.__doc__, __module__=common.__module__, **fields
    )
    return model
