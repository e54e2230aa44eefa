"""Users' regular expressions are matched by RE2, as Alertmanager matches them: in time linear in the label
whatever the pattern, with Go's syntax, and a pattern RE2 refuses is an error naming why."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from watchtower.domain.alerts.matchers import Matcher, MatcherError
from watchtower.domain.alerts.silences import Silence
from watchtower.domain.patterns import PatternError, anchored, searched
from watchtower.domain.queue_values import TrainingSelector
from watchtower.domain.records import Pod

ROOT = Path(__file__).parents[2]

# Python's backtracking `re` takes about 0.1 s on 11 characters of this and four times longer per two more.
CATASTROPHIC = "(.*.*)*X"


def _seconds(pattern: str, run: int) -> float:
    # 12 characters, distinct in every run (a pattern remembers its answers, which would hide the cost).
    labels = [f"ns-{run}{i:04d}-abc" for i in range(10)]
    m = Matcher.of("namespace", "=~", pattern)
    t0 = time.perf_counter()
    assert not any(m.matches({"namespace": v}) for v in labels)
    return time.perf_counter() - t0


def test_a_catastrophic_pattern_costs_what_a_trivial_one_costs() -> None:
    # Under a backtracking matcher each of these labels takes a second: a regression fails here in
    # seconds rather than hanging.
    trivial = min(_seconds("X", run) for run in range(3))
    hostile = min(_seconds(CATASTROPHIC, run) for run in range(3, 6))
    assert hostile <= 20 * trivial + 0.005, (hostile, trivial)


def test_a_30_character_label_returns_at_once_in_a_process_of_its_own() -> None:
    # A backtracking matcher would not finish (it holds the GIL, so nothing in this process could stop it):
    # a child process is killed at the timeout instead.
    code = (
        "import time\n"
        "from watchtower.domain.alerts.matchers import Matcher\n"
        "def run(p, k):\n"
        "    labels = [f'{k}{i:03d}-' + 'a' * 25 for i in range(200)]\n"
        "    m = Matcher.of('namespace', '=~', p)\n"
        "    t0 = time.perf_counter()\n"
        "    hits = sum(m.matches({'namespace': v}) for v in labels)\n"
        "    return time.perf_counter() - t0, hits\n"
        "trivial = min(run('X', k)[0] for k in range(3))\n"
        f"hostile, hits = min(run({CATASTROPHIC!r}, k) for k in range(3, 6))\n"
        "print(hostile, trivial, hits)\n"
    )
    assert len(f"{0}{0:03d}-" + "a" * 25) == 30
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"matching {CATASTROPHIC!r} against 30-character labels did not finish in 60 s")
    assert done.returncode == 0, done.stderr
    hostile, trivial, hits = done.stdout.split()
    assert hits == "0"
    assert float(hostile) <= 20 * float(trivial) + 0.005, (hostile, trivial)


def test_ordinary_patterns_match_as_alertmanager_anchors_them() -> None:
    team = Matcher.parse('team=~"vision|nlp"')
    assert team.matches({"team": "vision"}) and team.matches({"team": "nlp"})
    assert not team.matches({"team": "vision2"}) and not team.matches({"team": "my-nlp"})
    assert not team.matches({})  # a missing label is the empty string
    kube = Matcher.parse('namespace!~"kube-.*"')
    assert kube.matches({"namespace": "vision"}) and not kube.matches({"namespace": "kube-system"})
    assert Matcher.of("a", "=~", ".").matches({"a": "é"})  # a character, not a byte
    assert Matcher.of("a", "=~", "(?i)GPU").matches({"a": "gpu"})
    assert Matcher.of("a", "=~", "[[:digit:]]+").matches({"a": "0123"})
    # Go's `$` is the end of the text: Python's `re` also matched before a trailing newline.
    assert not Matcher.of("a", "=~", "x").matches({"a": "x\n"})
    # As Alertmanager compiles ^(?:value)$: an alternative stays inside the group.
    assert not Matcher.of("a", "=~", "x|y").matches({"a": "xy"})


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a)\\1", "invalid escape sequence: \\1"),  # backreference
        ("(?=a)a", "invalid perl operator: (?="),  # lookahead
        ("(?<!a)b", "invalid perl operator: (?<!"),  # lookbehind
        ("a{1001}", "invalid repetition size: {1001}"),
        ("a++", "bad repetition operator: ++"),  # possessive
        ("[z-a]", "invalid character class range: z-a"),
        ("(", "missing )"),
    ],
)
def test_a_pattern_re2_refuses_is_an_error_naming_why(pattern: str, reason: str) -> None:
    with pytest.raises(MatcherError) as e:
        Matcher.of("namespace", "=~", pattern)
    assert "RE2" in str(e.value) and reason in str(e.value) and repr(pattern) in str(e.value)
    with pytest.raises(MatcherError, match="RE2"):
        Matcher.parse(f'namespace!~"{pattern}"')
    with pytest.raises(PatternError):
        searched(pattern)


def test_a_stored_pattern_re2_refuses_matches_nothing_and_mutes_nothing() -> None:
    # Saved by a version that matched with Python's `re`: loaded, listed, but it no longer decides anything.
    for op in ("=~", "!~"):
        m = Matcher.stored("namespace", op, "(?!kube-).*")
        assert m.value == "(?!kube-).*" and str(m) == f'namespace{op}"(?!kube-).*"'
        assert not m.matches({"namespace": "vision"}) and not m.matches({"namespace": "kube-system"})
    s = Silence("s1", (Matcher.stored("namespace", "!~", "(?!x)"),), 0.0, 100.0, "me", "why", 0.0, 0.0)
    assert not s.mutes({"namespace": "vision"}, 50.0)
    assert Matcher.stored("namespace", "=~", "vision|nlp").matches({"namespace": "nlp"})
    with pytest.raises(MatcherError):
        Matcher.stored("bad name", "=~", "(?!x)")
    with pytest.raises(MatcherError):
        Matcher.stored("namespace", "~", "x")


def test_the_training_image_pattern_is_searched_by_re2() -> None:
    paddle = TrainingSelector(require_gpu=False, match_labels={}, image_pattern="paddlepaddle/paddle")
    assert paddle.matches(Pod("u", "ns", "p", 0.0, images=("busybox", "registry/paddlepaddle/paddle:2.6")))
    assert not paddle.matches(Pod("u", "ns", "p", 0.0, images=("busybox",)))

    # As the matchers (one Pattern class): no slower than a trivial pattern, on distinct images.
    def seconds(pattern: str, run: int) -> float:
        images = [(f"img-{run}{i:04d}:ab",) for i in range(10)]  # 12 characters, distinct in every run
        sel = TrainingSelector(require_gpu=False, match_labels={}, image_pattern=pattern)
        t0 = time.perf_counter()
        assert not any(sel.matches(Pod("u", "ns", "p", 0.0, images=im)) for im in images)
        return time.perf_counter() - t0

    trivial = min(seconds("X", run) for run in range(3))
    hostile = min(seconds(CATASTROPHIC, run) for run in range(3, 6))
    assert hostile <= 20 * trivial + 0.005, (hostile, trivial)


def test_answers_are_remembered_up_to_a_bound() -> None:
    p = anchored("[a-z]+-[0-9]+")
    for i in range(20_000):
        assert p.matches(f"team-{i}")
        assert not p.matches(f"Team-{i}")
    assert len(p._seen) <= 16_384
