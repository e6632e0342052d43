#!/usr/bin/env python3
"""The cost of the tests, from the JUnit files ctest writes (scripts/test.sh:
build/test-results.xml; scripts/sanitize.sh: build-asan/test-results.xml).

    scripts/test-costs.py OPTIMIZED.xml [SANITIZED.xml] [--update docs/TESTING.md]

Prints a Markdown table: per test program (a GoogleTest binary, or the e2e scripts), the
tests run and their seconds in each run, and the slowest tests. With --update, replaces the
text between the markers `<!-- test-costs begin -->` and `<!-- test-costs end -->` of the
given file with it.
"""
import collections
import sys
import xml.etree.ElementTree as ET

BEGIN, END = "<!-- test-costs begin -->", "<!-- test-costs end -->"


def read(path):
    """(name, seconds, status) of every test case of a ctest JUnit file."""
    root = ET.parse(path).getroot()
    cases = []
    for c in root.iter("testcase"):
        status = c.get("status", "run")
        if c.find("skipped") is not None:
            status = "skipped"
        elif c.find("failure") is not None:
            status = "failed"
        cases.append((c.get("name"), float(c.get("time", "0")), status))
    return cases


def group(name):
    """The program a test belongs to: its GoogleTest suite's prefix, or e2e/cli/... scripts."""
    head = name.split("/")[-1].split(".")[0]
    return head


def table(runs):
    out = []
    labels = [label for label, _ in runs]
    totals = []
    for label, cases in runs:
        ran = [c for c in cases if c[2] != "skipped"]
        totals.append((label, len(ran), sum(c[1] for c in ran), sum(1 for c in cases if c[2] == "skipped")))
    out.append("| run | tests run | skipped | sum of test times |")
    out.append("|---|---|---|---|")
    for label, n, secs, skipped in totals:
        out.append(f"| {label} | {n} | {skipped} | {secs:.0f} s |")
    out.append("")
    per = collections.defaultdict(dict)
    for label, cases in runs:
        acc = collections.defaultdict(lambda: [0, 0.0])
        for name, secs, status in cases:
            if status == "skipped":
                continue
            acc[group(name)][0] += 1
            acc[group(name)][1] += secs
        for g, (n, secs) in acc.items():
            per[g][label] = (n, secs)
    order = sorted(per, key=lambda g: -max(v[1] for v in per[g].values()))
    out.append("| suite | " + " | ".join(f"{lab}: tests, s" for lab in labels) + " |")
    out.append("|---|" + "---|" * len(labels))
    for g in order[:25]:
        cells = []
        for lab in labels:
            n, secs = per[g].get(lab, (0, 0.0))
            cells.append(f"{n}, {secs:.1f}" if n else "-")
        out.append(f"| {g} | " + " | ".join(cells) + " |")
    rest = order[25:]
    if rest:
        cells = []
        for lab in labels:
            n = sum(per[g].get(lab, (0, 0.0))[0] for g in rest)
            secs = sum(per[g].get(lab, (0, 0.0))[1] for g in rest)
            cells.append(f"{n}, {secs:.1f}")
        out.append(f"| {len(rest)} other suites | " + " | ".join(cells) + " |")
    out.append("")
    label, cases = runs[0]
    slowest = sorted((c for c in cases if c[2] != "skipped"), key=lambda c: -c[1])[:12]
    out.append(f"Slowest in the {label} run: " + ", ".join(f"`{n}` {s:.0f} s" for n, s, _ in slowest) + ".")
    return "\n".join(out)


def main(argv):
    update = None
    if "--update" in argv:
        i = argv.index("--update")
        update = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    names = ["optimized", "sanitized"]
    runs = []
    for label, path in zip(names, argv):
        try:
            runs.append((label, read(path)))
        except (OSError, ET.ParseError) as e:
            print(f"test-costs: {path}: {e}", file=sys.stderr)
            return 1
    text = table(runs)
    print(text)
    if update:
        doc = open(update, encoding="utf-8").read()
        if BEGIN not in doc or END not in doc:
            print(f"test-costs: {update} has no {BEGIN} ... {END}", file=sys.stderr)
            return 1
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        open(update, "w", encoding="utf-8").write(head + BEGIN + "\n" + text + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
