"""Generate nodeagent_testbed.sim.protobuf_schema from the Go struct tags compiled into kubectl.

kubectl's typed clients marshal the k8s.io/api Go structs with gogo-protobuf, whose field
numbers are the `protobuf:"..."` struct tags (and match the published generated.proto files).
Go keeps struct tags in the binary's runtime type descriptors even when it is stripped, so
this module reads the ELF file, walks every type reachable from the `.typelink` table, and
recovers each struct's fields: Go name, tag, and Go type (pointer, slice, map, struct, ...).

From that it renders the schema table: message -> {field number: Field(...)} for every
message reachable from the API kinds in ROOTS, with the JSON name and omitempty-ness from the
`json:"..."` tag and pointer-ness from the Go type (a nil pointer is not marshalled; a present
one is kept even when zero, e.g. gracePeriodSeconds: 0).

Regenerate after bumping kubectl:

    python -m tools.kubectl_schema > testbed/nodeagent_testbed/sim/protobuf_schema.py

The layout read here is Go's internal/abi.Type (Go 1.21 and later, amd64).
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KUBECTL = Path(sys.prefix) / "bin" / "kubectl"

# apiVersion of the Go packages the roots live in.
GROUP_VERSIONS = {
    "k8s.io/api/core/v1": "v1",
    "k8s.io/api/apps/v1": "apps/v1",
    "k8s.io/api/policy/v1": "policy/v1",
    "k8s.io/api/autoscaling/v1": "autoscaling/v1",
    "k8s.io/api/coordination/v1": "coordination.k8s.io/v1",
    "k8s.io/api/scheduling/v1": "scheduling.k8s.io/v1",
    "k8s.io/api/events/v1": "events.k8s.io/v1",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta.k8s.io/v1",
}

# The kinds the simulated API server serves (nodeagent_testbed.sim.resources) that Go clients create
# or update with typed clientsets, plus the bodies of the eviction, binding and scale
# subresources and of DELETE. CustomResourceDefinition and ControllerRevision are left out.
ROOTS = (
    "k8s.io/api/core/v1.Namespace",
    "k8s.io/api/core/v1.Node",
    "k8s.io/api/core/v1.Pod",
    "k8s.io/api/core/v1.Event",
    "k8s.io/api/core/v1.ConfigMap",
    "k8s.io/api/core/v1.Secret",
    "k8s.io/api/core/v1.Service",
    "k8s.io/api/core/v1.ServiceAccount",
    "k8s.io/api/core/v1.Binding",
    "k8s.io/api/apps/v1.Deployment",
    "k8s.io/api/apps/v1.ReplicaSet",
    "k8s.io/api/apps/v1.StatefulSet",
    "k8s.io/api/apps/v1.DaemonSet",
    "k8s.io/api/policy/v1.PodDisruptionBudget",
    "k8s.io/api/policy/v1.Eviction",
    "k8s.io/api/autoscaling/v1.Scale",
    "k8s.io/api/coordination/v1.Lease",
    "k8s.io/api/scheduling/v1.PriorityClass",
    "k8s.io/api/events/v1.Event",
    "k8s.io/apimachinery/pkg/apis/meta/v1.DeleteOptions",
)

# Messages with a hand-written protobuf form, decoded by nodeagent_testbed.sim.protobuf itself.
SPECIAL = {
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "Quantity",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "FieldsV1",
}

_KINDS = {
    1: "bool",
    2: "int",
    5: "int32",
    6: "int64",
    8: "uint8",
    14: "float64",
    17: "array",
    21: "map",
    22: "ptr",
    23: "slice",
    24: "string",
    25: "struct",
}


@dataclass(frozen=True)
class GoType:
    kind: str
    name: str
    pkg: str = ""
    elem: GoType | None = None
    key: GoType | None = None

    @property
    def qualified(self) -> str:
        return f"{self.pkg}.{self.name.rsplit('.', 1)[-1]}"


@dataclass(frozen=True)
class GoField:
    name: str
    tag: str
    type: GoType


class GoBinary:
    """The struct types of a Go ELF binary, by package-qualified name."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.sections = self._sections()
        self.base = self.sections[".rodata"][0]
        self.structs: dict[str, list[GoField]] = {}
        self._walk_all()

    def _sections(self) -> dict[str, tuple[int, int, int]]:
        d = self.data
        if d[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        shoff = struct.unpack_from("<Q", d, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
        raw = [struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize)[0:6] for i in range(shnum)]
        strtab = raw[shstrndx][4]
        out = {}
        for name, _typ, _flags, addr, off, size in raw:
            end = d.index(b"\0", strtab + name)
            out[d[strtab + name : end].decode()] = (addr, off, size)
        return out

    def _off(self, vaddr: int) -> int:
        for name, (addr, off, size) in self.sections.items():
            if addr and addr <= vaddr < addr + size and name not in (".bss", ".noptrbss"):
                return vaddr - addr + off
        raise ValueError(f"address {vaddr:#x} is in no loaded section")

    def _u64(self, vaddr: int) -> int:
        return int(struct.unpack_from("<Q", self.data, self._off(vaddr))[0])

    def _i32(self, vaddr: int) -> int:
        return int(struct.unpack_from("<i", self.data, self._off(vaddr))[0])

    def _u8(self, vaddr: int) -> int:
        return self.data[self._off(vaddr)]

    def _varint(self, off: int) -> tuple[int, int]:
        result = shift = 0
        while True:
            b = self.data[off]
            off += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return result, off

    def _name(self, vaddr: int) -> tuple[str, str]:
        """A runtime name: flags byte, varint length, bytes, then (flag 2) the tag likewise."""
        off = self._off(vaddr)
        flags = self.data[off]
        n, off = self._varint(off + 1)
        name = self.data[off : off + n].decode()
        tag = ""
        if flags & 2:
            tn, toff = self._varint(off + n)
            tag = self.data[toff : toff + tn].decode()
        return name, tag

    def _kind(self, t: int) -> int:
        return self._u8(t + 23) & 0x1F

    def _type_name(self, t: int) -> str:
        name, _ = self._name(self.base + self._i32(t + 40))
        return name[1:] if self._u8(t + 20) & 2 else name  # tflagExtraStar

    def _struct_pkg(self, t: int) -> str:
        if not self._u8(t + 20) & 1:  # tflagUncommon: named type
            return ""
        pkg = self._i32(t + 80)  # uncommonType follows the 80-byte structType
        return self._name(self.base + pkg)[0] if pkg else ""

    def _walk_all(self) -> None:
        seen: set[int] = set()
        stack: list[int] = []
        _addr, off, size = self.sections[".typelink"]
        for i in range(size // 4):
            stack.append(self.base + struct.unpack_from("<i", self.data, off + 4 * i)[0])
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            kind = self._kind(t)
            if kind in (17, 22, 23):  # array, pointer, slice: elem at 48
                stack.append(self._u64(t + 48))
            elif kind == 21:  # map: key at 48, elem at 56
                stack += [self._u64(t + 48), self._u64(t + 56)]
            elif kind == 25:
                fields = self._fields(t)
                stack += [f for _, _, f in fields]
                if any("protobuf:" in tag for _, tag, _ in fields):
                    key = f"{self._struct_pkg(t)}.{self._type_name(t).rsplit('.', 1)[-1]}"
                    self.structs[key] = [
                        GoField(name, tag, self._describe(ft)) for name, tag, ft in fields
                    ]

    def _fields(self, t: int) -> list[tuple[str, str, int]]:
        ptr, n = self._u64(t + 56), self._u64(t + 64)
        out = []
        for i in range(n):
            sf = ptr + 24 * i  # structField{name, typ, offset}
            name, tag = self._name(self._u64(sf))
            out.append((name, tag, self._u64(sf + 8)))
        return out

    def _describe(self, t: int) -> GoType:
        kind = self._kind(t)
        k = _KINDS.get(kind, f"kind{kind}")
        name = self._type_name(t)
        if kind in (17, 22, 23):
            return GoType(k, name, elem=self._describe(self._u64(t + 48)))
        if kind == 21:
            return GoType(
                k,
                name,
                key=self._describe(self._u64(t + 48)),
                elem=self._describe(self._u64(t + 56)),
            )
        if kind == 25:
            return GoType(k, name, pkg=self._struct_pkg(t))
        return GoType(k, name)


_SCALARS = {
    "string": "STRING",
    "bool": "BOOL",
    "int32": "INT32",
    "int64": "INT64",
    "float64": "DOUBLE",
}


@dataclass(frozen=True)
class Row:
    number: int
    json: str
    kind: str
    message: str | None
    value: str | None
    rep: bool
    ptr: bool
    req: bool
    inline: bool

    def render(self, indent: str) -> list[str]:
        """The table line(s), wrapped the way ruff format wraps them at 100 columns."""
        args = [f'"{self.json}"', self.kind]
        if self.message:
            args.append(f'"{self.message}"')
        if self.value:
            args.append(f"value={self.value}")
        for flag in ("rep", "ptr", "req", "inline"):
            if getattr(self, flag):
                args.append(f"{flag}=True")
        line = f"{indent}{self.number}: F({', '.join(args)}),"
        if len(line) <= 100:
            return [line]
        inner = indent + "    "
        joined = f"{inner}{', '.join(args)}"
        body = [joined] if len(joined) <= 100 else [f"{inner}{a}," for a in args]
        return [f"{indent}{self.number}: F(", *body, f"{indent}),"]


class Generator:
    def __init__(self, binary: GoBinary) -> None:
        self.structs = binary.structs
        self.order: list[str] = []
        for root in ROOTS:
            self._visit(root)
        self.names = self._names()

    def _visit(self, key: str) -> None:
        if key in self.order or key in SPECIAL:
            return
        if key not in self.structs:
            raise KeyError(f"{key} is not in the binary")
        self.order.append(key)
        for f in self.structs[key]:
            if _proto_tag(f.tag) is not None:
                for s in _structs_in(f.type):
                    self._visit(s)

    def _names(self) -> dict[str, str]:
        short: dict[str, list[str]] = {}
        for key in self.order:
            short.setdefault(key.rsplit(".", 1)[1], []).append(key)
        names = dict(SPECIAL)
        for s, keys in short.items():
            for key in keys:
                pkg = key.rsplit(".", 1)[0]
                if len(keys) == 1 or pkg == "k8s.io/api/core/v1":
                    names[key] = s
                else:  # e.g. events.k8s.io/v1 Event next to the core/v1 one
                    names[key] = f"{GROUP_VERSIONS[pkg]}.{s}"
        return names

    def rows(self, key: str) -> list[Row]:
        rows = []
        for f in self.structs[key]:
            proto = _proto_tag(f.tag)
            if proto is None:
                continue
            number = int(proto.split(",")[1])
            jm = re.search(r'json:"([^"]*)"', f.tag)
            jparts = jm.group(1).split(",") if jm else [f.name]
            json_name, opts = jparts[0], jparts[1:]
            inline = json_name == ""  # embedded struct, inlined by encoding/json
            omit = "omitempty" in opts or "omitzero" in opts
            kind, message, value, rep, ptr = self._conv(f.type, f"{key}.{f.name}")
            req = not (omit or ptr or rep or inline or kind in ("MAP", "MESSAGE"))
            rows.append(Row(number, json_name, kind, message, value, rep, ptr, req, inline))
        numbers = [r.number for r in rows]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"{key}: duplicate field numbers")
        return sorted(rows, key=lambda r: r.number)

    def _conv(self, t: GoType, where: str) -> tuple[str, str | None, str | None, bool, bool]:
        """(kind, message, map value kind, repeated, pointer) of a Go field type."""
        if t.kind == "ptr":
            assert t.elem is not None
            kind, msg, value, rep, ptr = self._conv(t.elem, where)
            if rep or ptr or kind == "MAP":
                raise ValueError(f"{where}: pointer to {t.elem.name}")
            return kind, msg, value, False, True
        if t.kind == "slice":
            assert t.elem is not None
            if t.elem.kind == "uint8":
                return "BYTES", None, None, False, False
            if not t.name.startswith("[]"):  # a named slice is a wrapper message in proto
                raise ValueError(f"{where}: named slice type {t.name}")
            kind, msg, value, rep, ptr = self._conv(t.elem, where)
            if rep or ptr or kind == "MAP":
                raise ValueError(f"{where}: nested {t.name}")
            return kind, msg, None, True, False
        if t.kind == "map":
            assert t.key is not None and t.elem is not None
            if t.key.kind != "string":
                raise ValueError(f"{where}: map key {t.key.name}")
            kind, msg, value, rep, ptr = self._conv(t.elem, where)
            if rep or ptr or kind == "MAP":
                raise ValueError(f"{where}: map value {t.elem.name}")
            return "MAP", msg, kind, False, False
        if t.kind == "struct":
            return "MESSAGE", self.names[t.qualified], None, False, False
        if t.kind in _SCALARS:
            return _SCALARS[t.kind], None, None, False, False
        raise ValueError(f"{where}: unsupported Go type {t.name} ({t.kind})")

    def kinds(self) -> list[tuple[str, str, str]]:
        out = []
        for root in ROOTS:
            pkg, kind = root.rsplit(".", 1)
            out.append((GROUP_VERSIONS[pkg], kind, self.names[root]))
        return out

    def render(self, version: str) -> str:
        lines = [
            f'"""The protobuf schema of the API kinds kubectl {version} sends, for',
            "nodeagent_testbed.sim.protobuf.",
            "",
            "GENERATED from the Go struct tags in the kubectl binary; do not edit. Regenerate with",
            "    python -m tools.kubectl_schema > testbed/nodeagent_testbed/sim/protobuf_schema.py",
            "",
            "SCHEMA maps a message to {field number: F(json name, kind, message, ...)}:",
            "  rep     repeated (a list in JSON)",
            "  ptr     a Go pointer: kept whenever present on the wire, even when zero",
            "  req     no omitempty in its json tag: emitted even when zero",
            "  inline  an embedded Go struct: its fields are merged into the parent object",
            "  value   for MAP, the kind of the map values (keys are strings)",
            "Scalars without ptr or req are omitted when zero, as encoding/json's omitempty does.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from typing import Final, NamedTuple",
            "",
            'STRING: Final = "string"',
            'BYTES: Final = "bytes"',
            'BOOL: Final = "bool"',
            'INT32: Final = "int32"',
            'INT64: Final = "int64"',
            'DOUBLE: Final = "double"',
            'MESSAGE: Final = "message"',
            'MAP: Final = "map"',
            "",
            "",
            "class F(NamedTuple):",
            '    """One field of a message."""',
            "",
            "    json: str",
            "    kind: str",
            "    message: str | None = None",
            "    value: str | None = None",
            "    rep: bool = False",
            "    ptr: bool = False",
            "    req: bool = False",
            "    inline: bool = False",
            "",
            "",
            "# (apiVersion, kind) of a top-level object -> its message",
            "KINDS: Final[dict[tuple[str, str], str]] = {",
        ]
        for api_version, kind, msg in self.kinds():
            lines.append(f'    ("{api_version}", "{kind}"): "{msg}",')
        lines += ["}", "", "SCHEMA: Final[dict[str, dict[int, F]]] = {"]
        for key in self.order:
            lines.append(f"    # {key}")
            lines.append(f'    "{self.names[key]}": {{')
            for row in self.rows(key):
                lines += row.render("        ")
            lines.append("    },")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _proto_tag(tag: str) -> str | None:
    m = re.search(r'protobuf:"([^"]*)"', tag)
    return m.group(1) if m and m.group(1) != "-" else None


def _structs_in(t: GoType) -> Iterator[str]:
    if t.elem is not None:
        yield from _structs_in(t.elem)
    if t.key is not None:
        yield from _structs_in(t.key)
    if t.kind == "struct":
        yield t.qualified


def kubectl_version(path: Path = KUBECTL) -> str:
    m = re.search(rb"\nmod\tk8s\.io/kubernetes\t(v[^\t\n]+)", path.read_bytes())  # buildinfo
    return m.group(1).decode() if m else "unknown"


def generate(path: Path = KUBECTL) -> str:
    return Generator(GoBinary(path)).render(kubectl_version(path))


def struct_fields(path: Path = KUBECTL) -> dict[str, Any]:
    """For tests: package-qualified struct name -> its Go fields."""
    return dict(GoBinary(path).structs)


if __name__ == "__main__":
    sys.stdout.write(generate(Path(sys.argv[1]) if len(sys.argv) > 1 else KUBECTL))
