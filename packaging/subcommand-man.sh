#!/usr/bin/env bash
# Writes a help2man include file (packaging/CMakeLists.txt) with one section per subcommand
# of a program, made from `PROGRAM SUBCOMMAND --help`, so that the man page also lists the
# subcommands' options (help2man reads only the top-level --help).
#
#   packaging/subcommand-man.sh BINARY OUTPUT SUBCOMMAND...
set -euo pipefail
bin=$1 out=$2; shift 2
name=$(basename "$bin")
{
  cat "$(dirname "$0")/man-see-also.h2m"
  for sub in "$@"; do
    echo "[${sub^^} SUBCOMMAND]"
    # CLI11's layout: a description line, "Usage: ...", then "Positionals:" and "Options:"
    # with "  NAME ARGS   description" rows whose description may continue on an indented line.
    "$bin" "$sub" --help | awk -v name="$name" -v sub_="$sub" '
      function roff(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); return "\\&" s }
      NR == 1 { print ".B " name " " sub_ " \\fR[\\fIOPTIONS\\fR]"; print ".PP"; print roff($0); next }
      /^Usage:/ { next }
      /^[A-Z][a-z]*:$/ { print ".SS \"" $0 "\""; next }
      /^  [^ ]/ {
        line = substr($0, 3)
        if (match(line, /   +/)) { head = substr(line, 1, RSTART - 1); desc = substr(line, RSTART + RLENGTH) }
        else { head = line; desc = "" }
        print ".TP"; print "\\fB" roff(head) "\\fR"; if (desc != "") print roff(desc); next
      }
      /^   +[^ ]/ { sub(/^ +/, ""); print roff($0); next }
      NF { print ".PP"; print roff($0) }'
  done
} > "$out"
