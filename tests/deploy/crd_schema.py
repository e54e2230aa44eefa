"""Offline validation of custom resources against their CRD's openAPIV3Schema, the way the API server treats
them: structural schemas reject unknown fields (the server would prune them, silently losing configuration),
`x-kubernetes-preserve-unknown-fields` keeps them, `x-kubernetes-int-or-string` takes either, `nullable`
takes null, list-type map/set keys must be unique. CEL rules (`x-kubernetes-validations`) cannot be evaluated
here: an object reaching one fails with the rule named, rather than passing unchecked."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft4Validator, ValidationError
from jsonschema.validators import extend


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML as Go's sigs.k8s.io/yaml reads it: a bare `=` (a matchType enum value) is the string "=", not
    YAML 1.1's `!!value`."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

# Keys of an OpenAPI v3 schema node that hold one sub-schema, or a list of them.
_ONE = ("items", "additionalProperties", "not")
_MANY = ("anyOf", "allOf", "oneOf")


def _structural(node: dict[str, Any]) -> dict[str, Any]:
    out = dict(node)
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {k: _structural(v) for k, v in out["properties"].items()}
    for key in _ONE:
        if isinstance(out.get(key), dict):
            out[key] = _structural(out[key])
    for key in _MANY:
        if key in out:
            out[key] = [_structural(s) for s in out[key]]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
        and not out.get("x-kubernetes-embedded-resource")
    ):
        # Structural: a field the schema does not name would be pruned. (`metadata: {type: object}` names no
        # properties: ObjectMeta, which the server checks itself.)
        out["additionalProperties"] = False
    return out


def _cel(
    validator: Any, rules: list[dict[str, str]], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    for r in rules:
        yield ValidationError(f"CEL rule not evaluated offline: {r.get('rule')}")


def _map_keys(
    validator: Any, keys: list[str], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, list) and schema.get("x-kubernetes-list-type") == "map":
        seen = set()
        for item in instance:
            k = tuple(item.get(name) for name in keys) if isinstance(item, dict) else (item,)
            if k in seen:
                yield ValidationError(f"duplicate entry {dict(zip(keys, k, strict=True))} in a list-type map")
            seen.add(k)


def _list_type(validator: Any, kind: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if kind == "set" and isinstance(instance, list) and len({repr(i) for i in instance}) != len(instance):
        yield ValidationError("duplicate entries in a list-type set")


KubeValidator = extend(
    Draft4Validator,
    {
        "x-kubernetes-validations": _cel,
        "x-kubernetes-list-map-keys": _map_keys,
        "x-kubernetes-list-type": _list_type,
    },
)


class Crd:
    """One CRD file: its group, kind and a validator per served version."""

    def __init__(self, path: Path) -> None:
        doc = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 (a safe loader)
        assert doc["kind"] == "CustomResourceDefinition", path
        self.group = doc["spec"]["group"]
        self.kind = doc["spec"]["names"]["kind"]
        self.schemas = {
            v["name"]: _structural(v["schema"]["openAPIV3Schema"])
            for v in doc["spec"]["versions"]
            if v["served"]
        }

    def schema(self, version: str) -> dict[str, Any]:
        return copy.deepcopy(self.schemas[version])

    def errors(self, obj: dict[str, Any], *, schema: dict[str, Any] | None = None) -> list[str]:
        """Return the problems of `obj` (a whole object, or a part of one against `schema`), as paths."""
        if schema is None:
            group, _, version = obj["apiVersion"].partition("/")
            assert group == self.group and obj["kind"] == self.kind, (obj["apiVersion"], obj["kind"])
            schema = self.schemas[version]
        v = KubeValidator(schema)
        return sorted(
            f"{'.'.join(str(p) for p in e.absolute_path) or '<top>'}: {e.message}" for e in v.iter_errors(obj)
        )


@functools.cache
def load_crds(directory: Path) -> dict[str, Crd]:
    """Return {kind: Crd} of the CRD files in `directory`."""
    crds = [Crd(p) for p in sorted(directory.glob("*.yaml"))]
    return {c.kind: c for c in crds}
