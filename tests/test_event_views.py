"""Each partial view of ``ledger.event_views`` stays a subset of its event.

A view reads stored bodies in place of its event's full decoder (P-3, P-4): it
must carry the same tag, and every field it declares must be one of the
event's, of the same type (or left as raw bytes), required only where the
event's is. Otherwise a view would refuse stored bodies or read them wrong.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from tests.internals import VIEWS, event_views
from tests.strategies import event_of


def subset_problems(view: type[msgspec.Struct], event: type[ev.Event]) -> list[str]:
    """How ``view`` fails to be a subset of ``event`` (empty: it is one)."""
    seen, whole = mi.type_info(view), mi.type_info(event)
    assert isinstance(seen, mi.StructType)
    assert isinstance(whole, mi.StructType)
    problems = []
    if (seen.tag_field, seen.tag) != (whole.tag_field, whole.tag):
        problems.append(f"tag {seen.tag_field}={seen.tag!r}, not {whole.tag!r}")
    if seen.forbid_unknown_fields:
        problems.append("it refuses the fields it leaves out")
    fields = {f.name: f for f in whole.fields}
    for field in seen.fields:
        full = fields.get(field.name)
        if full is None:
            problems.append(f"{field.name}: not a field of {event.__name__}")
            continue
        if field.encode_name != full.encode_name:
            problems.append(f"{field.name}: stored as {field.encode_name!r}")
        if field.type != full.type and not isinstance(field.type, mi.RawType):
            problems.append(f"{field.name}: {field.type} is not {full.type}")
        if field.required and not full.required:
            problems.append(f"{field.name}: required, optional in the event")
        defaults = (field.default, field.default_factory)
        if not field.required and defaults != (full.default, full.default_factory):
            problems.append(f"{field.name}: another default than the event's")
    return problems


@pytest.mark.parametrize(
    ("view", "event"), list(VIEWS.items()), ids=[v.__name__ for v in VIEWS]
)
def test_each_view_is_a_subset_of_its_event(
    view: type[msgspec.Struct], event: type[ev.Event]
) -> None:
    assert event in ev.EVENT_TYPES
    assert subset_problems(view, event) == []


def test_every_partial_decoder_of_an_event_is_a_listed_view() -> None:
    tagged = [
        value
        for value in vars(event_views).values()
        if isinstance(value, type)
        and issubclass(value, msgspec.Struct)
        and mi.type_info(value).tag is not None  # type: ignore[attr-defined]
    ]
    assert len(tagged) == len(VIEWS) == 7
    assert set(tagged) == set(VIEWS)


def test_the_subset_check_names_what_a_view_gets_wrong() -> None:
    class Wrong(msgspec.Struct, tag_field="kind", tag="result_saved", kw_only=True):
        task: str  # an int in the event
        rollout: int  # without the event's bound
        missing: int = 0
        sidecar_line: int  # of failure_saved, not result_saved

    problems = subset_problems(Wrong, ev.ResultSaved)
    assert [p.split(":")[0] for p in problems] == [
        "task",
        "rollout",
        "missing",
        "sidecar_line",
    ]
    assert subset_problems(Wrong, ev.FailureSaved)[0].startswith("tag")


def _as_json(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_a_view_reads_what_the_event_stored(data: st.DataObject) -> None:
    view, event = data.draw(st.sampled_from(list(VIEWS.items())))
    body = data.draw(event_of(event))
    seen = msgspec.json.decode(ev.encode_body(body), type=view)
    for name in view.__struct_fields__:
        got = getattr(seen, name)
        if isinstance(got, msgspec.Raw):
            assert msgspec.json.decode(got) == _as_json(getattr(body, name))
        else:
            assert got == getattr(body, name)
