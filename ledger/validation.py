"""A pydantic ``ValidationError`` in plain words: one line per field.

pydantic's own text is a multi-line dump ending in a documentation URL; a
person reads "fault_share: must be a number above 0 and at most 1; got 'abc'"
instead. What a field must be comes from the model's JSON schema (its type and
bounds), so a new field or bound needs nothing here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["field_problems", "plain_problems"]

#: A value echoed back is cut to this many characters.
_SHOWN = 60


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _bounds(schema: dict[str, Any]) -> str:
    low = [
        f"above {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "",
        f"at least {schema['minimum']}" if "minimum" in schema else "",
    ]
    high = [
        f"below {schema['exclusiveMaximum']}" if "exclusiveMaximum" in schema else "",
        f"at most {schema['maximum']}" if "maximum" in schema else "",
    ]
    lo, hi = "".join(low), "".join(high)
    if "minimum" in schema and "maximum" in schema:
        return f" from {schema['minimum']} to {schema['maximum']}"
    return " " + " and ".join(part for part in (lo, hi) if part) if lo or hi else ""


def _enum(values: list[Any]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _what(schema: dict[str, Any]) -> str | None:
    """What a value of ``schema`` must be, in words (``None``: nothing to say)."""
    if "enum" in schema:
        return _enum(schema["enum"])
    kind = schema.get("type")
    if kind == "number":
        return "a number" + _bounds(schema)
    if kind == "integer":
        return "a whole number" + _bounds(schema)
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        return "a string"
    if kind == "array":
        item = _what(schema.get("items", {}))
        plural = f" of {item[2:]}s" if item and item.startswith("a ") else ""
        return "a list" + plural
    if kind == "object":
        value = schema.get("additionalProperties")
        inner = _what(value) if isinstance(value, dict) else None
        return "a mapping" + (f" of names to {inner}" if inner else "")
    return None


#: pydantic's error types, in words, where the field's schema says nothing.
_TYPES = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "mapping_type": "a mapping",
}


def _line(error: Any, fields: dict[str, Any], *, show_input: bool) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "the value"
    kind = error["type"]
    got = f"; got {_shown(error['input'])}" if show_input and "input" in error else ""
    if kind == "extra_forbidden":
        return f"{loc}: is not a known field"
    if kind == "missing":
        return f"{loc}: is missing"
    if kind in ("value_error", "assertion_error"):
        message = str(error["msg"]).removeprefix("Value error, ")
        return f"{loc}: {message.removeprefix('Assertion failed, ')}"
    schema = fields.get(str(error["loc"][0])) if len(error["loc"]) == 1 else None
    what = _what(schema) if isinstance(schema, dict) else None
    if what is None and kind == "literal_error":
        what = str(error.get("ctx", {}).get("expected", "")) or None
    if what is None:
        what = _TYPES.get(kind)
    if what is None:  # a constraint pydantic words plainly enough ("greater than 1")
        message = str(error["msg"])
        return f"{loc}: {message[:1].lower()}{message[1:]}{got}"
    return f"{loc}: must be {what}{got}"


def field_problems(
    exc: ValidationError,
    model: type[BaseModel] | None = None,
    *,
    show_input: bool = True,
) -> list[str]:
    """One plain line per problem of ``exc``: the field, what it must be, the value.

    ``model``: the model validated, whose JSON schema says what each field
    takes (its type and bounds). ``show_input=False`` never echoes a value
    (for files a value of which may be private).
    """
    fields: dict[str, Any] = {}
    if model is not None:
        fields = model.model_json_schema().get("properties", {})
    return [
        _line(error, fields, show_input=show_input)
        for error in exc.errors(include_url=False)
    ]


def plain_problems(
    exc: ValidationError,
    model: type[BaseModel] | None = None,
    *,
    show_input: bool = True,
) -> str:
    """``field_problems`` as text: one line, or each problem on its own line."""
    lines = field_problems(exc, model, show_input=show_input)
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:" + "".join(f"\n  {line}" for line in lines)
