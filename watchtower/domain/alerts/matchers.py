"""Label matchers as Alertmanager writes them: name="v", name!="v", name=~"re", name!~"re"."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from watchtower.domain.patterns import Pattern, PatternError, anchored

_TEXT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$", re.DOTALL)


class MatchOp(StrEnum):
    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


class MatcherError(ValueError):
    """A matcher that cannot be used, with the reason in plain words."""


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    op: MatchOp
    value: str
    _rx: Pattern | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, name: str, op: str, value: str) -> Matcher:
        """Return a matcher; raise MatcherError for an unknown operator or a regular expression RE2 refuses."""
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise MatcherError(f"{name!r} is not a label name")
        try:
            mop = MatchOp(op)
        except ValueError:
            raise MatcherError(f"{op!r} is not one of =, !=, =~, !~") from None
        rx = None
        if mop in (MatchOp.RE, MatchOp.NRE):
            try:
                rx = anchored(value)  # RE2, anchored at both ends, as Alertmanager matches
            except PatternError as e:
                raise MatcherError(str(e)) from None
        return cls(name, mop, value, rx)

    @classmethod
    def stored(cls, name: str, op: str, value: str) -> Matcher:
        """Return the matcher a store kept, as `of` does; one whose pattern RE2 refuses (saved by a version
        that matched with Python's `re`, which takes lookarounds and backreferences) matches no label set,
        so its silence mutes nothing rather than stopping every tick that reads the store."""
        try:
            return cls.of(name, op, value)
        except MatcherError:
            if op not in (MatchOp.RE, MatchOp.NRE):
                raise
            cls.of(name, MatchOp.EQ, "")  # a bad name is still an error
            return cls(name, MatchOp(op), value, None)

    @classmethod
    def parse(cls, text: str) -> Matcher:
        """Return the matcher written as `name="value"` (quotes optional); raise MatcherError."""
        m = _TEXT.match(text)
        if m is None:
            raise MatcherError(f'{text!r} is not a matcher: write name="value", name!=, name=~ or name!~')
        name, op, value = m.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        return cls.of(name, op, value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        # A missing label matches as the empty string, as in Alertmanager.
        v = labels.get(self.name, "")
        if self.op is MatchOp.EQ:
            return v == self.value
        if self.op is MatchOp.NE:
            return v != self.value
        if self._rx is None:
            return False  # a stored pattern RE2 refuses (`stored`): it matches nothing
        hit = self._rx.matches(v)
        return hit if self.op is MatchOp.RE else not hit

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op.value}"{escaped}"'


def all_match(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)
