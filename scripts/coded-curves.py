#!/usr/bin/env python3
"""Post-decoding BER and FER of every stream of a coded link against Eb/N0 per information bit.

For each point: paq-sim --ldpc CODE writes a recording (PN15 information bits in codeword-aligned
data fields, or the continuous stream of sync-marked frames for the codes whose codeword does not
divide the data field; docs/BITSTREAM.md, "Coded data fields"), `paqd replay --detector both
--json-out` decodes it on every stream, and each stream's decoded BER, frame error rate, mean iterations
and channel BER before decoding go to one CSV row. The Eb/N0 is per information bit: paq-sim's
(per transmitted bit) minus 10 log10 of the code rate.

    scripts/coded-curves.py --code ar4ja-4096-2/3 --preset awgn --info-ebn0-db 3,3.5,4,4.5 \\
        --backend cuda --output coded-awgn.csv

Binaries: --bin DIR holding paq-sim and paqd (default: build/tools and build/daemon).
Exit status: 0 written; 1 a program failed (its output is printed); 2 bad arguments.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

RATES = {"ar4ja-1024-1/2": 0.5, "ar4ja-1024-2/3": 2 / 3, "ar4ja-1024-4/5": 0.8, "ar4ja-4096-1/2": 0.5, "ar4ja-4096-2/3": 2 / 3,
         "ar4ja-4096-4/5": 0.8}
COLUMNS = ["code", "preset", "info_ebn0_db", "channel_ebn0_db", "seed", "stream", "packets", "bits", "bit_errors", "ber",
           "codewords", "codewords_failed", "fer", "mean_iterations", "channel_ber"]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        sys.exit(f"coded-curves: {' '.join(cmd)} exited with {r.returncode}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", default="ar4ja-4096-2/3", choices=sorted(RATES))
    ap.add_argument("--preset", default="awgn", help="paq-sim's channel: awgn, two-ray, edwards3, flight")
    ap.add_argument("--info-ebn0-db", required=True, help="Eb/N0 per information bit, dB, comma-separated")
    ap.add_argument("--seconds", type=float, default=3.0, help="recording length per point (3 s: 4882 packets)")
    ap.add_argument("--seed", type=int, default=4242, help="seed of the first point; point i uses seed + i")
    ap.add_argument("--cfo-hz", type=float, default=20e3)
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--bin", default="", help="directory of paq-sim and paqd (default: the build tree)")
    ap.add_argument("--output", required=True, help="CSV file")
    a = ap.parse_args()
    try:
        points = [float(x) for x in a.info_ebn0_db.split(",")]
    except ValueError:
        ap.error(f"--info-ebn0-db: '{a.info_ebn0_db}' is not a comma-separated list of numbers")
    if not points or a.seconds <= 0:
        ap.error("at least one Eb/N0 and a positive --seconds")
    sim = os.path.join(a.bin, "paq-sim") if a.bin else "build/tools/paq-sim"
    paqd = os.path.join(a.bin, "paqd") if a.bin else "build/daemon/paqd"
    loss = -10 * math.log10(RATES[a.code])

    rows = []
    with tempfile.TemporaryDirectory(prefix="paq-coded-") as tmp:
        rec = os.path.join(tmp, "rec")
        for i, info in enumerate(points):
            channel = info - loss
            seed = a.seed + i
            run([sim, "--preset", a.preset, "--ebn0-db", f"{channel:.4f}", "--cfo-hz", str(a.cfo_hz), "--seconds",
                 str(a.seconds), "--seed", str(seed), "--ldpc", a.code, "--output", rec])
            summary = os.path.join(tmp, "replay.json")
            run([paqd, "replay", rec + ".sigmf-meta", "--backend", a.backend, "--detector", "both", "--json-out", summary])
            with open(summary) as f:
                out = json.load(f)
            if out.get("fec") != a.code:
                sys.exit(f"coded-curves: the replay decoded {out.get('fec')}, not {a.code}")
            for p in out["paths"]:
                cw = p["fec_codewords"]
                rows.append({"code": a.code, "preset": a.preset, "info_ebn0_db": info, "channel_ebn0_db": round(channel, 4),
                             "seed": seed, "stream": p["path"], "packets": p["packets"], "bits": p["bits"],
                             "bit_errors": p["bit_errors"], "ber": p["bit_errors"] / p["bits"] if p["bits"] else "",
                             "codewords": cw, "codewords_failed": p["fec_codewords_failed"],
                             "fer": p["fec_codewords_failed"] / cw if cw else "",
                             "mean_iterations": round(p["fec_iterations"] / cw, 3) if cw else "",
                             "channel_ber": p["fec_channel_ber"] if p["fec_channel_ber"] is not None else ""})
            os.remove(rec + ".sigmf-data")
    with open(a.output, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)

    # The table: decoded BER (FER) per stream and point.
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    print(f"{a.code}, {a.preset}, {a.seconds:g} s a point, {a.backend}: decoded BER (FER) per stream")
    print("| info Eb/N0 | " + " | ".join(streams) + " |")
    print("|---" * (len(streams) + 1) + "|")
    for info in points:
        cells = []
        for s in streams:
            r = next(x for x in rows if x["info_ebn0_db"] == info and x["stream"] == s)
            ber = f"{r['ber']:.1e}" if r["ber"] != "" else "-"
            fer = f"{r['fer']:.2g}" if r["fer"] != "" else "-"
            cells.append(f"{ber} ({fer})")
        print(f"| {info:g} dB | " + " | ".join(cells) + " |")
    print(f"written: {a.output} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
