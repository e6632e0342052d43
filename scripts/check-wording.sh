#!/usr/bin/env bash
# The repository speaks of the product: code, tests, docs and file names say what the code
# does and why, never which tracker entry, review or stretch of work asked for it, and never
# cite a document that is not in the repository (name the standard or paper instead). Fails
# on any tracked file whose name or text matches the word list below.
set -euo pipefail
cd "$(dirname "$0")/.."
words=(
  'issue ?#?[0-9]'             # tracker entries
  'items? [0-9]'               # their numbered points
  'review finding'
  'finding [0-9]'
  '\bSPEC ?§?[0-9]'            # a specification outside the repository
  'SPEC\.md'
  '\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth|twentieth|thirtieth|(twenty|thirty|forty)-[a-z]+) session'
  '\bsession [0-9]'
  '\bstop [0-9]+\b'
  '\bround [0-9]+ of'
)
pattern=$(IFS='|'; echo "${words[*]}")
self=scripts/check-wording.sh
status=0
if names=$(git ls-files | grep -v "^$self\$" | grep -iE "$pattern|issue[0-9]"); then
  echo "check-wording: file names:" >&2
  echo "$names" >&2
  status=1
fi
if hits=$(git grep -InEi "$pattern" -- . ":(exclude)$self"); then
  echo "check-wording: text:" >&2
  echo "$hits" | cut -c1-200 >&2
  status=1
fi
((status == 0)) && echo "check-wording: no reference to trackers, reviews or outside documents"
exit $status
