"""A small JSON Schema checker for the subset docs/report.schema.json uses (type, required,
properties, items, enum, const, minimum, maximum, minLength, additionalProperties, $ref to
$defs), so the report contract is checked without packages Debian's python3 lacks."""
import json
import os

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])


def errors(value, schema, root=None, path="$"):
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return errors(value, root["$defs"][name], root, path)
    out = []
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        if not any(_is(value, x) for x in ts):
            return ["%s: %r is not %s" % (path, value, t)]
    if "const" in schema and value != schema["const"]:
        out.append("%s: %r is not %r" % (path, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        out.append("%s: %r not in %s" % (path, value, schema["enum"]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append("%s: %r < %r" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            out.append("%s: %r > %r" % (path, value, schema["maximum"]))
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        out.append("%s: shorter than %d" % (path, schema["minLength"]))
    if isinstance(value, dict):
        for k in schema.get("required", []):
            if k not in value:
                out.append("%s: missing %s" % (path, k))
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                out += errors(v, props[k], root, path + "." + k)
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(v, schema["additionalProperties"], root, path + "." + k)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += errors(v, schema["items"], root, "%s[%d]" % (path, i))
    return out


def report_errors(report):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "docs", "report.schema.json")) as f:
        return errors(report, json.load(f))
