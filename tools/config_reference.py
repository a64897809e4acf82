"""Write the settings tables of docs/configuration.md from the configuration schema.

    python -m tools.config_reference            # rewrite the tables in docs/configuration.md
    python -m tools.config_reference --check    # exit 1 when the page differs from the schema

Each setting's meaning is written once, in `nodeagent/config/schema.py`
(`field(metadata={"doc": ...})`); this writes a table per section between the page's
`BEGIN GENERATED` and `END GENERATED` markers: keys as the loader reads them (camelCase,
`nodeagent.config.parsing`), defaults as a user writes them (seconds, `null`, lists), the
meaning. The rest of the page is prose written by hand. Never shipped: a developer tool.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodeagent.config import schema
from nodeagent.config.parsing import _snake_to_camel

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN GENERATED: settings (python -m tools.config_reference) -->"
END = "<!-- END GENERATED: settings -->"
REQUIRED = "required"


@dataclass(frozen=True)
class Setting:
    key: str
    """As a user writes it, dotted from the top: `shutdown.finalPhase.gracePeriod`."""
    default: str
    doc: str


@dataclass(frozen=True)
class Section:
    key: str
    """Dotted from the top (`eviction.bridge`; `eviction.annotateInterceptors[]` for a list's
    entries); "" for the top level."""
    doc: str
    settings: tuple[Setting, ...]


def _is_dataclass_type(t: Any) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def _entry_type(t: Any) -> type[Any] | None:
    """The dataclass a `tuple[X, ...]` setting lists, if it lists one."""
    if typing.get_origin(t) is tuple:
        args = [a for a in typing.get_args(t) if a is not Ellipsis]
        if len(args) == 1 and _is_dataclass_type(args[0]):
            entry: type[Any] = args[0]
            return entry
    return None


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return render_value(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return render_value(f.default_factory())
    return REQUIRED


def render_value(value: Any) -> str:
    """A default as a user writes it in the YAML file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, frozenset | set):
        return "[" + ", ".join(sorted(render_value(v) for v in value)) + "]"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{k}: {render_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"no YAML rendering for a default of type {type(value).__name__}")


def _docstring(cls: type[Any]) -> str:
    return " ".join((cls.__doc__ or "").split())


def sections(cls: type[Any] = schema.Config, prefix: str = "") -> Iterator[Section]:
    """Every section of `cls` (itself first), each with its own settings in schema order."""
    hints = typing.get_type_hints(cls, vars(schema))
    own: list[Setting] = []
    nested: list[tuple[str, type[Any]]] = []
    for f in dataclasses.fields(cls):
        key = prefix + _snake_to_camel(f.name)
        t = hints[f.name]
        if _is_dataclass_type(t):
            nested.append((key, t))
            continue
        entry = _entry_type(t)
        if entry is not None:
            nested.append((key + "[]", entry))
        own.append(Setting(key, _default(f), str(f.metadata.get(schema.DOC, ""))))
    yield Section(prefix.rstrip("."), _docstring(cls), tuple(own))
    for key, t in nested:
        yield from sections(t, key + ".")


def schema_keys() -> set[str]:
    """Every setting's key, from the schema alone (not from the tables): what the table must
    hold."""
    return {s.key for section in sections() for s in section.settings}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """The tables, markers included."""
    out = [BEGIN, ""]
    for section in sections():
        if not section.settings:
            continue
        title = f"`{section.key}`" if section.key else "Top level"
        out += [f"### {title}", ""]
        if section.doc:
            out += [section.doc, ""]
        out += ["| key | default | meaning |", "|---|---|---|"]
        for s in section.settings:
            default = s.default if s.default == REQUIRED else f"`{s.default}`"
            out.append(f"| `{s.key}` | {_cell(default)} | {_cell(s.doc)} |")
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def undocumented() -> list[str]:
    """Keys of settings whose schema field has no doc."""
    return [s.key for section in sections() for s in section.settings if not s.doc]


def rewrite(page: str) -> str:
    """`page` with the text between its markers (them included) replaced by the tables."""
    start = page.find(BEGIN)
    end = page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} markers")
    tail = page[end + len(END) :]
    return page[:start] + render().rstrip("\n") + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.config_reference", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--page", type=Path, default=PAGE, help="default: docs/configuration.md")
    args = parser.parse_args(argv)
    missing = undocumented()
    if missing:
        print(f"settings without a doc in the schema: {', '.join(missing)}", file=sys.stderr)
        return 1
    page = args.page.read_text(encoding="utf-8")
    wanted = rewrite(page)
    if args.check:
        if page != wanted:
            print(f"{args.page} is stale: run python -m tools.config_reference", file=sys.stderr)
            return 1
        return 0
    if page != wanted:
        args.page.write_text(wanted, encoding="utf-8")
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
