#!/usr/bin/env python3
"""Markdown tables from paq-ber-curve CSVs: BER per stream and Eb/N0, and for AWGN the
implementation loss at BER 1e-4 and 1e-5 against OQPSK theory (log10 BER interpolated linearly
in dB). A cell marked †NN% rests on NN% of the data bits: the PN checker was out of lock for
the rest. A CSV of --detector both (twelve streams) also gets each path's trellis gain: the
dB between its symbol-by-symbol and trellis curves at 1e-4 (and 1e-5).

usage: scripts/ber-tables.py docs/figures/ber-awgn.csv [more.csv ...]
"""
import csv
import math
import sys



def theory_ber(ebn0_db):
    return 0.5 * math.erfc(math.sqrt(10 ** (ebn0_db / 10)))


def crossing(points, target=1e-4):
    """Eb/N0 where the BER falls through target, or None if not bracketed."""
    pts = sorted((e, b) for e, b in points if b > 0)
    for (e0, b0), (e1, b1) in zip(pts, pts[1:]):
        if b0 >= target >= b1:
            l0, l1, lt = math.log10(b0), math.log10(b1), math.log10(target)
            return e0 + (e1 - e0) * (l0 - lt) / (l0 - l1)
    return None


def theory_crossing(target=1e-4):
    lo, hi = 0.0, 20.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if theory_ber(mid) > target else (lo, mid)
    return lo


def main(files):
    for name in files:
        rows = list(csv.DictReader(open(name)))
        preset = rows[0]["preset"]
        table = {}
        for r in rows:
            found = int(r["packets_found"])
            coverage = int(r["bits"]) / (found * 6144) if found else 0.0
            table.setdefault(float(r["ebn0_db"]), {})[r["path"]] = (float(r["ber"]), int(r["errors"]), int(r["bits"]), coverage)
        PATHS = list(dict.fromkeys(r["path"] for r in rows))  # the CSV's streams, in order
        print(f"### {preset}\n")
        head = "| Eb/N0 dB | " + " | ".join(PATHS) + (" | theory |" if preset == "awgn" else " |")
        print(head)
        print("|" + "---|" * (len(PATHS) + 1 + (preset == "awgn")))
        for e in sorted(table):
            cells = []
            for p in PATHS:
                ber, err, bits, cov = table[e][p]
                cell = f"{ber:.2e}" if err else f"0 (of {bits})"
                # The PN checker was out of lock for part of the stream: the BER covers only
                # the locked stretches and is biased low.
                cells.append(cell + (f" †{cov:.0%}" if cov < 0.9 else ""))
            line = f"| {e:g} | " + " | ".join(cells)
            line += f" | {theory_ber(e):.2e} |" if preset == "awgn" else " |"
            print(line)
        print()
        at = {(p, target): crossing([(e, table[e][p][0]) for e in table], target) for p in PATHS for target in (1e-4, 1e-5)}
        if preset == "awgn":
            t4, t5 = theory_crossing(1e-4), theory_crossing(1e-5)
            print(f"Loss against theory (theory reaches 1e-4 at {t4:.2f} dB, 1e-5 at {t5:.2f} dB):\n")
            print("| path | Eb/N0 at 1e-4 | loss dB | Eb/N0 at 1e-5 | loss dB |\n|---|---|---|---|---|")
            for p in PATHS:
                cells = []
                for target, t in ((1e-4, t4), (1e-5, t5)):
                    c = at[(p, target)]
                    cells += [f"{c:.2f}", f"{c - t:.2f}"] if c is not None else ["not bracketed", ""]
                print(f"| {p} | " + " | ".join(cells) + " |")
            print()
        trellis = [p for p in PATHS if p.endswith("_trellis")]
        if trellis:
            print("Trellis gain (dB from the symbol-by-symbol curve to the trellis curve, same packets):\n")
            print("| path | at 1e-4 | at 1e-5 |\n|---|---|---|")
            for p in trellis:
                base = p[: -len("_trellis")]
                cells = []
                for target in (1e-4, 1e-5):
                    a, b = at[(base, target)], at[(p, target)]
                    cells.append(f"{a - b:.2f}" if a is not None and b is not None else "not bracketed")
                print(f"| {base} | " + " | ".join(cells) + " |")
            print()


if __name__ == "__main__":
    main(sys.argv[1:])
