#!/usr/bin/env bash
# Writes the bash completion of one program from its --help (and, for each subcommand that
# --help lists, from `PROGRAM SUBCOMMAND --help`), so that the completion cannot drift from
# the options. Called by packaging/CMakeLists.txt at build time.
#
#   packaging/completion.sh NAME BINARY OUTPUT
set -euo pipefail
name=$1 bin=$2 out=$3

options_of() {  # the long and short options a --help text lists
  grep -oE -- '(^|[ ,])--?[A-Za-z0-9][A-Za-z0-9-]*' | sed 's/^[ ,]//' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# The case branches for the options that take a value (CLI11 prints a type after them, e.g.
# "--backend TEXT:{auto,cpu,cuda}=cpu"): their choices where --help lists them, else bash's
# default completion (file names), never a subcommand.
value_cases() {
  awk '
    /^ +-/ {
      line = $0
      sub(/^ +/, "", line)
      n = split(line, w, / +/)
      names = w[1]; type = w[2]
      if (type !~ /^(TEXT|INT|UINT|FLOAT|NUMBER|ENUM|BOOLEAN)/) next
      choices = ""
      if (match(type, /\{[^}]*\}/)) {
        choices = substr(type, RSTART + 1, RLENGTH - 2)
        gsub(/,/, " ", choices)
      }
      gsub(/,/, "|", names)
      if (choices != "") printf "      %s) mapfile -t COMPREPLY < <(compgen -W \"%s\" -- \"$cur\"); return ;;\n", names, choices
      else printf "      %s) return ;;\n", names
    }'
}
help=$("$bin" --help)
top=$(options_of <<< "$help")
# CLI11 lists subcommands under "Subcommands:", one indented name per line.
subs=$(awk '/^Subcommands:/ {on = 1; next} on && /^[^ ]/ {on = 0} on && NF {print $1}' <<< "$help" | tr '\n' ' ' | sed 's/ $//')
fn=_$(tr -c 'A-Za-z0-9\n' '_' <<< "$name")

{
  echo "# bash completion for $name, generated from \`$name --help\` by packaging/completion.sh."
  echo "$fn() {"
  echo "  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} words=\"$top\" subcommands=\"$subs\" sub=\"\" i"
  if [[ -n $subs ]]; then
    echo "  for ((i = 1; i < COMP_CWORD; i++)); do"
    echo "    case \${COMP_WORDS[i]} in"
    for s in $subs; do
      echo "      $s) sub=$s; words=\"$("$bin" "$s" --help | options_of)\"; subcommands=\"\" ;;"
    done
    echo "    esac"
    echo "  done"
  fi
  # The word after an option that takes a value: the option's choices, or files.
  echo "  case \$sub in"
  for s in $subs; do
    echo "    $s)"
    echo "      case \$prev in"
    "$bin" "$s" --help | value_cases
    echo "      esac ;;"
  done
  echo "    *)"
  echo "      case \$prev in"
  value_cases <<< "$help"
  echo "      esac ;;"
  echo "  esac"
  echo "  if [[ \$cur == -* ]]; then"
  echo "    mapfile -t COMPREPLY < <(compgen -W \"\$words\" -- \"\$cur\")"
  echo "  elif [[ -n \$subcommands ]]; then"
  echo "    mapfile -t COMPREPLY < <(compgen -W \"\$subcommands\" -- \"\$cur\")"
  echo "  fi"
  echo "}"
  echo "# Anything else (file names, values) falls back to bash's default completion."
  echo "complete -o default -F $fn $name"
} > "$out"
