"""`now`: a flag read again after something changed it.

mypy keeps what an assert narrowed an attribute or property to (`assert el.is_leader`) across
the awaits and calls that change it, and then takes an assert of the opposite for impossible
and the rest of the test for unreachable. A value passed through a call is not narrowed:
`assert not now(el.is_leader)` asserts what `assert not el.is_leader` does."""

from __future__ import annotations


def now(flag: bool) -> bool:
    return flag
