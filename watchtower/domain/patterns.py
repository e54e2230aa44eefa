"""Regular expressions users write (silence and route matchers, the training image pattern), compiled and
matched the one way: by RE2, as Alertmanager and Prometheus match them (Go's regexp is RE2).

RE2 matches in time linear in the text whatever the pattern, so `(.*.*)*X`, which Python's backtracking
`re` takes minutes over on a 20-character label, costs what `X` costs. Its syntax is Go's: no
backreferences, no lookaround, repetitions up to {1000}; a pattern it refuses raises PatternError with
RE2's reason, for the API and the configuration check to report. `^` and `$` are the text's ends (no
trailing-newline allowance as in Python's `$`), as in Go.
"""

from __future__ import annotations

from functools import lru_cache

import re2

# A call into RE2 from Python costs about 5-10 µs (encoding, the wrapper's spans), ten times Python's `re`
# on a short label; the same label values come back tick after tick (each alert's `workload`, each pod's
# images), so each pattern remembers its answers for up to this many values, then starts over: more than
# a 10,000-alert storm's distinct values (bench/storm.py), about 1.5 MB at most per pattern.
_REMEMBERED = 16_384

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to its author, not printed on stderr
_OPTIONS.never_capture = True  # only whether it matches is asked


class PatternError(ValueError):
    """A pattern RE2 does not accept, with its reason."""


class Pattern:
    """A user's regular expression compiled by RE2; `matches(value)` answers in time linear in `value`."""

    __slots__ = ("_rx", "_seen", "text")

    def __init__(self, text: str, compiled: str) -> None:
        self.text = text  # as its author wrote it
        try:
            self._rx = re2.compile(compiled.encode("utf-8", "surrogatepass"), _OPTIONS)
        except re2.error as e:
            reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else e
            raise PatternError(f"{text!r} is not a regular expression RE2 accepts: {reason}") from None
        self._seen: dict[str, bool] = {}

    def matches(self, value: str) -> bool:
        hit = self._seen.get(value)
        if hit is None:
            # surrogatepass: a lone surrogate (never valid UTF-8) is matched as bytes, not an error.
            hit = self._rx.search(value.encode("utf-8", "surrogatepass")) is not None
            if len(self._seen) >= _REMEMBERED:
                self._seen.clear()
            self._seen[value] = hit
        return hit

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


@lru_cache(maxsize=256)
def anchored(text: str) -> Pattern:
    """Return `text` as a pattern the whole value must match: Alertmanager's and PromQL's `=~`, which
    compile `^(?:text)$`. Raise PatternError when RE2 refuses it."""
    return Pattern(text, f"^(?:{text})$")


@lru_cache(maxsize=256)
def searched(text: str) -> Pattern:
    """Return `text` as a pattern found anywhere in the value. Raise PatternError when RE2 refuses it."""
    return Pattern(text, text)
