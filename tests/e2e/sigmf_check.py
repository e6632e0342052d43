#!/usr/bin/env python3
"""Checks .sigmf-meta files against the official SigMF JSON schema, and the rules of the SigMF
specification that the schema cannot express:

  * every namespace used by a key of global, a capture or an annotation, other than core, is
    declared in global core:extensions (name, version, optional);
  * captures and annotations are in order of core:sample_start;
  * the .sigmf-data beside the meta file holds whole samples of core:datatype (paqd writes
    conforming datasets: no header or trailing bytes), and no annotation starts past its end.

    sigmf_check.py SCHEMA FILE.sigmf-meta...

Prints one line per file; exits 0 when all pass, 1 when any fails, 77 (the test's SKIP code)
when the python jsonschema package (Debian: python3-jsonschema) is missing.
"""
import json
import os
import re
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as e:  # the test is skipped, saying why
    print(f"SKIP: python jsonschema with draft 2020-12 is not installed ({e}); "
          "install python3-jsonschema (scripts/setup.sh does)")
    sys.exit(77)

SAMPLE_BYTES = {"f32": 4, "f64": 8, "i32": 4, "i16": 2, "u32": 4, "u16": 2, "i8": 1, "u8": 1}


def namespaces(obj):
    return {k.split(":", 1)[0] for k in obj if ":" in k} - {"core"}


def check(validator, meta_path):
    problems = []
    with open(meta_path, encoding="utf-8") as f:
        doc = json.load(f)
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        problems.append(f"schema: {where}: {err.message}")
    if problems:
        return problems, doc
    glob = doc["global"]
    declared = {e["name"] for e in glob.get("core:extensions", [])}
    used = set(namespaces(glob))
    for section in ("captures", "annotations"):
        for item in doc[section]:
            used |= namespaces(item)
        starts = [item["core:sample_start"] for item in doc[section]]
        if starts != sorted(starts):
            problems.append(f"{section} are not in order of core:sample_start")
    for ns in sorted(used - declared):
        problems.append(f"namespace '{ns}' is used but not declared in core:extensions")

    data_path = re.sub(r"\.sigmf-meta$", ".sigmf-data", meta_path)
    m = re.match(r"^(c|r)(f32|f64|i32|i16|u32|u16|i8|u8)", glob["core:datatype"])
    if not os.path.exists(data_path):
        problems.append(f"{data_path} is missing")
    elif m:
        sample = SAMPLE_BYTES[m.group(2)] * (2 if m.group(1) == "c" else 1)
        size = os.path.getsize(data_path)
        if size % sample:
            problems.append(f"{data_path}: {size} bytes is not a whole number of {sample}-byte samples")
        n = size // sample
        for a in doc["annotations"]:
            if a["core:sample_start"] > n:
                problems.append(f"annotation at sample {a['core:sample_start']} is past the data ({n} samples)")
    return problems, doc


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    failed = 0
    for path in sys.argv[2:]:
        problems, doc = check(validator, path)
        if problems:
            failed += 1
            print(f"FAIL {path}")
            for p in problems:
                print(f"  {p}")
        else:
            exts = ", ".join(f"{e['name']} {e['version']}" for e in doc["global"].get("core:extensions", []))
            print(f"ok   {path}: SigMF {doc['global']['core:version']}, extensions [{exts}], "
                  f"{len(doc['captures'])} capture(s), {len(doc['annotations'])} annotation(s)")
    print(f"{len(sys.argv) - 2 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
