"""The JSON-schema subset the comms tools declare, and the validator their
handlers run: an LLM's arguments are checked against the same schema it was
shown, never trusted.

Supported keywords: type (object, array, string, integer, boolean),
properties, required, additionalProperties (false only), items, minItems,
maxItems, minLength, maxLength, pattern (searched, as JSON Schema does), enum
(strings), minimum, maximum, description. `check_schema` refuses anything
else, so a tool can't declare a rule its handler would not enforce.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["NOT_BLANK", "Refused", "check_schema", "errors", "id_param", "text_param"]

# Unanchored: the value holds at least one non-space character.
NOT_BLANK = r"\S"

_KEYWORDS = {
    "object": {"type", "description", "properties", "required", "additionalProperties"},
    "array": {"type", "description", "items", "minItems", "maxItems"},
    "string": {"type", "description", "minLength", "maxLength", "pattern", "enum"},
    "integer": {"type", "description", "minimum", "maximum"},
    "boolean": {"type", "description"},
}


class Refused(Exception):
    """An argument refused before anything is sent, for a reason a schema
    can't say (a time that is no time, a file outside the sandbox); the tool
    reports it as `<tool> failed: <code>: <message>`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def id_param(description: str) -> dict[str, Any]:
    """An id argument: never empty, never only spaces."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 256,
        "pattern": NOT_BLANK,
        "description": description,
    }


def text_param(description: str, *, max_length: int | None = None) -> dict[str, Any]:
    """A text argument that must say something."""
    param: dict[str, Any] = {
        "type": "string",
        "minLength": 1,
        "pattern": NOT_BLANK,
        "description": description,
    }
    if max_length is not None:
        param["maxLength"] = max_length
    return param


def check_schema(schema: Mapping[str, Any], path: str = "$") -> None:
    """Raise ValueError when the schema uses a keyword `errors` does not enforce."""
    kind = schema.get("type")
    if kind not in _KEYWORDS:
        raise ValueError(f"{path}: type {kind!r} is not supported")
    unknown = set(schema) - _KEYWORDS[kind]
    if unknown:
        raise ValueError(f"{path}: unsupported keyword(s) {sorted(unknown)} (e.g. format)")
    if kind == "object":
        if schema.get("additionalProperties", False) is not False:
            raise ValueError(f"{path}: additionalProperties must be false")
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in properties:
                raise ValueError(f"{path}: required {name!r} is not a property")
        for name, sub in properties.items():
            check_schema(sub, f"{path}.{name}")
    elif kind == "array":
        check_schema(schema["items"], f"{path}[]")
    elif kind == "string" and "pattern" in schema:
        re.compile(schema["pattern"])


def errors(schema: Mapping[str, Any], value: object, path: str = "") -> list[str]:
    """Every way `value` breaks `schema`, as short sentences naming the path."""
    name = path or "the value"
    kind = schema["type"]
    if kind == "object":
        return _object_errors(schema, value, path)
    if kind == "array":
        if type(value) is not list:
            return [f"{name} must be an array"]
        found = _count_errors(name, len(value), schema, "have", "item(s)", "Items")
        for i, item in enumerate(value):
            found += errors(schema["items"], item, f"{path}[{i}]")
        return found
    if kind == "string":
        if type(value) is not str:
            return [f"{name} must be a string"]
        return _string_errors(schema, value, name)
    if kind == "integer":
        # JSON has one number type: 2.0 is the integer 2, True is not.
        if type(value) is float and math.isfinite(value) and value.is_integer():
            value = int(value)
        if type(value) is not int:
            return [f"{name} must be an integer"]
        if "minimum" in schema and value < schema["minimum"]:
            return [f"{name} must be at least {schema['minimum']}"]
        if "maximum" in schema and value > schema["maximum"]:
            return [f"{name} must be at most {schema['maximum']}"]
        return []
    if type(value) is not bool:
        return [f"{name} must be a boolean"]
    return []


def _object_errors(schema: Mapping[str, Any], value: object, path: str) -> list[str]:
    if type(value) is not dict:
        return [f"{path or 'the arguments'} must be an object"]
    properties: Mapping[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    found = [f"{prefix}{key} is required" for key in schema.get("required", []) if key not in value]
    for key, item in value.items():
        sub = properties.get(key) if type(key) is str else None
        if sub is None:
            found.append(f"{prefix}{key} is not a parameter")
        else:
            found += errors(sub, item, f"{prefix}{key}")
    return found


def _string_errors(schema: Mapping[str, Any], value: str, name: str) -> list[str]:
    try:
        # JSON can carry a lone surrogate; a protobuf string can't hold one.
        value.encode("utf-8")
    except UnicodeEncodeError:
        return [f"{name} must be valid text"]
    if "\x00" in value:
        # Compass stores text in PostgreSQL, which can't hold a NUL.
        return [f"{name} must not contain NUL characters"]
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(f'"{choice}"' for choice in schema["enum"])
        return [f"{name} must be one of {choices}"]
    if "pattern" in schema and not re.search(schema["pattern"], value):
        if schema["pattern"] == NOT_BLANK:
            return [f"{name} must not be blank"]
        return [f"{name} must match {schema['pattern']!r}"]
    return _count_errors(name, len(value), schema, "be", "characters", "Length")


def _count_errors(
    name: str, n: int, schema: Mapping[str, Any], verb: str, unit: str, suffix: str
) -> list[str]:
    low, high = schema.get(f"min{suffix}"), schema.get(f"max{suffix}")
    if low is not None and n < low:
        return [f"{name} must {verb} at least {low} {unit}"]
    if high is not None and n > high:
        return [f"{name} must {verb} at most {high} {unit}"]
    return []
