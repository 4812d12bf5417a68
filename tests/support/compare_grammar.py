#!/usr/bin/env python3
"""Checks Pagoda's grammar recogniser against references it did not write.

Input: a JSON-lines file, one {"kind", "spec", "text", "ours"} per string
(written by tests/unit/guided_grammar_test.cpp). kind "regex": the grammar
is equivalent to the Python regex spec, so ours must equal
bool(re.fullmatch(spec, text)); kind "json": the grammar is JSON (RFC 8259),
so ours must equal whether json.loads(text) succeeds (NaN / Infinity, which
Python accepts and RFC 8259 does not, count as failures).
Prints each disagreement and a summary; exit status 1 on any.
"""
import json
import re
import sys


def reference(kind, spec, text):
    if kind == "regex":
        return re.fullmatch(spec, text, re.DOTALL) is not None
    if kind == "json":
        def no_constant(name):
            raise ValueError(name)
        try:
            json.loads(text, parse_constant=no_constant)
            return True
        except ValueError:
            return False
    raise SystemExit(f"unknown kind {kind}")


def main():
    bad = 0
    counts = {}
    with open(sys.argv[1], encoding="utf-8") as f:
        for n, line in enumerate(f):
            case = json.loads(line)
            ref = reference(case["kind"], case["spec"], case["text"])
            key = (case["kind"], ref)
            counts[key] = counts.get(key, 0) + 1
            if ref != case["ours"]:
                bad += 1
                if bad <= 20:
                    print(f"line {n}: {case['kind']} text {case['text']!r}: reference {ref}, "
                          f"ours {case['ours']}; spec {case['spec']!r}")
    summary = ", ".join(f"{k} {'accepted' if r else 'rejected'}: {c}"
                        for (k, r), c in sorted(counts.items()))
    print(f"compared {sum(counts.values())} strings ({summary}): {bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
