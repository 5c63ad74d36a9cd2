"""The text rule, published once for every input string of the OpenAPI document.

memsys refuses a NUL character in any text it takes (PostgreSQL cannot store one; see
`check_values`). Rather than repeat that on each field, `publish_text_rule` walks what the
routes take (parameters and request bodies, following `$ref`s into the components) and gives
every string without a narrower rule (a pattern, an enum, a format) TEXT_PATTERN, and every
free-form object TEXT_PATTERN on its keys. Output models are not touched.
"""

from __future__ import annotations

from typing import Any

from memsys.schemas.common import MAX_DEPTH, TEXT_PATTERN

NARROWER = ("pattern", "enum", "const", "format")
TYPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")
TEXT_JSON_REF = "#/components/schemas/TextJson"
# Any JSON value whose strings and object keys hold no NUL: metadata, a preference's value.
TEXT_JSON: dict[str, Any] = {
    "description": "Any JSON value; its text (strings and object keys) holds no NUL",
    "anyOf": [
        {"type": "string", "pattern": TEXT_PATTERN},
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": {"$ref": TEXT_JSON_REF}},
        {
            "type": "object",
            "additionalProperties": {"$ref": TEXT_JSON_REF},
            "propertyNames": {"pattern": TEXT_PATTERN},
        },
    ],
}
SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")
NOTE = (
    "Text takes no NUL character (\\u0000) and no lone surrogate (\\ud800-\\udfff); "
    f"lists and objects nest at most {MAX_DEPTH} levels."
)


def publish_text_rule(document: dict[str, Any]) -> dict[str, Any]:
    """`document` (an OpenAPI 3 dict) with the text rule on every input string; in place."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("TextJson", TEXT_JSON)
    seen: set[str] = set()

    def visit(schema: Any, value: bool = True) -> None:
        """`value`: `schema` describes a value (a field, an item), not a branch of a rule."""
        if not isinstance(schema, dict) or ("required" in schema and "type" not in schema):
            return  # not a value: "these fields are given" (memsys.schemas.common.given)
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in seen and name in components:
                seen.add(name)
                visit(components[name])
            return
        if schema.get("type") == "string" and not any(k in schema for k in NARROWER):
            schema["pattern"] = TEXT_PATTERN
        if schema.get("type") == "object" and "propertyNames" not in schema:
            extra = schema.get("additionalProperties")
            if extra is True or extra == {}:  # free-form values: JSON whose text has no NUL
                schema["additionalProperties"] = {"$ref": TEXT_JSON_REF}
            if extra is not None and extra is not False:
                schema["propertyNames"] = {"pattern": TEXT_PATTERN}
        if value and not any(k in schema for k in TYPED):  # any JSON value (a preference's)
            schema["allOf"] = [{"$ref": TEXT_JSON_REF}]
        for key in ("properties", "patternProperties", "$defs"):
            for sub in (schema.get(key) or {}).values():
                visit(sub)
        for key in SUBSCHEMAS:
            for sub in schema.get(key) or ():
                visit(sub, value=False)
        for key in ("items", "additionalProperties"):
            visit(schema.get(key))
        visit(schema.get("not"), value=False)

    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", ()):
                visit(parameter.get("schema"))
            for media in (operation.get("requestBody") or {}).get("content", {}).values():
                visit(media.get("schema"))
    info = document.setdefault("info", {})
    if NOTE not in info.get("description", ""):
        info["description"] = f"{info.get('description', '')}\n\n{NOTE}".strip()
    return document
