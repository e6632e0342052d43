# Shared by the end-to-end scripts (sourced): finding a browser, and the port paqd logged.

# The first of chromium, chromium-browser, google-chrome on PATH into $browser; exits 77
# (ctest: skipped) when there is none.
find_browser() {
  browser=""
  for b in chromium chromium-browser google-chrome; do
    command -v "$b" > /dev/null && { browser=$b; return 0; }
  done
  echo "SKIP: no chromium (Debian package chromium; scripts/setup.sh installs it)"
  exit 77
}

# The port of the first "WHAT: http://127.0.0.1:PORT" line of LOG, waiting up to 60 s (a
# sanitized paqd on a loaded machine takes seconds to start); empty when none came or PID
# (if given) exited first.
#   port=$(logged_port LOG WHAT [PID])
logged_port() {
  local log=$1 what=$2 pid=${3:-} p=""
  for _ in $(seq 600); do
    p=$(grep -o "$what: http://127.0.0.1:[0-9]*" "$log" 2> /dev/null | head -1 | grep -o '[0-9]*$' || true)
    [[ -n $p ]] && break
    [[ -n $pid ]] && ! kill -0 "$pid" 2> /dev/null && break
    sleep 0.1
  done
  echo "$p"
}
