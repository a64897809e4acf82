"""The Kubernetes protobuf decoder: wire format edge cases, a round trip through a test-only
encoder, bodies captured from real kubectl, and the schema table against kubectl's own tags."""

from __future__ import annotations

import base64
import json
import random
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent_testbed.sim import protobuf
from nodeagent_testbed.sim.protobuf import MAGIC, ProtobufError, decode, is_protobuf
from nodeagent_testbed.sim.protobuf_schema import (
    BOOL,
    BYTES,
    DOUBLE,
    INT32,
    INT64,
    KINDS,
    MAP,
    MESSAGE,
    SCHEMA,
    STRING,
    F,
)
from tests.unit.sim import kubectl_recorder
from tools import kubectl_schema

FIXTURES = Path(__file__).parent / "protobuf_fixtures"

# --- a tiny encoder, for tests only --------------------------------------------------------


def varint(n: int) -> bytes:
    """Plain varint; a negative number is its 64-bit two's complement (10 bytes)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def ld(number: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return tag(number, 2) + varint(len(raw)) + raw


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return ld(number, ld(1, key) + ld(2, value))


def envelope(api_version: str, kind: str, raw: bytes, *extra: bytes) -> bytes:
    type_meta = ld(1, api_version) + ld(2, kind)
    return MAGIC + ld(1, type_meta) + ld(2, raw) + b"".join(extra)


class Encoder:
    """JSON-shaped object -> wire bytes, driven by the same SCHEMA as the decoder.

    With `gogo`, zero non-pointer scalars and empty non-pointer messages are written as
    gogo-protobuf does; `rng` shuffles field order and picks packed or unpacked numerics.
    """

    def __init__(self, rng: random.Random | None = None, gogo: bool = True) -> None:
        self.rng = rng
        self.gogo = gogo

    def message(self, name: str, obj: Any) -> bytes:
        special = {
            "Time": self._time,
            "MicroTime": self._micro_time,
            "Quantity": self._quantity,
            "IntOrString": self._int_or_string,
            "FieldsV1": self._fields_v1,
        }.get(name)
        if special is not None:
            return special(obj)
        per_field = [self.field(number, f, obj) for number, f in SCHEMA[name].items()]
        if self.rng is None:
            return b"".join(b"".join(chunks) for chunks in per_field)
        # interleave the fields at random, each field's own elements staying in order
        turns = [i for i, chunks in enumerate(per_field) for _ in chunks]
        self.rng.shuffle(turns)
        queues = [iter(chunks) for chunks in per_field]
        return b"".join(next(queues[i]) for i in turns)

    def field(self, number: int, f: F, obj: dict[str, Any]) -> list[bytes]:
        if f.inline:
            return [ld(number, self.message(self._msg(f), obj))]
        if f.json not in obj:
            if not self.gogo or f.ptr or f.rep or f.kind == MAP:
                return []
            if f.kind == MESSAGE:
                return [ld(number, b"")]
            return [
                self.scalar(number, f.kind, {STRING: "", BYTES: "", BOOL: False}.get(f.kind, 0))
            ]
        value = obj[f.json]
        if f.kind == MAP:
            out = []
            for k, v in value.items():
                if f.value == MESSAGE:
                    v_bytes = ld(2, self.message(self._msg(f), v))
                else:
                    assert f.value is not None
                    v_bytes = self.scalar(2, f.value, v)
                out.append(ld(number, ld(1, k) + v_bytes))
            return out
        if f.kind == MESSAGE:
            items = value if f.rep else [value]
            return [ld(number, self.message(self._msg(f), v)) for v in items]
        if f.rep:
            if f.kind in (INT32, INT64, BOOL) and self.rng is not None and self.rng.random() < 0.5:
                return [ld(number, b"".join(varint(int(v)) for v in value))]  # packed
            return [self.scalar(number, f.kind, v) for v in value]
        return [self.scalar(number, f.kind, value)]

    @staticmethod
    def _msg(f: F) -> str:
        assert f.message is not None
        return f.message

    @staticmethod
    def scalar(number: int, kind: str, value: Any) -> bytes:
        if kind == STRING:
            return ld(number, value)
        if kind == BYTES:
            return ld(number, base64.b64decode(value))
        if kind == DOUBLE:
            return tag(number, 1) + struct.pack("<d", value)
        return vint(number, int(value))

    @staticmethod
    def _seconds(text: str) -> tuple[int, int]:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        delta = t - datetime(1970, 1, 1, tzinfo=UTC)
        return delta.days * 86400 + delta.seconds, delta.microseconds * 1000

    def _time(self, value: str | None) -> bytes:
        if value is None:
            return b""
        return vint(1, self._seconds(value)[0])

    def _micro_time(self, value: str | None) -> bytes:
        if value is None:
            return b""
        seconds, nanos = self._seconds(value)
        return vint(1, seconds) + vint(2, nanos)

    def _quantity(self, value: str) -> bytes:
        return ld(1, value)

    def _int_or_string(self, value: int | str) -> bytes:
        if isinstance(value, int):
            return vint(1, 0) + vint(2, value)
        return vint(1, 1) + ld(3, value)

    def _fields_v1(self, value: Any) -> bytes:
        return ld(1, json.dumps(value))


def encode(obj: dict[str, Any], **kw: Any) -> bytes:
    name = KINDS.get((obj["apiVersion"], obj["kind"]), obj["kind"])
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return envelope(obj["apiVersion"], obj["kind"], Encoder(**kw).message(name, body))


# --- is_protobuf -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/vnd.kubernetes.protobuf", True),
        ("Application/VND.Kubernetes.Protobuf; charset=binary", True),
        ("application/vnd.kubernetes.protobuf;stream=watch", True),
        ("application/json", False),
        ("application/vnd.kubernetes.protobuf+json", False),
        ("", False),
        (None, False),
    ],
)
def test_is_protobuf(content_type: str | None, expected: bool) -> None:
    assert is_protobuf(content_type) is expected


# --- hand-built wire bytes -------------------------------------------------------------------


def test_negative_int64_is_ten_byte_twos_complement() -> None:
    raw = b"\x08" + b"\xff" * 9 + b"\x01"  # gracePeriodSeconds = -1
    assert decode(envelope("v1", "DeleteOptions", raw)) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": -1,
    }
    lo, hi = -(1 << 63), (1 << 63) - 1
    for n in (lo, hi, 0):
        got = decode(envelope("v1", "DeleteOptions", vint(1, n)))
        assert got["gracePeriodSeconds"] == n


def test_negative_int32_sign_extended_or_truncated() -> None:
    ten = vint(1, -7)
    assert len(ten) == 11  # tag + 10 bytes, as Go writes a negative int32
    five = vint(1, (1 << 32) - 7)  # 5-byte form: the low 32 bits are what count
    for spec in (ten, five):
        got = decode(envelope("apps/v1", "Deployment", ld(2, spec)))
        assert got["spec"]["replicas"] == -7
    got = decode(envelope("apps/v1", "Deployment", ld(2, vint(1, (1 << 31) - 1))))
    assert got["spec"]["replicas"] == 2**31 - 1


def test_maps_entries_missing_parts_and_duplicates() -> None:
    meta = (
        entry(11, "app", "web")
        + ld(11, ld(2, "v-first") + ld(1, "k"))  # value before key
        + ld(11, ld(1, "nov"))  # no value: the zero value
        + entry(11, "app", "api")  # a repeated key: the last one wins
        + entry(12, "note", "x")
    )
    got = decode(envelope("v1", "Namespace", ld(1, meta)))
    assert got["metadata"] == {
        "labels": {"app": "api", "k": "v-first", "nov": ""},
        "annotations": {"note": "x"},
    }


def test_map_entry_with_unknown_field_is_refused() -> None:
    meta = ld(11, ld(1, "k") + ld(2, "v") + vint(3, 1))
    with pytest.raises(ProtobufError, match="map entry has no field number 3"):
        decode(envelope("v1", "Namespace", ld(1, meta)))


def test_repeated_strings_and_messages_keep_order() -> None:
    meta = ld(1, "ns") + ld(14, "a/fin") + ld(14, "b/fin") + ld(14, "")
    owner = ld(5, "apps/v1") + ld(1, "ReplicaSet") + ld(3, "rs") + ld(4, "u1") + vint(6, 1)
    meta += ld(13, owner) + ld(13, ld(1, "Node") + ld(3, "n") + ld(4, "u2"))
    got = decode(envelope("v1", "Namespace", ld(1, meta)))["metadata"]
    assert got["finalizers"] == ["a/fin", "b/fin", ""]
    assert got["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": "u1",
            "controller": True,
        },
        {"apiVersion": "", "kind": "Node", "name": "n", "uid": "u2"},  # no omitempty on those
    ]


def _pod_with_security_context(psc: bytes) -> dict[str, Any]:
    spec = ld(14, psc)
    result: dict[str, Any] = decode(envelope("v1", "Pod", ld(2, spec)))
    return result


def test_repeated_numbers_packed_and_unpacked() -> None:
    unpacked = vint(4, 1000) + vint(4, -1) + vint(4, 2**40)
    packed = ld(4, varint(1000) + varint(-1) + varint(2**40))
    for psc in (unpacked, packed, vint(4, 1000) + ld(4, varint(-1) + varint(2**40))):
        got = _pod_with_security_context(psc)
        assert got["spec"]["securityContext"] == {"supplementalGroups": [1000, -1, 2**40]}


def test_nested_eviction_with_delete_options() -> None:
    preconditions = ld(1, "uid-1") + ld(2, "42")
    options = vint(1, 0) + ld(2, preconditions) + vint(3, 0) + ld(4, "Foreground")
    options += ld(5, "All") + vint(6, 1)
    raw = ld(1, ld(1, "p1") + ld(3, "default")) + ld(2, options)
    assert decode(envelope("policy/v1", "Eviction", raw)) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p1", "namespace": "default"},
        "deleteOptions": {
            "gracePeriodSeconds": 0,  # pointers are kept when zero
            "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
            "orphanDependents": False,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
            "ignoreStoreReadErrorWithClusterBreakingPotential": True,
        },
    }


def test_delete_options_in_any_group_version() -> None:
    got = decode(envelope("apps/v1", "DeleteOptions", ld(4, "Orphan")))
    assert got == {"apiVersion": "apps/v1", "kind": "DeleteOptions", "propagationPolicy": "Orphan"}


def test_bytes_become_base64() -> None:
    raw = ld(1, ld(1, "s")) + entry(2, "bin", b"\x00\xff\xfe") + entry(2, "empty", b"")
    raw += ld(3, "Opaque") + vint(5, 1)
    assert decode(envelope("v1", "Secret", raw)) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"bin": "AP/+", "empty": ""},
        "type": "Opaque",
        "immutable": True,
    }


def test_bools_plain_pointer_and_non_canonical() -> None:
    spec = vint(11, 1) + vint(12, 0) + vint(13, 2) + vint(21, 0) + vint(30, 1)
    got = decode(envelope("v1", "Pod", ld(2, spec)))["spec"]
    assert got == {
        "hostNetwork": True,
        "hostIPC": True,  # any non-zero varint is true
        "automountServiceAccountToken": False,  # *bool: kept when false
        "enableServiceLinks": True,
    }


def test_time_is_rfc3339_seconds_and_empty_is_left_out() -> None:
    t = vint(1, 1_700_000_000) + vint(2, 123_456_789)  # Go's metav1.Time drops the nanos
    meta = ld(1, "x") + ld(8, t) + ld(9, b"")
    got = decode(envelope("v1", "Namespace", ld(1, meta)))["metadata"]
    assert got == {"name": "x", "creationTimestamp": "2023-11-14T22:13:20Z"}
    epoch = decode(envelope("v1", "Namespace", ld(1, ld(8, vint(1, 0)))))["metadata"]
    assert epoch == {"creationTimestamp": "1970-01-01T00:00:00Z"}
    old = decode(envelope("v1", "Namespace", ld(1, ld(8, vint(1, -62135596800)))))["metadata"]
    assert old == {"creationTimestamp": "0001-01-01T00:00:00Z"}


def test_time_out_of_range() -> None:
    with pytest.raises(ProtobufError, match="time out of range"):
        decode(envelope("v1", "Namespace", ld(1, ld(8, vint(1, 1 << 62)))))


def test_micro_time_keeps_microseconds() -> None:
    lease_spec = ld(1, "me") + ld(3, vint(1, 1_700_000_000) + vint(2, 123_456_789))
    got = decode(envelope("coordination.k8s.io/v1", "Lease", ld(2, lease_spec)))
    assert got["spec"] == {"holderIdentity": "me", "acquireTime": "2023-11-14T22:13:20.123456Z"}


def test_quantities_int_or_string_and_inline_structs() -> None:
    resources = ld(1, ld(1, "cpu") + ld(2, ld(1, "500m"))) + ld(2, ld(1, "memory") + ld(2, b""))
    container = ld(1, "c") + ld(8, resources)
    probe = ld(1, ld(2, ld(1, "/healthz") + ld(2, vint(1, 1) + ld(3, "http")))) + vint(2, 3)
    container += ld(10, probe)
    volume = ld(1, "data") + ld(2, ld(1, ld(1, "/srv") + ld(2, "Directory")))
    strategy = ld(1, "RollingUpdate") + ld(2, ld(1, vint(1, 0) + vint(2, 2)) + ld(2, b""))
    pod_spec = ld(2, container) + ld(1, volume)
    spec = ld(3, ld(2, pod_spec)) + ld(4, strategy)
    got = decode(envelope("apps/v1", "Deployment", ld(2, spec)))["spec"]
    assert got["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 2, "maxSurge": 0},
    }
    pod = got["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "data", "hostPath": {"path": "/srv", "type": "Directory"}}  # inline VolumeSource
    ]
    assert pod["containers"] == [
        {
            "name": "c",
            "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "0"}},
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": "http"},
                "initialDelaySeconds": 3,
            },
        }
    ]


def test_empty_quantity_string_is_refused() -> None:
    container = ld(1, "c") + ld(8, ld(1, ld(1, "cpu") + ld(2, ld(1, ""))))
    with pytest.raises(ProtobufError, match="empty quantity"):
        decode(envelope("v1", "Pod", ld(2, ld(2, container))))


def test_int_or_string_of_unknown_type_is_refused() -> None:
    spec = ld(1, vint(1, 7))
    with pytest.raises(ProtobufError, match="IntOrString of unknown type 7"):
        decode(envelope("policy/v1", "PodDisruptionBudget", ld(2, spec)))


def test_managed_fields_v1_is_json() -> None:
    fields: dict[str, Any] = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
    mf = ld(1, "kubectl") + ld(2, "Update") + ld(3, "v1") + ld(6, "FieldsV1")
    mf += ld(7, ld(1, json.dumps(fields))) + ld(4, vint(1, 1_700_000_000))
    got = decode(envelope("v1", "ConfigMap", ld(1, ld(17, mf))))["metadata"]["managedFields"]
    assert got == [
        {
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2023-11-14T22:13:20Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
    ]
    with pytest.raises(ProtobufError, match="fieldsV1 is not JSON"):
        decode(envelope("v1", "ConfigMap", ld(1, ld(17, ld(7, ld(1, "{nope"))))))


def test_messages_sent_twice_merge_and_scalars_last_wins() -> None:
    raw = ld(1, ld(1, "first") + entry(11, "a", "1")) + ld(1, ld(1, "second") + entry(11, "b", "2"))
    raw += ld(3, "Opaque") + ld(3, "kubernetes.io/tls")
    got = decode(envelope("v1", "Secret", raw))
    assert got["metadata"] == {"name": "second", "labels": {"a": "1", "b": "2"}}
    assert got["type"] == "kubernetes.io/tls"


def test_double_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    # no double in today's table; the wire type is still read right, packed or not
    schema = {1: F("x", DOUBLE, ptr=True), 2: F("xs", DOUBLE, rep=True), 3: F("y", DOUBLE)}
    monkeypatch.setitem(SCHEMA, "Doubles", schema)
    data = tag(1, 1) + struct.pack("<d", -0.0) + tag(2, 1) + struct.pack("<d", 1.5)
    data += ld(2, struct.pack("<dd", 2.5, -1e300)) + tag(3, 1) + struct.pack("<d", 0.0)
    assert protobuf._message("Doubles", data, "Doubles") == {"x": -0.0, "xs": [1.5, 2.5, -1e300]}


# --- refusals ---------------------------------------------------------------------------------


def test_unknown_field_number_names_message_and_number() -> None:
    container = ld(1, "c") + vint(99, 1)
    body = envelope("apps/v1", "Deployment", ld(2, ld(3, ld(2, ld(2, container)))))
    with pytest.raises(ProtobufError) as e:
        decode(body)
    assert "message Container has no field number 99" in str(e.value)
    assert "Deployment.spec.template.spec.containers[0]" in str(e.value)
    with pytest.raises(ProtobufError, match="message ObjectMeta has no field number 16"):
        decode(envelope("v1", "Namespace", ld(1, ld(16, "cluster"))))


def test_unknown_message_type_and_kind() -> None:
    with pytest.raises(ProtobufError, match="unknown message type Nope"):
        protobuf._message("Nope", b"", "x")
    with pytest.raises(ProtobufError, match=r"unsupported kind Widget of example\.com/v1"):
        decode(envelope("example.com/v1", "Widget", b""))
    with pytest.raises(ProtobufError, match="unsupported kind Deployment of apps/v1beta1"):
        decode(envelope("apps/v1beta1", "Deployment", b""))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "no k8s"),
        (b'{"kind": "Namespace"}', "no k8s"),
        (MAGIC, "no apiVersion or kind"),
        (envelope("v1", "", b""), "no apiVersion or kind"),
        (envelope("v1", "Namespace", b"", ld(3, "gzip")), "unsupported contentEncoding 'gzip'"),
        (envelope("v1", "Namespace", b"", ld(4, "application/json")), "unsupported contentType"),
        (envelope("v1", "Namespace", b"", vint(5, 1)), "Unknown has no field number 5"),
        (MAGIC + ld(1, ld(3, "x")), "TypeMeta has no field number 3"),
        (MAGIC + b"\x0a\x05ab", "length 5 past the end"),
        (MAGIC + b"\x08\x80", "truncated varint"),
        (MAGIC + b"\x08" + b"\x80" * 10 + b"\x01", "varint longer than 10 bytes"),
        (MAGIC + b"\x0b", "unsupported wire type 3"),  # groups
        (MAGIC + b"\x00", "invalid field number 0"),
        (MAGIC + b"\x0d\x00\x00", "truncated fixed-width value"),
        (envelope("v1", "Namespace", vint(1, 5)), r"Namespace.metadata: wire type 0 for a bytes"),
        (envelope("v1", "Namespace", ld(1, vint(1, 5))), "wire type 0 for a string"),
        (envelope("v1", "Namespace", ld(1, ld(1, b"\xff"))), "string is not UTF-8"),
        (envelope("v1", "Pod", ld(2, ld(14, ld(4, b"\x80")))), "truncated varint"),
    ],
)
def test_malformed_bodies_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode(body)


def test_protobuf_error_is_a_value_error() -> None:
    assert issubclass(ProtobufError, ValueError)


# --- round trip through the test encoder ---------------------------------------------------

_MAX_DEPTH = 3
_SECONDS = st.integers(-62135596800, 253402300799)  # years 0001 to 9999


def _rfc3339(seconds: int, micros: int | None = None) -> str:
    t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=micros or 0)
    text = t.isoformat(timespec="microseconds" if micros is not None else "seconds")
    return text.replace("+00:00", "Z")


_SPECIAL_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "Time": _SECONDS.map(_rfc3339),
    "MicroTime": st.tuples(_SECONDS, st.integers(0, 999_999)).map(lambda t: _rfc3339(*t)),
    "Quantity": st.from_regex(r"\A(0|[1-9][0-9]{0,4})(m|k|Ki|Mi|Gi)?\Z"),
    "IntOrString": st.one_of(st.integers(-(2**31), 2**31 - 1), st.text(max_size=5)),
    "FieldsV1": st.recursive(
        st.just({}), lambda c: st.dictionaries(st.text(max_size=4), c, max_size=2), max_leaves=4
    ),
}
_SCALAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    STRING: st.text(max_size=6),
    BYTES: st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
    BOOL: st.booleans(),
    INT32: st.integers(-(2**31), 2**31 - 1),
    INT64: st.integers(-(2**63), 2**63 - 1),
}
_ZERO = {STRING: "", BYTES: "", BOOL: False, INT32: 0, INT64: 0}


def _value(draw: st.DrawFn, kind: str, message: str | None, depth: int) -> Any:
    if kind == MESSAGE:
        assert message is not None
        if message in _SPECIAL_VALUES:
            return draw(_SPECIAL_VALUES[message])
        return _object(draw, message, depth + 1)
    return draw(_SCALAR_VALUES[kind])


def _object(draw: st.DrawFn, name: str, depth: int) -> dict[str, Any]:
    """A JSON-shaped object in the canonical form decode() gives."""
    out: dict[str, Any] = {}
    deep = depth >= _MAX_DEPTH
    for f in SCHEMA[name].values():
        if f.inline:
            assert f.message is not None
            out.update(_object(draw, f.message, depth + 1))
            continue
        if f.kind == MAP:
            if not deep and draw(st.booleans()):
                keys = draw(st.lists(st.text(max_size=4), min_size=1, max_size=2, unique=True))
                out[f.json] = {k: _value(draw, f.value or STRING, f.message, depth) for k in keys}
        elif f.rep:
            if not deep and draw(st.booleans()):
                n = draw(st.integers(1, 2))
                out[f.json] = [_value(draw, f.kind, f.message, depth) for _ in range(n)]
        elif f.kind == MESSAGE:
            if f.message == "Time" and not f.ptr:
                if draw(st.booleans()):  # an absent Time is the zero time
                    out[f.json] = _value(draw, f.kind, f.message, depth)
            elif not f.ptr or (not deep and draw(st.booleans())):
                out[f.json] = _value(draw, f.kind, f.message, depth)
        elif f.ptr:
            if draw(st.booleans()):
                out[f.json] = _value(draw, f.kind, None, depth)
        elif f.req:
            out[f.json] = _value(draw, f.kind, None, depth)
        elif draw(st.booleans()):
            value = _value(draw, f.kind, None, depth)
            if value != _ZERO[f.kind]:
                out[f.json] = value
    return out


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), name=st.sampled_from(sorted(SCHEMA)), gogo=st.booleans())
def test_round_trip_every_message(data: st.DataObject, name: str, gogo: bool) -> None:
    obj = data.draw(st.composite(lambda draw: _object(draw, name, 0))())
    rng = data.draw(st.randoms(use_true_random=False))
    wire = Encoder(rng=rng, gogo=gogo).message(name, obj)
    assert protobuf._message(name, wire, name) == obj


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
def test_round_trip_top_level_kinds(data: st.DataObject, kind: tuple[str, str]) -> None:
    api_version, k = kind
    obj = data.draw(st.composite(lambda draw: _object(draw, KINDS[kind], 0))())
    whole = {"apiVersion": api_version, "kind": k, **obj}
    assert decode(encode(whole)) == whole


# --- bodies captured from real kubectl -------------------------------------------------------

_STORED = sorted(p.stem for p in FIXTURES.glob("*.pb"))
_NOT_DRY_RUN: dict[str, dict[str, Any] | str] = {
    "deleteoptions_grace0": {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
    "deleteoptions_default": {"apiVersion": "v1", "kind": "DeleteOptions"},
    "job": "unsupported kind Job of batch/v1",
}


def _check(name: str, body: bytes, dry_run: dict[str, Any] | None) -> None:
    expected = _NOT_DRY_RUN.get(name, dry_run)
    if isinstance(expected, str):
        with pytest.raises(ProtobufError, match=expected):
            decode(body)
    else:
        assert decode(body) == expected


def test_every_case_has_a_stored_fixture() -> None:
    assert sorted(c.name for c in kubectl_recorder.CASES) == _STORED
    assert set(_NOT_DRY_RUN) == {c.name for c in kubectl_recorder.CASES if not c.dry_run}


@pytest.mark.parametrize("name", _STORED)
def test_stored_kubectl_body(name: str) -> None:
    """Bodies kubectl 1.37 sent, against what `kubectl ... --dry-run=client -o json` printed."""
    body = (FIXTURES / f"{name}.pb").read_bytes()
    assert body.startswith(MAGIC)
    expected_file = FIXTURES / f"{name}.json"
    _check(name, body, json.loads(expected_file.read_text()) if expected_file.exists() else None)


@pytest.mark.parametrize("case", kubectl_recorder.CASES, ids=lambda c: c.name)
async def test_live_kubectl_body(case: kubectl_recorder.Case, tmp_path: Path) -> None:
    """The installed kubectl, now: it sends protobuf, and decode() gives its JSON form."""
    request = await kubectl_recorder.capture(case, tmp_path)
    assert is_protobuf(request.content_type), request.content_type
    dry_run = await kubectl_recorder.dry_run(case, tmp_path) if case.dry_run else None
    _check(case.name, request.body, dry_run)


# --- the table against kubectl's own struct tags ------------------------------------------


def test_schema_is_generated_from_the_installed_kubectl() -> None:
    """protobuf_schema.py is exactly what kubectl_schema generates from the kubectl binary;
    regenerate it with `python -m tools.kubectl_schema > <that file>`."""
    path = Path(protobuf.__file__).with_name("protobuf_schema.py")
    assert path.read_text() == kubectl_schema.generate()


def test_schema_spot_checks_against_generated_proto() -> None:
    """A few field numbers read off the published generated.proto files by hand."""
    assert SCHEMA["ObjectMeta"][8] == F("creationTimestamp", MESSAGE, "Time")
    assert SCHEMA["ObjectMeta"][17].json == "managedFields"
    assert SCHEMA["OwnerReference"][5].json == "apiVersion"
    assert SCHEMA["DeleteOptions"][1] == F("gracePeriodSeconds", INT64, ptr=True)
    assert SCHEMA["DeleteOptions"][2] == F("preconditions", MESSAGE, "Preconditions", ptr=True)
    assert SCHEMA["Eviction"] == {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("deleteOptions", MESSAGE, "DeleteOptions", ptr=True),
    }
    assert SCHEMA["PodSpec"][9].json == "serviceAccount"
    assert SCHEMA["PodSpec"][10].json == "nodeName"
    assert SCHEMA["PodSpec"][20].json == "initContainers"
    assert SCHEMA["Container"][8] == F("resources", MESSAGE, "ResourceRequirements")
    assert SCHEMA["ResourceRequirements"][1] == F("limits", MAP, "Quantity", value=MESSAGE)
    assert SCHEMA["ISCSIVolumeSource"][11].json == "chapAuthSession"
    assert SCHEMA["HTTPGetAction"][2] == F("port", MESSAGE, "IntOrString")
    assert SCHEMA["StatefulSetSpec"][8] == F("revisionHistoryLimit", INT32, ptr=True)
    assert 8 not in SCHEMA["DeploymentSpec"]  # rollbackTo, extensions/v1beta1 only
