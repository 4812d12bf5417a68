#!/usr/bin/env python3
"""Validates guided-decoding outputs with implementations Pagoda did not write.

Input: a JSON-lines file, one {"kind", "spec", "text"} per output (written by
tests/support/guided_cases.h). kind "json": text must parse (json.loads) and
validate against spec (jsonschema, Draft 2020-12, with FormatChecker so
"date"/"uuid" are checked); "json_object": text parses to a JSON object;
"regex": re.fullmatch(spec, text); "choice": text is one of spec;
"json_value": text parses (RFC 8259: NaN / Infinity rejected).
Prints a summary and each failure; exit status 1 when any output fails.
"""
import json
import re
import sys

import jsonschema


def check(case):
    kind, spec, text = case["kind"], case["spec"], case["text"]
    if kind == "regex":
        return None if re.fullmatch(spec, text) else "does not match the regex"
    if kind == "choice":
        return None if text in spec else "is not one of the choices"
    def no_constant(name):
        raise ValueError(f"{name} is not JSON")
    try:
        value = json.loads(text, parse_constant=no_constant)
    except ValueError as e:
        return f"is not JSON ({e})"
    if kind == "json_value":
        return None
    if kind == "json_object":
        return None if isinstance(value, dict) else "is not a JSON object"
    try:
        jsonschema.validate(value, spec, cls=jsonschema.Draft202012Validator,
                            format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as e:
        return f"does not validate: {e.message}"
    return None


def main():
    failures = 0
    counts = {}
    with open(sys.argv[1], encoding="utf-8") as f:
        for n, line in enumerate(f):
            case = json.loads(line)
            counts[case["kind"]] = counts.get(case["kind"], 0) + 1
            why = check(case)
            if why:
                failures += 1
                print(f"case {n} ({case['kind']}): output {case['text']!r} {why}; spec {json.dumps(case['spec'])}")
    print(f"validated {sum(counts.values())} outputs {counts}: {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
