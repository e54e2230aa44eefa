"""Fleet mode: the same expressions, keeping the label that tells clusters apart.

Many clusters reach one metrics engine (Thanos, Mimir, VictoriaMetrics) with a `cluster` label each
Prometheus adds. An expression written for one cluster mixes them there: `sum by (team) (...)` adds team
"vision" of cluster a to team "vision" of cluster b, and `x and on (namespace, pod) y` joins a pod of one
cluster with the same-named pod of another. `keep_label` rewrites an expression so that every aggregation
keeps the label (`sum (x)` -> `sum by (cluster) (x)`, `by (team)` -> `by (cluster, team)`) and every
`on (...)` matches on it; `ignoring (...)` and `without (...)` keep it already. `narrow` adds a matcher (a
Grafana variable's, `cluster=~"$cluster"`) to every selector.

Both work on PromQL text rather than on each builder, so that every builder, the hand-written expressions of
the rules and dashboards included, gets the same treatment and none can be forgotten; with fleet mode off
they are not called and the expressions are the single-cluster ones, byte for byte.

The text is read token by token (strings, `{...}` matchers and `[...]` ranges are skipped as wholes), which
is enough for the expressions Watchtower builds: it is not a general PromQL parser.
"""

from __future__ import annotations

import re

# Aggregation operators: the ones an expression may name without `by`, where fleet mode adds it.
AGGREGATIONS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "topk",
        "bottomk",
        "quantile",
    }
)
# Keywords followed by a list of label names in parentheses.
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = _LABEL_LISTS | {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<variable>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _tokens(expr: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "punct", m.group()) for m in _TOKEN.finditer(expr)]


def _next(tokens: list[tuple[str, str]], i: int) -> int:
    """Return the index of the first non-space token at or after `i` (len when none)."""
    while i < len(tokens) and tokens[i][0] == "space":
        i += 1
    return i


def _closing(tokens: list[tuple[str, str]], i: int, open_: str, close: str) -> int:
    """Return the index of the token closing the bracket opened at `i`."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] == ("punct", open_):
            depth += 1
        elif tokens[j] == ("punct", close):
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {open_!r} in PromQL")


def _label_list(tokens: list[tuple[str, str]], i: int) -> tuple[int, list[str]]:
    """Return (index of the closing parenthesis, the label names) of the list whose `(` is at `i`."""
    end = _closing(tokens, i, "(", ")")
    return end, [t for kind, t in tokens[i + 1 : end] if kind == "name"]


def _with_labels(names: list[str], keep: tuple[str, ...]) -> str:
    return "(" + ", ".join([*(k for k in keep if k not in names), *names]) + ")"


def keep_label(expr: str, *keep: str) -> str:
    """Return `expr` with the labels `keep` in every aggregation's `by (...)` (one added to an aggregation
    without it) and every `on (...)`; raise ValueError where `without`/`ignoring` would drop one."""
    if not keep:
        return expr
    tokens = _tokens(expr)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "punct" and text in "{[":
            end = _closing(tokens, i, text, "}" if text == "{" else "]")
            out.extend(t for _, t in tokens[i : end + 1])
            i = end + 1
            continue
        if kind == "name" and text in _LABEL_LISTS:
            j = _next(tokens, i + 1)
            end, names = _label_list(tokens, j)
            if text in ("by", "on"):
                out.extend(t for _, t in tokens[i:j])
                out.append(_with_labels(names, keep))
            elif text in ("without", "ignoring") and any(k in names for k in keep):
                raise ValueError(f"`{text}` drops a label fleet mode keeps ({', '.join(keep)}): {expr}")
            else:
                out.extend(t for _, t in tokens[i : end + 1])
            i = end + 1
            continue
        if kind == "name" and text in AGGREGATIONS:
            j = _next(tokens, i + 1)
            if j < len(tokens) and tokens[j] == ("punct", "("):
                end = _closing(tokens, j, "(", ")")
                k = _next(tokens, end + 1)
                if k < len(tokens) and tokens[k][1] in ("by", "without"):
                    out.append(text)  # `sum (x) by (y)`: the label list after it gets `keep`
                else:
                    gap = "" if j > i + 1 else " "
                    out.append(f"{text} by {_with_labels([], keep)}{gap}")
                i += 1
                continue
        out.append(text)
        i += 1
    return "".join(out)


def narrow(expr: str, matcher: str) -> str:
    """Return `expr` with `matcher` (text such as `cluster=~"$cluster"`) inside every selector's braces."""
    tokens = _tokens(expr)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "punct" and text == "[":
            end = _closing(tokens, i, "[", "]")
            out.extend(t for _, t in tokens[i : end + 1])
            i = end + 1
            continue
        if kind == "punct" and text == "{":  # a selector without a metric name
            out.append(_braces_with(tokens, i, matcher))
            i = _closing(tokens, i, "{", "}") + 1
            continue
        if kind == "name" and text.lower() in _KEYWORDS:
            if text in _LABEL_LISTS:
                j = _next(tokens, i + 1)
                end, _ = _label_list(tokens, j)
                out.extend(t for _, t in tokens[i : end + 1])
                i = end + 1
                continue
            out.append(text)
            i += 1
            if text == "offset":  # its duration (`5m`, `-1h30m`) reads as numbers and names: copy it
                while i < len(tokens) and (tokens[i][0] in ("space", "number") or tokens[i][1] == "-"):
                    out.append(tokens[i][1])
                    i += 1
                    if i < len(tokens) and tokens[i - 1][0] == "number" and tokens[i][0] == "name":
                        out.append(tokens[i][1])
                        i += 1
            continue
        if kind == "name":
            j = _next(tokens, i + 1)
            following = tokens[j][1] if j < len(tokens) else ""
            if following == "(" or text in AGGREGATIONS:  # a function or an aggregation
                out.append(text)
                i += 1
                continue
            out.append(text)
            if following == "{":
                out.extend(t for _, t in tokens[i + 1 : j])
                out.append(_braces_with(tokens, j, matcher))
                i = _closing(tokens, j, "{", "}") + 1
            else:
                out.append("{" + matcher + "}")
                i += 1
            continue
        out.append(text)
        i += 1
    return "".join(out)


def _braces_with(tokens: list[tuple[str, str]], i: int, matcher: str) -> str:
    end = _closing(tokens, i, "{", "}")
    inner = "".join(t for _, t in tokens[i + 1 : end]).strip()
    return "{" + (f"{inner},{matcher}" if inner else matcher) + "}"


def label_values_query(query: str, matcher: str) -> str:
    """Return a Grafana `label_values(selector, label)` variable query with `matcher` in its selector."""
    m = re.fullmatch(r"label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)", query.strip(), re.DOTALL)
    if m is None:
        raise ValueError(f"not a label_values(selector, label) query: {query!r}")
    return f"label_values({narrow(m.group(1), matcher)}, {m.group(2)})"
