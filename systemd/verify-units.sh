#!/usr/bin/env bash
# Runs `systemd-analyze verify` on the generated units, twice:
#   1. copies whose ExecStart points at the paqd in the build tree;
#   2. the units as generated, in a staged root where the built paqd sits at the installed
#      path (ExecStart must name an executable, and the real one is not installed here).
#      Also with the iio drop-in (IIO_DROPIN) in each unit's .d directory, and the template
#      with the drop-in installed beside it (TEMPLATE_DROPIN: paqd@.service.d/host-threads.conf).
#   3. the sysusers.d entry, applied by systemd-sysusers to an empty root, creates paqd.
#   4. `systemd-analyze security --offline` rates each unit's exposure at most 2.0 (it was
#      3.5 before SystemCallFilter, ProtectProc, RestrictRealtime, ...; 1.6 now).
# Usage: verify-units.sh SYSTEMD_ANALYZE BUILT_PAQD INSTALLED_PAQD SYSUSERS_CONF IIO_DROPIN TEMPLATE_DROPIN UNIT...
# Exits 77 (CTest: skipped) when systemd-analyze is not available.
set -euo pipefail

analyze=$1 built=$2 installed=$3 sysusers_conf=$4 iio_dropin=$5 template_dropin=$6
shift 6
if [[ -z $analyze || ! -x $analyze ]]; then
  echo "verify-units: systemd-analyze not found; skipping"
  exit 77
fi
if [[ ! -x $built ]]; then
  echo "verify-units: $built does not exist; build the paqd target first" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/paqd-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A template (name@.service) is checked through an instance, so that %i is expanded.
instance_name() {
  local name
  name=$(basename "$1")
  [[ $name == *@.service ]] && name=${name%@.service}@link1.service
  echo "$name"
}

status=0
verify() {
  local label=$1
  shift
  local out
  if out=$("$analyze" verify --man=no "$@" 2>&1) && [[ -z $out ]]; then
    echo "verify-units: $label: ok"
  else
    # verify also warns without failing (unknown directives, bad values it ignores): a unit
    # that produces any message is not clean.
    echo "verify-units: $label: FAILED" >&2
    echo "$out" >&2
    status=1
  fi
}

# 1. ExecStart at the build tree's paqd.
mkdir -p "$work/build-copy"
for unit in "$@"; do
  grep -q "^ExecStart=$installed " "$unit" || { echo "verify-units: $unit: no 'ExecStart=$installed '" >&2; exit 1; }
  sed "s|^ExecStart=$installed |ExecStart=$built |" "$unit" > "$work/build-copy/$(basename "$unit")"
  verify "$(basename "$unit") (ExecStart=$built)" "$work/build-copy/$(instance_name "$unit")"
done

# 2. The generated units unchanged, in a root that has the system's units (for the default
# dependencies: sysinit.target, ...) and paqd at its installed path.
root=$work/root
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root$(dirname "$installed")"
for dir in /usr/lib/systemd/system /lib/systemd/system; do
  if [[ -d $dir ]]; then
    cp -r "$dir" "$root/usr/lib/systemd/"
    break
  fi
done
cp "$built" "$root$installed"
for unit in "$@"; do
  cp "$unit" "$root/etc/systemd/system/"
  verify "$(basename "$unit") (as installed, ExecStart=$installed)" --root="$root" \
    "$root/etc/systemd/system/$(instance_name "$unit")"
done

# 2b. The same with the iio drop-in enabled (the template's drop-in directory is
# paqd@.service.d/, which applies to every instance).
for unit in "$@"; do
  mkdir -p "$root/etc/systemd/system/$(basename "$unit").d"
  cp "$iio_dropin" "$root/etc/systemd/system/$(basename "$unit").d/iio.conf"
  verify "$(basename "$unit") + $(basename "$iio_dropin")" --root="$root" \
    "$root/etc/systemd/system/$(instance_name "$unit")"
  rm -r "$root/etc/systemd/system/$(basename "$unit").d"
done

# 2c. The template with the drop-in the package installs beside it.
for unit in "$@"; do
  [[ $(basename "$unit") == *@.service ]] || continue
  mkdir -p "$root/etc/systemd/system/$(basename "$unit").d"
  cp "$template_dropin" "$root/etc/systemd/system/$(basename "$unit").d/host-threads.conf"
  verify "$(basename "$unit") + host-threads.conf" --root="$root" "$root/etc/systemd/system/$(instance_name "$unit")"
  rm -r "$root/etc/systemd/system/$(basename "$unit").d"
done

# 4. Exposure (systemd 250+ can rate a unit file offline; older ones skip this check).
if "$analyze" security --help 2>/dev/null | grep -q -- '--offline'; then
  for unit in "$@"; do
    if out=$("$analyze" security --offline=yes --threshold=20 --no-pager "$work/build-copy/$(instance_name "$unit")" 2>&1); then
      echo "verify-units: $(basename "$unit"): $(grep -o 'Overall exposure level.*' <<<"$out")"
    else
      echo "verify-units: $(basename "$unit"): exposure above 2.0 (or not rated)" >&2
      grep -E 'Overall|✗' <<<"$out" >&2 || echo "$out" >&2
      status=1
    fi
  done
else
  echo "verify-units: systemd-analyze security --offline not available; exposure not checked"
fi

# 3. The user and group the units run as.
sysusers=$(dirname "$analyze")/systemd-sysusers
if [[ -x $sysusers ]]; then
  mkdir -p "$work/users/etc"
  if "$sysusers" --root="$work/users" "$sysusers_conf" >/dev/null 2>&1 &&
     grep -q '^paqd:x:[0-9]*:[0-9]*:.*:/var/lib/paqd:' "$work/users/etc/passwd" &&
     grep -q '^paqd:x:' "$work/users/etc/group"; then
    echo "verify-units: $(basename "$sysusers_conf"): creates user and group paqd"
  else
    echo "verify-units: $(basename "$sysusers_conf"): systemd-sysusers did not create paqd" >&2
    status=1
  fi
else
  echo "verify-units: systemd-sysusers not found; sysusers entry not checked"
fi
exit $status
