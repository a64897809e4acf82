"""Patch application for the simulated API server: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and the subset of Kubernetes strategic merge patch that kubectl sends.

All functions are pure: they return a new document and never modify their arguments, so the
server can apply a patch to its stored object and discard the result on a later failure.

Strategic merge patch normally takes its list semantics from the Go struct tags of the
built-in types. The simulator has no Go types, so a small table keyed by field name stands
in for them (``_LIST_MERGE_KEYS``). Custom resources have no strategic semantics at all: the
real API server answers 415 to a strategic merge patch for them, and so should the caller;
``kind_hint`` is only used to pick merge keys that differ between kinds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import jsonpatch

__all__ = ["PatchError", "json_merge_patch", "json_patch", "strategic_merge_patch"]


class PatchError(ValueError):
    """A patch is malformed or cannot be applied to the target; the message says where."""


# --- RFC 7386 JSON merge patch -----------------------------------------------------------------


def json_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch: objects merge recursively, null removes a key, any
    other value (lists included) replaces. Returns a new document."""
    return _merge_patch_into(copy.deepcopy(target), patch)


def _merge_patch_into(owned: Any, patch: Any) -> Any:
    # `owned` is a private copy, so merging in place cannot touch the caller's target.
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = (
        owned if isinstance(owned, dict) else dict(owned) if isinstance(owned, Mapping) else {}
    )
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch_into(result.get(key), value)
    return result


# --- RFC 6902 JSON patch -----------------------------------------------------------------------


def json_patch(target: Any, ops: object) -> Any:
    """Apply an RFC 6902 JSON patch (``ops``: the decoded patch document, validated here)
    with the jsonpatch library.

    Operations are applied one at a time so that a failure names the operation; the patch as
    a whole is still atomic because the result is discarded when any operation fails.
    """
    if not isinstance(ops, list | tuple):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for i, op in enumerate(ops):
        described = _describe_op(op)
        try:
            doc = jsonpatch.JsonPatch([copy.deepcopy(op)]).apply(doc, in_place=True)
        except jsonpatch.JsonPatchTestFailed as e:
            raise PatchError(f"operation {i} ({described}): test failed: {e}") from e
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise PatchError(f"operation {i} ({described}): {e}") from e
        except (TypeError, KeyError, IndexError, ValueError) as e:
            # jsonpatch assumes well-typed members (e.g. a string path); anything else surfaces
            # as a plain Python error that must still become a client error, not a 500.
            raise PatchError(f"operation {i} ({described}): malformed operation: {e!r}") from e
    return doc


def _describe_op(op: object) -> str:
    if not isinstance(op, Mapping):
        return "not an object"
    return f"{op.get('op', '<no op>')} {op.get('path', '<no path>')}"


# --- strategic merge patch ---------------------------------------------------------------------

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder/"
_DELETE_FROM: Final = "$deleteFromPrimitiveList/"

_CONTAINER_LISTS: Final = frozenset(("containers", "initContainers", "ephemeralContainers"))

# Lists of objects merged element by element, by field name, from the patchStrategy/
# patchMergeKey tags of the core types kubectl touches. Lists not named here are atomic
# (replaced whole), e.g. tolerations; `ports` depends on where it is (see _list_strategy).
_LIST_MERGE_KEYS: Final[Mapping[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    # lifecycle.k8s.io/v1alpha1 and the pods' responders
    "evictionResponders": "name",
    "requesters": "name",
    "targetResponders": "name",
    "responders": "name",
}
# Lists of scalars merged as sets.
_SET_LISTS: Final = frozenset(("finalizers",))
# core/v1 NodeSpec.taints is atomic, and `kubectl taint` relies on that by sending the whole
# new list. Hand-written patches that carry `$patch` elements ("remove taint X") clearly mean a
# merge, so only those merge, by key.
_DIRECTIVE_ONLY_MERGE_KEYS: Final[Mapping[str, str]] = {"taints": "key"}

_ATOMIC: Final = ("atomic", "")
_SET: Final = ("set", "")


class _Missing:
    """Marks an absent value; distinct from a JSON null."""


_MISSING: Final = _Missing()

_Ident = tuple[str, Any]
_IdentFn = Callable[[Any], _Ident | None]


def strategic_merge_patch(
    target: Mapping[str, Any], patch: Mapping[str, Any], kind_hint: str | None = None
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to a built-in object.

    Maps merge recursively and null deletes a key, as in a merge patch. Lists of objects in
    the merge-key table merge by key, ``finalizers`` merges as a set, other lists are
    replaced. Supported directives: ``$patch: replace|delete|merge`` on maps and on elements of
    merged lists, ``$setElementOrder/<field>``, ``$deleteFromPrimitiveList/<field>`` and
    ``$retainKeys``. Directives never appear in the result. ``kind_hint`` (the object's kind,
    e.g. "Service") selects kind-specific merge keys.

    Differences from apimachinery, all in the lenient direction: ``$patch: merge`` is accepted
    as an explicit no-op, ``$patch: delete`` on a map removes the key instead of leaving
    ``{}``, and values placed where nothing existed have their nulls and directives stripped.
    """
    if not isinstance(target, Mapping):
        raise PatchError("a strategic merge patch applies to an object")
    if not isinstance(patch, Mapping):
        raise PatchError("a strategic merge patch must be an object")
    merged = _StrategicMerge(kind_hint or "").merge_map(copy.deepcopy(dict(target)), patch, ())
    return {} if merged is None else merged


def _where(path: tuple[str, ...]) -> str:
    return ".".join(path) or "<root>"


def _identity(value: Any) -> _Ident:
    """A hashable identity with JSON equality: true is not 1 (as in Go), 1 is 1.0."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return ("json", json.dumps(value, sort_keys=True))


class _StrategicMerge:
    def __init__(self, kind: str) -> None:
        self._kind = kind

    def _list_strategy(self, path: tuple[str, ...], patch_list: list[Any]) -> tuple[str, str]:
        """("key", mergeKey), ("set", "") or ("atomic", "") for the list at ``path``."""
        name = path[-1]
        if name == "ports":
            if len(path) >= 2 and path[-2] in _CONTAINER_LISTS:
                return ("key", "containerPort")
            if self._kind == "Service" and path == ("spec", "ports"):
                return ("key", "port")
            return _ATOMIC
        if name in _LIST_MERGE_KEYS:
            return ("key", _LIST_MERGE_KEYS[name])
        if name in _SET_LISTS:
            return _SET
        if name in _DIRECTIVE_ONLY_MERGE_KEYS and any(
            isinstance(e, Mapping) and _PATCH in e for e in patch_list
        ):
            return ("key", _DIRECTIVE_ONLY_MERGE_KEYS[name])
        return _ATOMIC

    # -- maps --

    def merge_map(
        self, original: dict[str, Any], patch: Mapping[str, Any], path: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """Merge ``patch`` into ``original`` (owned, mutated); None means "delete this map"."""
        directive = patch.get(_PATCH, _MISSING)
        if directive == "delete":
            return None
        if directive == "replace":
            original = {}
        elif directive not in (_MISSING, "merge"):
            raise PatchError(f"{_where(path)}: unknown $patch directive {directive!r}")

        if _RETAIN_KEYS in patch:
            self._retain_keys(original, patch, path)

        # Group directive keys with the field they act on, in patch order.
        fields: dict[str, None] = {}
        for key in patch:
            if key in (_PATCH, _RETAIN_KEYS):
                continue
            for prefix in (_SET_ORDER, _DELETE_FROM):
                if key.startswith(prefix):
                    key = key[len(prefix) :]
                    if not key:
                        raise PatchError(f"{_where(path)}: {prefix!r} names no field")
                    break
            else:
                if key.startswith("$"):
                    raise PatchError(f"{_where(path)}: unknown directive {key!r}")
            fields[key] = None

        for name in fields:
            self._merge_field(original, patch, name, (*path, name))
        return original

    def _retain_keys(
        self, original: dict[str, Any], patch: Mapping[str, Any], path: tuple[str, ...]
    ) -> None:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise PatchError(f"{_where(path)}: $retainKeys must be a list of field names")
        keep = set(retain)
        for key, value in patch.items():
            if value is None or key.startswith("$"):
                continue
            if key not in keep:
                raise PatchError(f"{_where(path)}: field {key!r} is not listed in $retainKeys")
        for key in [k for k in original if k not in keep]:
            del original[key]

    def _merge_field(
        self,
        original: dict[str, Any],
        patch: Mapping[str, Any],
        name: str,
        path: tuple[str, ...],
    ) -> None:
        before = original.get(name, _MISSING)
        value: Any = before
        if name in patch:
            patch_value = patch[name]
            value = _MISSING if patch_value is None else self.merge_value(before, patch_value, path)

        order = patch.get(_SET_ORDER + name, _MISSING)
        if order is not _MISSING:
            value = self._apply_element_order(before, value, patch.get(name), order, path)

        to_delete = patch.get(_DELETE_FROM + name, _MISSING)
        if to_delete is not _MISSING:
            if not isinstance(to_delete, list):
                raise PatchError(f"{_where(path)}: $deleteFromPrimitiveList must be a list")
            if isinstance(value, list):
                gone = {_identity(v) for v in to_delete}
                value = [v for v in value if _identity(v) not in gone]

        if value is _MISSING:
            original.pop(name, None)
        else:
            original[name] = value

    def merge_value(self, before: Any, patch_value: Any, path: tuple[str, ...]) -> Any:
        """The merged value of a field; _MISSING if the patch deletes it."""
        if isinstance(patch_value, Mapping):
            base = before if isinstance(before, dict) else {}
            merged = self.merge_map(base, patch_value, path)
            return _MISSING if merged is None else merged
        if isinstance(patch_value, list):
            kind, merge_key = self._list_strategy(path, patch_value)
            base_list = before if isinstance(before, list) else []
            if kind == "key":
                return self._merge_keyed_list(base_list, patch_value, merge_key, path)
            if kind == "set":
                return _merge_set_list(base_list, [self._materialize(e, path) for e in patch_value])
            return [self._materialize(e, path) for e in patch_value]
        return patch_value

    def _materialize(self, value: Any, path: tuple[str, ...]) -> Any:
        """A patch value as a document value: nulls and directives stripped."""
        if isinstance(value, Mapping):
            merged = self.merge_map({}, value, path)
            return {} if merged is None else merged
        if isinstance(value, list):
            return [self._materialize(e, path) for e in value]
        return value

    # -- lists --

    def _merge_keyed_list(
        self, before: list[Any], patch_list: list[Any], merge_key: str, path: tuple[str, ...]
    ) -> list[Any]:
        where = _where(path)
        elements: list[Mapping[str, Any]] = []
        server = list(before)
        replace = False
        for element in patch_list:
            if not isinstance(element, Mapping):
                raise PatchError(f"{where}: elements must be objects with a {merge_key!r} key")
            directive = element.get(_PATCH, _MISSING)
            if directive in (_MISSING, "merge"):
                if merge_key not in element:
                    raise PatchError(f"{where}: element has no merge key {merge_key!r}")
                elements.append(element)
            elif directive == "delete":
                if merge_key not in element:
                    raise PatchError(
                        f"{where}: $patch: delete element has no merge key {merge_key!r}"
                    )
                gone = _identity(element[merge_key])
                server = [e for e in server if _key_identity(e, merge_key) != gone]
            elif directive == "replace":
                replace = True  # the list becomes exactly the other elements of the patch
            else:
                raise PatchError(f"{where}: unknown $patch directive {directive!r}")
        if replace:
            server = []

        merged = list(server)
        for element in elements:
            ident = _identity(element[merge_key])
            index = next(
                (i for i, e in enumerate(merged) if _key_identity(e, merge_key) == ident), None
            )
            if index is None:
                merged.append(self._materialize(element, path))
            else:
                result = self.merge_map(merged[index], element, path)
                merged[index] = {} if result is None else result

        def ident_of(e: Any) -> _Ident | None:
            return _key_identity(e, merge_key)

        return _normalize_order(
            merged, [ident_of(e) for e in elements], [ident_of(e) for e in server], ident_of
        )

    def _apply_element_order(
        self, before: Any, value: Any, patch_list: Any, order: Any, path: tuple[str, ...]
    ) -> Any:
        where = _where(path)
        if not isinstance(order, list):
            raise PatchError(f"{where}: $setElementOrder must be a list")
        if not isinstance(value, list):
            return value
        kind, merge_key = self._list_strategy(
            path, patch_list if isinstance(patch_list, list) else []
        )
        if kind == "atomic":
            return value  # an atomic list has no order to negotiate; the patch list is it

        def ident_of(e: Any) -> _Ident | None:
            return _key_identity(e, merge_key) if merge_key else _identity(e)

        order_ids = [ident_of(e) for e in order]
        if any(i is None for i in order_ids):
            raise PatchError(f"{where}: $setElementOrder elements need the {merge_key!r} key")
        if isinstance(patch_list, list):
            _check_order_consistent(patch_list, order_ids, ident_of, where)
        server_ids = [ident_of(e) for e in before] if isinstance(before, list) else []
        if kind == "key" and isinstance(patch_list, list):
            server_ids = _server_order_after_merge(server_ids, patch_list, merge_key)
        return _normalize_order(value, order_ids, server_ids, ident_of)


def _key_identity(element: Any, merge_key: str) -> _Ident | None:
    if isinstance(element, Mapping) and merge_key in element:
        return _identity(element[merge_key])
    return None


def _merge_set_list(before: list[Any], patch_list: list[Any]) -> list[Any]:
    merged: list[Any] = []
    seen: set[_Ident] = set()
    for value in [*before, *patch_list]:
        if (ident := _identity(value)) not in seen:
            seen.add(ident)
            merged.append(value)  # both inputs are already private copies
    return _normalize_order(
        merged, [_identity(v) for v in patch_list], [_identity(v) for v in before], _identity
    )


def _check_order_consistent(
    patch_list: list[Any],
    order_ids: list[_Ident | None],
    ident_of: _IdentFn,
    where: str,
) -> None:
    """The patch's own elements must appear in $setElementOrder, in the same relative order
    (apimachinery's validatePatchWithSetOrderList); directive elements are exempt, and, as
    there, an empty $setElementOrder list is not checked at all."""
    if not order_ids:
        return
    wanted = [ident_of(e) for e in patch_list if not (isinstance(e, Mapping) and _PATCH in e)]
    j = 0
    for ident in wanted:
        while j < len(order_ids) and order_ids[j] != ident:
            j += 1
        if j == len(order_ids):
            raise PatchError(f"{where}: the patch list does not match the $setElementOrder list")
        j += 1


def _server_order_after_merge(
    server_ids: list[_Ident | None], patch_list: list[Any], merge_key: str
) -> list[_Ident | None]:
    """The server order that apimachinery's $setElementOrder step actually compares against.

    mergePatchIntoOriginal first merges the list (mergeSlice) and then orders the result by the
    live list, but mergeSlice has by then edited the live list's backing array in place and the
    ordering step reads that array through the old slice header (same start, same length):

    - each ``$patch: delete`` element is removed with ``append(s[:i], s[i+1:]...)``, shifting
      the rest left and leaving a stale copy of the last element at the end;
    - elements new to the server are then appended, in patch order, into the freed tail.

    So [w, x, z] patched with [y, {x: delete}] is compared against [w, z, y], not [w, x, z].
    Capacity cannot matter: the array is only reallocated once the edited list outgrows the
    original length, past anything the old header shows. With ``$patch: replace`` the deletions
    still happen but the list then becomes the patch's, so nothing is appended."""
    backing = list(server_ids)
    length = len(backing)
    replace = False
    for element in patch_list:
        if not isinstance(element, Mapping):
            continue
        directive = element.get(_PATCH, _MISSING)
        if directive == "delete" and merge_key in element:
            gone = _identity(element[merge_key])
            while gone in backing[:length]:
                i = backing.index(gone, 0, length)
                backing[i : length - 1] = backing[i + 1 : length]
                length -= 1
        elif directive == "replace":
            replace = True
    if not replace:
        for element in patch_list:
            if not isinstance(element, Mapping) or merge_key not in element:
                continue
            if element.get(_PATCH, _MISSING) not in (_MISSING, "merge"):
                continue
            ident = _identity(element[merge_key])
            if ident in backing[:length]:
                continue  # merged in place
            if length < len(backing):
                backing[length] = ident
            else:
                backing.append(ident)
            length += 1
    return backing[: len(server_ids)]


def _normalize_order(
    merged: list[Any],
    order: list[_Ident | None],
    server_order: list[_Ident | None],
    ident_of: _IdentFn,
) -> list[Any]:
    """apimachinery's partition + normalizeElementOrder, step for step.

    ``merged`` splits into the elements named by ``order`` (the patch list, or the
    $setElementOrder list) and the rest ("server-only"). Each part is sorted with Go's
    sort.SliceStable by position in ``order`` and ``server_order`` respectively, using
    apimachinery's comparator, which answers "less" whenever either element is missing from the
    list it sorts by. The parts are then interleaved by mergeSortedSlice: the next server-only
    element goes first only if both it and the next named element are in ``server_order`` and
    it comes earlier there; otherwise the named element goes first. Hence elements new to the
    server land before the server-only elements that follow them.

    Positions are first occurrences (apimachinery's index()); an element without an identity
    (no merge key) is never found."""
    order_index = _first_index(order)
    server_index = _first_index(server_order)

    def sorter(index: dict[_Ident | None, int]) -> Callable[[Any, Any], bool]:
        def less(a: Any, b: Any) -> bool:
            ia, ib = index.get(ident_of(a)), index.get(ident_of(b))
            return ia < ib if ia is not None and ib is not None else True

        return less

    named = [e for e in merged if ident_of(e) in order_index]
    server_only = [e for e in merged if ident_of(e) not in order_index]
    named = _go_sort_stable(named, sorter(order_index))
    server_only = _go_sort_stable(server_only, sorter(server_index))

    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(named):
        if j >= len(named):
            result.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            result.append(named[j])
            j += 1
        else:
            left = server_index.get(ident_of(server_only[i]))
            right = server_index.get(ident_of(named[j]))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
    return result


def _first_index(idents: list[_Ident | None]) -> dict[_Ident | None, int]:
    """First position of each identity; None (no identity) is left out, so never found."""
    index: dict[_Ident | None, int] = {}
    for n, ident in enumerate(idents):
        if ident is not None:
            index.setdefault(ident, n)
    return index


def _go_sort_stable(items: list[Any], less: Callable[[Any, Any], bool]) -> list[Any]:
    """Go's sort.SliceStable (insertion sort of 20-element blocks, then SymMerge), copied step
    for step: apimachinery's comparator is not a strict weak order when an element is missing
    from the order list, and then the exact algorithm decides the result (insertion sort moves
    such an element to the front, so a run of them comes out reversed)."""
    data = list(items)

    def lt(i: int, j: int) -> bool:
        return less(data[i], data[j])

    def swap(i: int, j: int) -> None:
        data[i], data[j] = data[j], data[i]

    def insertion_sort(a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and lt(j, j - 1):
                swap(j, j - 1)
                j -= 1

    def swap_range(a: int, b: int, n: int) -> None:
        for k in range(n):
            swap(a + k, b + k)

    def rotate(a: int, m: int, b: int) -> None:
        i, j = m - a, b - m
        while i != j:
            if i > j:
                swap_range(m - i, m, j)
                i -= j
            else:
                swap_range(m - i, m + j - i, i)
                j -= i
        swap_range(m - i, m, i)

    def sym_merge(a: int, m: int, b: int) -> None:
        if m - a == 1:
            i, j = m, b
            while i < j:
                h = (i + j) // 2
                if lt(h, a):
                    i = h + 1
                else:
                    j = h
            for k in range(a, i - 1):
                swap(k, k + 1)
            return
        if b - m == 1:
            i, j = a, m
            while i < j:
                h = (i + j) // 2
                if not lt(m, h):
                    i = h + 1
                else:
                    j = h
            for k in range(m, i, -1):
                swap(k, k - 1)
            return
        mid = (a + b) // 2
        n = mid + m
        start, r = (n - b, mid) if m > mid else (a, m)
        p = n - 1
        while start < r:
            c = (start + r) // 2
            if not lt(p - c, c):
                start = c + 1
            else:
                r = c
        end = n - start
        if start < m < end:
            rotate(start, m, end)
        if a < start < mid:
            sym_merge(a, start, mid)
        if mid < end < b:
            sym_merge(mid, end, b)

    n = len(data)
    block = 20
    a, b = 0, block
    while b <= n:
        insertion_sort(a, b)
        a, b = b, b + block
    insertion_sort(a, n)
    while block < n:
        a, b = 0, 2 * block
        while b <= n:
            sym_merge(a, a + block, b)
            a, b = b, b + 2 * block
        if a + block < n:
            sym_merge(a, a + block, n)
        block *= 2
    return data
