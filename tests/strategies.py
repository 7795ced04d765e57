"""Hypothesis strategies built from the event union with ``msgspec.inspect``.

``hypothesis.from_type`` ignores msgspec's ``Meta`` constraints, so each Struct
gets a strategy derived from its type info (house style, "Tests").
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from ledger.events import EVENT_TYPES

__all__ = ["any_event", "event_of", "json_values", "strategy_for"]

_text = st.text(max_size=12)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3)
    ),
    max_leaves=8,
)


def _int(t: mi.IntType) -> st.SearchStrategy[int]:
    low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(2**40))
    high = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 2**40)
    return st.integers(min_value=low, max_value=high)


def _str(t: mi.StrType) -> st.SearchStrategy[str]:
    if t.pattern is not None:
        return st.from_regex(t.pattern, fullmatch=True)
    return st.text(min_size=t.min_length or 0, max_size=min(t.max_length or 20, 20))


def _struct(t: mi.StructType) -> st.SearchStrategy[Any]:
    fields = {f.encode_name: _of(f.type) for f in t.fields}
    return st.fixed_dictionaries(fields).map(lambda kw: t.cls(**kw))


def _of(t: mi.Type) -> st.SearchStrategy[Any]:
    if isinstance(t, mi.IntType):
        return _int(t)
    if isinstance(t, mi.StrType):
        return _str(t)
    if isinstance(t, mi.FloatType):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.AnyType):
        return json_values
    if isinstance(t, mi.UnionType):
        return st.one_of(*(_of(member) for member in t.types))
    if isinstance(t, mi.TupleType):
        return st.tuples(*(_of(item) for item in t.item_types))
    if isinstance(t, mi.VarTupleType | mi.ListType):
        items = st.lists(_of(t.item_type), max_size=4)
        return items.map(tuple) if isinstance(t, mi.VarTupleType) else items
    if isinstance(t, mi.DictType):
        return st.dictionaries(_of(t.key_type), _of(t.value_type), max_size=3)
    if isinstance(t, mi.StructType):
        return _struct(t)
    raise TypeError(f"no strategy for {t!r}")


def strategy_for(cls: type[msgspec.Struct]) -> st.SearchStrategy[Any]:
    """Valid instances of one Struct, its ``Meta`` constraints honoured."""
    return _of(mi.type_info(cls))


def event_of(cls: type[msgspec.Struct]) -> st.SearchStrategy[Any]:
    """Alias of :func:`strategy_for`, for event bodies."""
    return strategy_for(cls)


any_event: st.SearchStrategy[Any] = st.one_of(*(strategy_for(t) for t in EVENT_TYPES))
