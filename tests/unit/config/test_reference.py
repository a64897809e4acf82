"""docs/configuration.md's settings tables are what `python -m tools.config_reference` writes
from the schema, and hold every setting of the schema, each with its meaning."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.config import from_mapping, schema
from nodeagent.config.parsing import _snake_to_camel
from tools import config_reference as ref

HINT = "docs/configuration.md is stale: run python -m tools.config_reference"


def test_page_is_what_the_generator_writes() -> None:
    page = ref.PAGE.read_text(encoding="utf-8")
    assert page == ref.rewrite(page), HINT


def _table_keys(page: str) -> set[str]:
    inside = page[page.index(ref.BEGIN) : page.index(ref.END)]
    return set(re.findall(r"^\| `([^`]+)` \|", inside, flags=re.MULTILINE))


def _walk(cls: type[object], prefix: str = "") -> set[str]:
    """Every setting's key, walked from the dataclasses themselves (not through the
    generator): sections are dataclass fields, a list's entries `key[]`."""
    keys: set[str] = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = prefix + _snake_to_camel(f.name)
        t: Any = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            keys |= _walk(t, key + ".")
            continue
        keys.add(key)
    return keys


ENTRIES = {
    "eviction.annotateInterceptors[]": schema.AnnotateInterceptor,
    "notifications.webhooks[]": schema.Webhook,
}


def test_every_setting_of_the_schema_is_in_the_table() -> None:
    wanted = _walk(schema.Config)
    for prefix, cls in ENTRIES.items():
        wanted |= _walk(cls, prefix + ".")
    in_table = _table_keys(ref.PAGE.read_text(encoding="utf-8"))
    missing = sorted(wanted - in_table)
    assert not missing, f"settings missing from docs/configuration.md: {missing}; {HINT}"
    assert sorted(in_table - wanted) == [], "keys in the table the schema does not have"


def test_every_setting_has_its_meaning_in_the_schema() -> None:
    assert ref.undocumented() == [], 'give each field metadata={"doc": ...} in the schema'


def test_keys_are_what_the_loader_reads() -> None:
    # every top-level and section key of the table, with its default, loads as it is written
    for section in ref.sections():
        for s in section.settings:
            if "[]" in s.key or s.default == ref.REQUIRED:
                continue
            *path, leaf = s.key.split(".")
            value: object = {leaf: yaml.safe_load(s.default)}
            for part in reversed(path):
                value = {part: value}
            assert isinstance(value, dict)
            from_mapping(value, "docs")  # an unknown key would raise ConfigError


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (None, "null"),
        (True, "true"),
        (600.0, "600"),
        (0.8, "0.8"),
        (Path("/run/x"), "/run/x"),
        ((), "[]"),
        (frozenset({"b", "a"}), "[a, b]"),
        ({}, "{}"),
        ("None", "None"),
    ],
)
def test_defaults_as_a_user_writes_them(value: object, written: str) -> None:
    assert ref.render_value(value) == written


def test_stale_page_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    page.write_text(f"# x\n\n{ref.BEGIN}\n| `old` | x | y |\n{ref.END}\n", encoding="utf-8")
    assert ref.main(["--check", "--page", str(page)]) == 1
    assert ref.main(["--page", str(page)]) == 0
    assert ref.main(["--check", "--page", str(page)]) == 0
    assert "`shutdown.budget`" in page.read_text(encoding="utf-8")
