"""Property-based tests: the parser and the decoder take anything and answer, never crash."""

from __future__ import annotations

import copy
import json
import random

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.domain.helpers import GPU_FULL, NS, T0, paddle_owner
from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.domain.messages.scheduler import PreemptionVerdict, parse_scheduling_message
from watchtower.domain.records import Event, Node, Pod
from watchtower.simulator import objects as o

REASONS = {
    "Insufficient nvidia.com/gpu": "Insufficient nvidia.com/gpu",
    "Insufficient cpu": "Insufficient cpu",
    "Insufficient memory": "Insufficient memory",
    "Too many pods": "Too many pods",
    "node(s) didn't match Pod's node affinity/selector": "node(s) didn't match Pod's node affinity/selector",
    "node(s) were unschedulable": "node(s) were unschedulable",
    "node(s) had untolerated taint(s)": "untolerated taint",
    "node(s) had taints that the pod didn't tolerate": "untolerated taint",
}
VERDICTS = {
    "": PreemptionVerdict.UNKNOWN,
    " preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod.": PreemptionVerdict.NO_VICTIMS,
    " preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.": PreemptionVerdict.NOT_HELPFUL,
    " preemption: not eligible due to preemptionPolicy=Never.": PreemptionVerdict.POLICY_NEVER,
}
taint_key = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}/)?[a-z0-9_.-]{1,20}", fullmatch=True)
taint_val = st.from_regex(r"[A-Za-z0-9_.-]{0,20}", fullmatch=True)


@st.composite
def reason_texts(draw):
    if draw(st.booleans()):
        text = draw(st.sampled_from(sorted(REASONS)))
        return text, REASONS[text]
    k, v = draw(taint_key), draw(taint_val)
    form = draw(
        st.sampled_from(
            ["had taint {{{k}: {v}}}, that the pod didn't tolerate", "had untolerated taint {{{k}: {v}}}"]
        )
    )
    return "node(s) " + form.format(k=k, v=v), "untolerated taint"


@given(
    pieces=st.lists(st.tuples(st.integers(1, 5000), reason_texts()), min_size=1, max_size=8),
    tail=st.sampled_from(sorted(VERDICTS)),
)
def test_generated_scheduler_messages_round_trip(pieces, tail):
    total = sum(n for n, _ in pieces)
    body = ", ".join(f"{n} {text}" for n, (text, _) in pieces)
    msg = f"0/{total} nodes are available: {body}.{tail.format(n=total)}"
    d = parse_scheduling_message(msg)
    assert d.recognised and not d.truncated
    assert d.total_nodes == total
    # One entry per reason, in the scheduler's order, nodes summed: taints of different keys are one
    # reason (issue 12 item 7), their words kept side by side.
    want: dict[str, tuple[int, str]] = {}
    for n, (text, norm) in pieces:
        seen = want.get(norm)
        want[norm] = (n, text) if seen is None else (seen[0] + n, f"{seen[1]}; {text}")
    assert [(r.nodes, r.reason, r.text) for r in d.reasons] == [
        (n, norm, text) for norm, (n, text) in want.items()
    ]
    assert d.preemption is VERDICTS[tail]


@given(st.text(max_size=2000))
def test_arbitrary_text_never_raises_and_is_kept(text):
    d = parse_scheduling_message(text)
    assert d.raw == text
    if not text.strip().startswith(("0/", "no nodes available")):
        assert not d.recognised
        assert all(r.reason == "other" for r in d.reasons)


@given(st.one_of(st.none(), st.integers(), st.binary(max_size=50), st.lists(st.integers(), max_size=3)))
def test_non_text_never_raises(value):
    parse_scheduling_message(value)


@given(st.integers(0, 1500))
def test_any_truncation_point_is_handled(cut):
    body = ", ".join(f"{i + 1} node(s) had untolerated taint {{zone-{i}: Ω}}" for i in range(40))
    msg = f"0/820 nodes are available: {body}. preemption: not eligible due to preemptionPolicy=Never."
    piece = msg.encode()[:cut].decode("utf-8", "ignore") + " ..."
    d = parse_scheduling_message(piece)
    assert d.truncated


# ---- the decoder ---------------------------------------------------------------------------------

DEC = ObjectDecoder(keep_annotations=frozenset({"note"}), annotation_limit=100)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)
REAL = {
    "pod": o.pod(
        name="llm-worker-0",
        namespace=NS,
        created=T0,
        owner=paddle_owner("llm"),
        annotations={"note": "hi"},
        conditions=[o.unschedulable(T0 + 1, GPU_FULL)],
        nominated_node="n1",
    ),
    "event": o.scheduler_event(
        namespace=NS,
        reason="Preempted",
        note="Preempted by pod x on node n",
        regarding={"kind": "Pod", "name": "a", "uid": "u"},
        at=T0,
        series_count=3,
        series_last=T0 + 60,
    ),
    "node": o.node("gpu-1", taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]),
}
RECORD = {"pod": Pod, "event": Event, "node": Node}


def decode(kind: str, data: bytes):
    try:
        return DEC.decode(kind.capitalize(), data)  # "pod" → the kind Pod
    except DecodeError:
        return None


@given(kind=st.sampled_from(sorted(REAL)), value=json_values)
def test_arbitrary_json_gives_a_record_or_decode_error(kind, value):
    out = decode(kind, json.dumps(value).encode())  # stdlib: integers past 64 bits too
    assert out is None or isinstance(out, RECORD[kind])


@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_give_a_record_or_decode_error(data):
    for kind in REAL:
        out = decode(kind, data)
        assert out is None or isinstance(out, RECORD[kind])


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(REAL)), seed=st.integers(0, 2**32), value=json_values)
def test_mutated_real_objects_give_a_record_or_decode_error(kind, seed, value):
    obj = copy.deepcopy(REAL[kind])
    paths = [p for p in _paths(obj) if p]
    path = random.Random(seed).choice(paths)
    node = obj
    for part in path[:-1]:
        node = node[part]
    if random.Random(seed + 1).random() < 0.3 and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    out = decode(kind, json.dumps(obj).encode())
    assert out is None or isinstance(out, RECORD[kind])


hostile = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=300)


@given(name=hostile, note=hostile, key=hostile)
def test_hostile_names_and_annotations_are_kept_as_text(name, note, key):
    obj = copy.deepcopy(REAL["pod"])
    obj["metadata"]["name"] = name
    obj["metadata"]["annotations"] = {"note": note * 50, key: note}
    p = DEC.decode("Pod", orjson.dumps(obj))
    assert p.name == name
    assert p.annotations == {"note": (note * 50)[:100]}


def test_huge_annotation_is_cut_and_huge_quantities_are_refused():
    obj = copy.deepcopy(REAL["pod"])
    obj["metadata"]["annotations"] = {"note": "x" * 5_000_000, "other": "y" * 5_000_000}
    assert len(DEC.decode("Pod", orjson.dumps(obj)).annotations["note"]) == 100
    for qty in ["1e999999", "1e9999999999", "9" * 5000, "1.2.3", "", "Infinity"]:
        obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = qty
        assert decode("pod", orjson.dumps(obj)) is None, qty


def test_deeply_nested_json_is_a_decode_error():
    assert decode("pod", b'{"metadata":' + b"[" * 100_000 + b"]" * 100_000 + b"}") is None
