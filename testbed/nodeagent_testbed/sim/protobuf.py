"""Decode Kubernetes protobuf request bodies into the JSON-shaped objects the API takes.

client-go's typed clientsets, and so kubectl's `create deployment|namespace|configmap|...`
and its DELETE bodies, send `Content-Type: application/vnd.kubernetes.protobuf` with no JSON
fallback (kubernetes/kubernetes#86253). Such a body is the 4-byte magic b"k8s\\x00" and a
runtime.Unknown message:

    1 typeMeta {1 apiVersion, 2 kind}   2 raw (the object's own message)
    3 contentEncoding                   4 contentType

decode() returns what the API server would make of it: the object that gogo-protobuf would
unmarshal, as encoding/json would write it, less any nulls. So scalars without omitempty are
present even when zero (ContainerPort.containerPort), pointers are kept whenever sent
(DeleteOptions.gracePeriodSeconds: 0), non-pointer structs are always there ("strategy": {}),
bytes are base64, Time is RFC 3339 in UTC (an empty Time, as kubectl sends for
creationTimestamp, is left out), Quantity is its string and IntOrString its int or string.

The protobuf wire format is implemented here; the messages come from the table in
nodeagent_testbed.sim.protobuf_schema, generated from kubectl's own struct tags. A field number a
known message does not have, or a message not in the table, raises ProtobufError: data is
never dropped silently.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

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

MEDIA_TYPE: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"

# wire types
VARINT: Final = 0
I64: Final = 1
LEN: Final = 2
I32: Final = 5

_MAX_FIELD: Final = (1 << 29) - 1

# Messages with a hand-written protobuf form (apimachinery's generated.proto files); each is
# turned into its JSON value by a function of _SPECIAL below.
_HANDWRITTEN: Final[dict[str, dict[int, F]]] = {
    "runtime.Unknown": {
        1: F("typeMeta", MESSAGE, "runtime.TypeMeta"),
        2: F("raw", BYTES),
        3: F("contentEncoding", STRING),
        4: F("contentType", STRING),
    },
    "runtime.TypeMeta": {1: F("apiVersion", STRING), 2: F("kind", STRING)},
    "Time": {1: F("seconds", INT64), 2: F("nanos", INT32)},
    "MicroTime": {1: F("seconds", INT64), 2: F("nanos", INT32)},
    "Quantity": {1: F("string", STRING)},
    "IntOrString": {1: F("type", INT64), 2: F("intVal", INT32), 3: F("strVal", STRING)},
    "FieldsV1": {1: F("Raw", BYTES)},
}

_ZERO: Final[dict[str, Any]] = {
    STRING: "",
    BYTES: b"",
    BOOL: False,
    INT32: 0,
    INT64: 0,
    DOUBLE: 0.0,
}


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf object this decoder knows."""


def is_protobuf(content_type: str | None) -> bool:
    """Whether a Content-Type header names the Kubernetes protobuf media type."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == MEDIA_TYPE


def decode(body: bytes) -> dict[str, Any]:
    """The JSON-shaped object of a Kubernetes protobuf body, with apiVersion and kind."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body: no k8s\\x00 prefix")
    envelope = _collect("runtime.Unknown", bytes(body[len(MAGIC) :]), "Unknown")
    meta = _collect("runtime.TypeMeta", envelope.message(1), "Unknown.typeMeta")
    api_version, kind = meta.scalar(1), meta.scalar(2)
    encoding, content_type = envelope.scalar(3), envelope.scalar(4)
    if encoding:
        raise ProtobufError(f"unsupported contentEncoding {encoding!r}")
    if content_type and not is_protobuf(content_type):
        raise ProtobufError(f"unsupported contentType {content_type!r}")
    if not api_version or not kind:
        raise ProtobufError("the body's typeMeta has no apiVersion or kind")
    message = KINDS.get((api_version, kind))
    if message is None and kind == "DeleteOptions":
        message = "DeleteOptions"  # a typed client sends it in its own group's version
    if message is None:
        raise ProtobufError(f"unsupported kind {kind} of {api_version}")
    obj = _message(message, envelope.scalar(2) or b"", kind)
    return {"apiVersion": api_version, "kind": kind, **obj}


# --- wire format -------------------------------------------------------------------------


def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = 0
    for i in range(10):
        if pos >= len(buf):
            raise ProtobufError(f"{where}: truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos
    raise ProtobufError(f"{where}: varint longer than 10 bytes")


def _fields(buf: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of a message, in wire order."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        if not 0 < number <= _MAX_FIELD:
            raise ProtobufError(f"{where}: invalid field number {number}")
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos, where)
        elif wire in (I64, I32):
            size = 8 if wire == I64 else 4
            if pos + size > end:
                raise ProtobufError(f"{where}: field {number}: truncated fixed-width value")
            value = int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        elif wire == LEN:
            size, pos = _varint(buf, pos, where)
            if pos + size > end:
                raise ProtobufError(f"{where}: field {number}: length {size} past the end")
            value = buf[pos : pos + size]
            pos += size
        else:
            raise ProtobufError(f"{where}: field {number}: unsupported wire type {wire}")
        yield number, wire, value


def _scalar(kind: str, wire: int, value: int | bytes, where: str) -> Any:
    expected = {STRING: LEN, BYTES: LEN, DOUBLE: I64}.get(kind, VARINT)
    if wire != expected:
        raise ProtobufError(f"{where}: wire type {wire} for a {kind} field")
    if kind == STRING:
        assert isinstance(value, bytes)
        try:
            return value.decode()
        except UnicodeDecodeError as e:
            raise ProtobufError(f"{where}: string is not UTF-8") from e
    if kind == BYTES:
        return value
    assert isinstance(value, int)
    if kind == BOOL:
        return value != 0
    if kind == INT32:  # a negative int32 is sign-extended to 10 bytes; keep the low 32 bits
        value &= 0xFFFF_FFFF
        return value - (1 << 32) if value >= 1 << 31 else value
    if kind == INT64:  # two's complement
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == DOUBLE:
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    raise ProtobufError(f"{where}: unknown scalar kind {kind}")


def _packed(kind: str, data: bytes, where: str) -> list[Any]:
    out = []
    pos = 0
    while pos < len(data):
        if kind == DOUBLE:
            if pos + 8 > len(data):
                raise ProtobufError(f"{where}: truncated packed double")
            out.append(_scalar(kind, I64, int.from_bytes(data[pos : pos + 8], "little"), where))
            pos += 8
        else:
            value, pos = _varint(data, pos, where)
            out.append(_scalar(kind, VARINT, value, where))
    return out


# --- messages ----------------------------------------------------------------------------


def _schema(name: str, where: str) -> dict[int, F]:
    schema = SCHEMA.get(name) or _HANDWRITTEN.get(name)
    if schema is None:
        raise ProtobufError(f"{where}: unknown message type {name}")
    return schema


def _where(where: str, f: F) -> str:
    return f"{where}.{f.json}" if f.json else where


@dataclass
class _Fields:
    """The fields of one message as read off the wire, before JSON shaping."""

    scalars: dict[int, Any] = field(default_factory=dict)  # last one wins
    lists: dict[int, list[Any]] = field(default_factory=dict)
    maps: dict[int, dict[str, Any]] = field(default_factory=dict)
    parts: dict[int, list[bytes]] = field(default_factory=dict)  # a message sent twice merges

    def scalar(self, number: int) -> Any:
        return self.scalars.get(number)

    def message(self, number: int) -> bytes:
        return b"".join(self.parts.get(number, ()))


def _collect(name: str, data: bytes, where: str) -> _Fields:
    schema = _schema(name, where)
    got = _Fields()
    for number, wire, value in _fields(data, where):
        f = schema.get(number)
        if f is None:
            raise ProtobufError(
                f"{where}: message {name} has no field number {number} (wire type {wire})"
            )
        here = _where(where, f)
        if f.kind == MAP:
            key, val = _map_entry(f, _scalar(BYTES, wire, value, here), here)
            got.maps.setdefault(number, {})[key] = val
        elif f.kind == MESSAGE:
            data = _scalar(BYTES, wire, value, here)
            if f.rep:
                items = got.lists.setdefault(number, [])
                items.append(_value(_msg(f, here), data, f"{here}[{len(items)}]"))
            else:
                got.parts.setdefault(number, []).append(data)
        elif f.rep:
            items = got.lists.setdefault(number, [])
            if wire == LEN and f.kind not in (STRING, BYTES):
                items.extend(_packed(f.kind, _scalar(BYTES, wire, value, here), here))
            else:
                items.append(_json_scalar(f.kind, _scalar(f.kind, wire, value, here)))
        else:
            got.scalars[number] = _scalar(f.kind, wire, value, here)
    return got


def _msg(f: F, where: str) -> str:
    if f.message is None:
        raise ProtobufError(f"{where}: message field without a message type")
    return f.message


def _map_entry(f: F, data: bytes, where: str) -> tuple[str, Any]:
    """A map entry is a message {1 key, 2 value}; keys are strings in the Kubernetes API."""
    key: str = ""
    value: Any = None
    value_kind = f.value or STRING
    for number, wire, raw in _fields(data, where):
        if number == 1:
            key = _scalar(STRING, wire, raw, where)
        elif number == 2:
            if value_kind == MESSAGE:
                value = _value(_msg(f, where), _scalar(BYTES, wire, raw, where), where)
            else:
                value = _json_scalar(value_kind, _scalar(value_kind, wire, raw, where))
        else:
            raise ProtobufError(f"{where}: map entry has no field number {number}")
    if value is None:
        if value_kind == MESSAGE:
            value = _value(_msg(f, where), b"", where)
        else:
            value = _json_scalar(value_kind, _ZERO[value_kind])
    return key, value


def _json_scalar(kind: str, value: Any) -> Any:
    return base64.b64encode(value).decode("ascii") if kind == BYTES else value


def _value(name: str, data: bytes, where: str) -> Any:
    special = _SPECIAL.get(name)
    return special(data, where) if special is not None else _message(name, data, where)


def _message(name: str, data: bytes, where: str) -> dict[str, Any]:
    got = _collect(name, data, where)
    out: dict[str, Any] = {}
    for number, f in _schema(name, where).items():
        here = _where(where, f)
        if f.kind == MAP:
            if number in got.maps:
                out[f.json] = got.maps[number]
        elif f.rep:
            if number in got.lists:
                out[f.json] = got.lists[number]
        elif f.kind == MESSAGE:
            if number not in got.parts and f.ptr:
                continue  # nil pointer
            value = _value(_msg(f, here), got.message(number), here)
            if f.inline:
                out.update(value)
            elif value is not None:
                out[f.json] = value
        elif number in got.scalars:
            value = got.scalars[number]
            if f.ptr or f.req or value != _ZERO[f.kind]:
                out[f.json] = _json_scalar(f.kind, value)
        elif f.req:
            out[f.json] = _json_scalar(f.kind, _ZERO[f.kind])
    return out


# --- hand-written messages ---------------------------------------------------------------

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _timestamp(seconds: int, micros: int, where: str) -> datetime:
    try:
        return _EPOCH + timedelta(seconds=seconds, microseconds=micros)
    except OverflowError as e:
        raise ProtobufError(f"{where}: time out of range: {seconds}s") from e


def _rfc3339(t: datetime, micros: bool = False) -> str:
    """Go's RFC 3339 in UTC: a four-digit year (strftime's %Y does not pad), Z for the zone."""
    fraction = f".{t.microsecond:06d}" if micros else ""
    return f"{t.year:04d}-{t:%m-%dT%H:%M:%S}{fraction}Z"


def _time(data: bytes, where: str) -> str | None:
    """metav1.Time: empty is the zero time (JSON null); nanos are dropped, as Go does."""
    if not data:
        return None
    got = _collect("Time", data, where)
    return _rfc3339(_timestamp(got.scalar(1) or 0, 0, where))


def _micro_time(data: bytes, where: str) -> str | None:
    if not data:
        return None
    got = _collect("MicroTime", data, where)
    t = _timestamp(got.scalar(1) or 0, (got.scalar(2) or 0) // 1000, where)
    return _rfc3339(t, micros=True)


def _quantity(data: bytes, where: str) -> str:
    value = _collect("Quantity", data, where).scalar(1)
    if value is None:
        return "0"  # the zero Quantity
    if not value:
        raise ProtobufError(f"{where}: empty quantity")
    return str(value)


def _int_or_string(data: bytes, where: str) -> int | str:
    got = _collect("IntOrString", data, where)
    typ = got.scalar(1) or 0
    if typ == 0:
        return int(got.scalar(2) or 0)
    if typ == 1:
        return str(got.scalar(3) or "")
    raise ProtobufError(f"{where}: IntOrString of unknown type {typ}")


def _fields_v1(data: bytes, where: str) -> Any:
    raw = _collect("FieldsV1", data, where).scalar(1)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ProtobufError(f"{where}: fieldsV1 is not JSON") from e


_SPECIAL: Final[dict[str, Callable[[bytes, str], Any]]] = {
    "Time": _time,
    "MicroTime": _micro_time,
    "Quantity": _quantity,
    "IntOrString": _int_or_string,
    "FieldsV1": _fields_v1,
}
