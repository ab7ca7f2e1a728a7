#!/usr/bin/env python3
"""Checks JSON files against a JSON Schema, with Python's standard library only.

Usage: validate_json.py SCHEMA FILE...

Prints one line per problem (the file, where in it, what is wrong) and exits 1 if any file
fails, 0 if all pass, 2 if the schema itself cannot be used.

Only the part of JSON Schema that grader/gradescope/results_schema.json uses is implemented:
type, required, properties, additionalProperties (false, or a schema), items (one schema for
every element), enum and minimum; title, description, $schema and $comment are notes. A schema
that uses any other keyword is refused rather than half-checked: a keyword skipped in silence
would pass documents it was written to reject.

The files are also held to strict JSON: NaN and Infinity (which Python's json module would
accept) and a key given twice in one object are errors.
"""
import json
import sys

CHECKED = {"type", "required", "properties", "additionalProperties", "items", "enum", "minimum"}
NOTES = {"title", "description", "$schema", "$comment"}


class SchemaError(Exception):
    """The schema uses something this validator does not implement."""


def is_type(value, name):
    # bool is a subclass of int in Python, but true is no number in JSON.
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    raise SchemaError("unknown type %r" % name)


def check(value, schema, where, problems):
    """Appends to problems a line for each way value breaks schema."""
    if not isinstance(schema, dict):
        raise SchemaError("%s: a schema must be an object" % where)
    unknown = set(schema) - CHECKED - NOTES
    if unknown:
        raise SchemaError("%s: keywords this validator does not implement: %s" % (where, ", ".join(sorted(unknown))))

    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(is_type(value, n) for n in names):
            problems.append("%s: expected %s, got %s" % (where, " or ".join(names), json.dumps(value)[:80]))
            return  # the other keywords would only repeat the same mistake
    # Compared with their types: in Python, 1 == True and 1 == 1.0.
    if "enum" in schema and not any(type(value) is type(e) and value == e for e in schema["enum"]):
        problems.append("%s: %s is not one of %s" % (where, json.dumps(value)[:80], json.dumps(schema["enum"])))
    if "minimum" in schema and is_type(value, "number") and value < schema["minimum"]:
        problems.append("%s: %s is below the minimum %s" % (where, value, schema["minimum"]))

    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append("%s: the required field \"%s\" is missing" % (where, key))
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            inner = "%s.%s" % (where, key)
            if key in properties:
                check(item, properties[key], inner, problems)
            elif extra is False:
                problems.append("%s: the field \"%s\" is not in the schema" % (where, key))
            elif isinstance(extra, dict):
                check(item, extra, inner, problems)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(item, schema["items"], "%s[%d]" % (where, i), problems)


def strict_load(path):
    def no_constant(name):
        raise ValueError("%s is not JSON" % name)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        for k in keys:
            if keys.count(k) > 1:
                raise ValueError("the key \"%s\" appears twice in one object" % k)
        return dict(pairs)

    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=no_constant, object_pairs_hook=no_duplicates)


def main(argv):
    if len(argv) < 3:
        print("usage: validate_json.py SCHEMA FILE...", file=sys.stderr)
        return 2
    try:
        schema = strict_load(argv[1])
    except (OSError, ValueError) as e:
        print("%s: cannot read the schema: %s" % (argv[1], e), file=sys.stderr)
        return 2
    failed = False
    for path in argv[2:]:
        try:
            document = strict_load(path)
        except (OSError, ValueError) as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            print("%s: not valid JSON: %s" % (path, e))
            failed = True
            continue
        problems = []
        try:
            check(document, schema, "$", problems)
        except SchemaError as e:
            print("%s: the schema cannot be used here: %s" % (argv[1], e), file=sys.stderr)
            return 2
        for p in problems:
            print("%s: %s" % (path, p))
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
