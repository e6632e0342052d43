#!/usr/bin/env bash
# The Debian package and the install rules (README.md, "Debian package"):
#   1. `cmake --install BUILD --prefix TMP` writes every file under TMP (nothing into the live
#      system; DESTDIR unset), with the config in TMP/etc/paqd;
#   2. `cpack -G DEB` builds paqd_<version>_<arch>.deb; `dpkg -c` lists the programs, units,
#      sysusers, udev and sysctl files, man pages, completions and /etc/paqd/paqd.yaml;
#      `dpkg-deb -I` shows it as a conffile and Depends computed by dpkg-shlibdeps;
#   3. the package unpacked into a scratch root (`dpkg -x`) runs: paqd --version and
#      --check-config of its own /etc/paqd/paqd.yaml; the installed completion sources
#      under bash and completes a known option; each man page lists every option of --help;
#   4. with CUDA, the backend's own package;
#   5. lintian finds no error or warning in any package (where lintian is installed).
# Exits 77 (skipped) without dpkg-deb.
#
#   tests/e2e/package.sh BUILD_DIR
set -uo pipefail
command -v dpkg-deb > /dev/null || { echo "SKIP: dpkg-deb not found"; exit 77; }
build=$(cd "$1" && pwd)
version=$(sed -n 's/^project(paqd VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
programs=(paqd paq-sim paq-stream paq-bert paq-report paq-ber-curve)

# 1. cmake --install --prefix: everything under the prefix.
unset DESTDIR
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 || fail "cmake --install --prefix failed: $(tail -5 "$work/install.log")"
sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$work/install.log" > "$work/installed"
[[ -s $work/installed ]] || fail "cmake --install reported no files"
while read -r f; do
  [[ $f == "$prefix"/* ]] || fail "cmake --install --prefix $prefix wrote outside it: $f"
done < "$work/installed"
for f in etc/paqd/paqd.yaml bin/paqd lib/systemd/system/paqd.service lib/sysusers.d/paqd.conf; do
  [[ -f $prefix/$f ]] || fail "cmake --install --prefix: $f missing"
done
grep -q "^ExecStart=$prefix/bin/paqd --config $prefix/etc/paqd/paqd.yaml\$" "$prefix/lib/systemd/system/paqd.service" \
  || fail "paqd.service under --prefix does not name the installed paqd and config: $(grep ^ExecStart "$prefix/lib/systemd/system/paqd.service")"

# 2. cpack -G DEB, in a copy of the build's CPack configuration so that the build's own
#    _CPack_Packages/ and packages/ stay as they are.
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/cpack") > "$work/cpack.log" 2>&1 \
  || { fail "cpack -G DEB failed: $(tail -20 "$work/cpack.log")"; exit 1; }
debs=("$work"/cpack/paqd_"$version"_*.deb)
deb=${debs[0]}
[[ -f $deb ]] || { fail "no paqd_${version}_*.deb in $(ls "$work/cpack")"; exit 1; }
dpkg -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$work/contents"
expected=(/etc/paqd/paqd.yaml
          /usr/lib/systemd/system/paqd.service /usr/lib/systemd/system/paqd@.service
          /usr/lib/systemd/system/paqd@.service.d/host-threads.conf
          /usr/lib/sysusers.d/paqd.conf /usr/lib/udev/rules.d/60-paqd.rules /usr/lib/sysctl.d/90-paqd.conf
          /usr/share/paqd/paqd-iio.conf /usr/share/man/man8/paqd.8.gz /usr/share/man/man5/paqd.yaml.5.gz
          /usr/share/doc/paqd/DAEMON.md /usr/share/doc/paqd/README.md /usr/share/doc/paqd/CHANGELOG.md
          /usr/share/doc/paqd/copyright /usr/share/doc/paqd/changelog.gz)
for p in "${programs[@]}"; do
  expected+=("/usr/bin/$p" "/usr/share/bash-completion/completions/$p")
  [[ $p == paqd ]] || expected+=("/usr/share/man/man1/$p.1.gz")
done
for f in "${expected[@]}"; do
  grep -qxF "$f" "$work/contents" || fail "dpkg -c: $f missing"
done
grep -v -e '^/etc/paqd/' -e '^/usr/' -e '^/etc/$' -e '^/$' "$work/contents" | grep -v '/$' > "$work/stray" \
  && fail "dpkg -c: files outside /usr and /etc/paqd: $(tr '\n' ' ' < "$work/stray")"
dpkg-deb -I "$deb" > "$work/info"
grep -q "^ Package: paqd$" "$work/info" || fail "dpkg-deb -I: Package is not paqd"
grep -q "^ Version: $version$" "$work/info" || fail "dpkg-deb -I: Version is not $version"
grep -q "^ Depends: .*libc6" "$work/info" || fail "dpkg-deb -I: Depends not computed: $(grep Depends "$work/info")"
[[ "$(dpkg-deb -f "$deb" Package)" == paqd ]] || fail "dpkg-deb -f Package"
dpkg-deb -e "$deb" "$work/control"
[[ "$(cat "$work/control/conffiles" 2>/dev/null)" == /etc/paqd/paqd.yaml ]] || fail "conffiles is not /etc/paqd/paqd.yaml"
grep -q "systemctl.*enable\|systemctl.*start" "$work/control/postinst" && fail "postinst enables or starts the service"
grep -q "^ExecStart=/usr/bin/paqd --config /etc/paqd/paqd.yaml$" <(dpkg --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/paqd.service) \
  || fail "the packaged paqd.service does not run /usr/bin/paqd --config /etc/paqd/paqd.yaml"

# 3. The unpacked package runs.
root=$work/root
dpkg -x "$deb" "$root"
out=$("$root/usr/bin/paqd" --version 2>&1) || fail "unpacked paqd --version failed: $out"
[[ $out == "paqd $version" ]] || fail "unpacked paqd --version printed '$out'"
out=$("$root/usr/bin/paqd" --config "$root/etc/paqd/paqd.yaml" --check-config 2>&1) \
  || fail "unpacked paqd --check-config $root/etc/paqd/paqd.yaml failed: $(head -c 400 <<< "$out")"
for p in "${programs[@]}"; do
  out=$("$root/usr/bin/$p" --version 2>&1) || fail "unpacked $p --version: $out"
  # shellcheck disable=SC2016
  got=$(bash -c 'source "$1" || exit 1; COMP_WORDS=("$2" --vers); COMP_CWORD=1; "$(complete -p "$2" | sed "s/.*-F \([^ ]*\) .*/\1/")"; echo "${COMPREPLY[*]}"' \
        _ "$root/usr/share/bash-completion/completions/$p" "$p" 2>&1)
  [[ $got == --version ]] || fail "completion of $p: '$p --vers<TAB>' gave '$got'"
done
# paqd.yaml(5) names every key of the configuration (the schema's tables in DAEMON.md).
zcat "$root/usr/share/man/man5/paqd.yaml.5.gz" > "$work/yaml5.txt" 2>/dev/null || fail "paqd.yaml(5) unreadable"
grep -q '^\.TH PAQD.YAML 5' "$work/yaml5.txt" || fail "paqd.yaml(5) has no .TH header"
grep -q '^\.B stall_timeout_s$' "$work/yaml5.txt" || fail "paqd.yaml(5) does not list source.stall_timeout_s"
# The man pages list every option of --help (paqd's also those of `paqd replay --help`).
options_of() { grep -oE -- '(^|[ ,])--?[A-Za-z0-9][A-Za-z0-9-]*' | sed 's/^[ ,]//' | sort -u; }
for p in "${programs[@]}"; do
  mans=("$root"/usr/share/man/man?/"$p".?.gz)
  man=${mans[0]}
  [[ -f $man ]] || continue  # missing: reported above
  zcat "$man" | sed 's/\\-/-/g; s/\\f[BIR]//g; s/\\&//g' > "$work/man.txt"
  { "$root/usr/bin/$p" --help; [[ $p != paqd ]] || "$root/usr/bin/paqd" replay --help; } | options_of > "$work/options"
  while read -r o; do
    grep -qE -- "(^|[ ,])$o([ ,=]|\$)" "$work/man.txt" || fail "man page of $p does not list $o"
  done < "$work/options"
done
# paqd's subcommand: 'paqd replay --batch<TAB>'.
# shellcheck disable=SC2016
got=$(bash -c 'source "$1"; COMP_WORDS=(paqd replay --batch-s); COMP_CWORD=2; _paqd; echo "${COMPREPLY[*]}"' _ "$root/usr/share/bash-completion/completions/paqd" 2>&1)
[[ $got == --batch-samples ]] || fail "completion of 'paqd replay --batch-s<TAB>' gave '$got'"
# After an option that takes a value: its choices, never a subcommand; files where it has none.
complete_words() {  # completion.sh words...: what <TAB> after the words gives
  # shellcheck disable=SC2016
  bash -c 'f=$1; shift; source "$f"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _paqd; echo "${COMPREPLY[*]}"' _ "$@" 2>&1
}
comp=$root/usr/share/bash-completion/completions/paqd
got=$(complete_words "$comp" paqd --backend "")
[[ $got == "auto cpu cuda" ]] || fail "completion of 'paqd --backend <TAB>' gave '$got'"
got=$(complete_words "$comp" paqd replay --detector t)
[[ $got == trellis ]] || fail "completion of 'paqd replay --detector t<TAB>' gave '$got'"
got=$(complete_words "$comp" paqd --config "")
[[ -z $got ]] || fail "completion of 'paqd --config <TAB>' gave '$got' (files expected: bash's default)"
got=$(complete_words "$comp" paqd "")
[[ $got == replay ]] || fail "completion of 'paqd <TAB>' gave '$got'"

# 4. The CUDA backend as a package of its own (a build with CUDA): paqd-cuda holds the module
#    and names the CUDA libraries in Depends; the base package neither holds it nor needs any
#    CUDA library, and its paqd runs the CPU backend without the module ('auto'), refuses
#    'cuda' naming the package, and loads the module once paqd-cuda is unpacked beside it.
cuda_debs=("$work"/cpack/paqd-cuda_"$version"_*.deb)
if [[ -f ${cuda_debs[0]} ]]; then
  cuda_deb=${cuda_debs[0]}
  dpkg -c "$cuda_deb" | awk '{print $6}' | sed 's|^\./|/|' > "$work/cuda-contents"
  grep -q '/paqd/libpaqd-cuda\.so$' "$work/cuda-contents" || fail "paqd-cuda does not hold libpaqd-cuda.so"
  for f in /usr/share/doc/paqd-cuda/copyright /usr/share/doc/paqd-cuda/changelog.gz; do
    grep -qxF "$f" "$work/cuda-contents" || fail "paqd-cuda: $f missing"
  done
  grep -q 'libpaqd-cuda' "$work/contents" && fail "the base package holds the CUDA module"
  deps=$(dpkg-deb -f "$cuda_deb" Depends)
  [[ $deps == *"paqd (= $version)"* && $deps == *cudart* && $deps == *cufft* && $deps == *cusolver* ]] \
    || fail "paqd-cuda's Depends does not name paqd and the CUDA libraries: $deps"
  [[ $(dpkg-deb -f "$deb" Depends) == *cuda* ]] && fail "the base package depends on CUDA: $(dpkg-deb -f "$deb" Depends)"
  for p in "${programs[@]}"; do
    readelf -d "$root/usr/bin/$p" | grep NEEDED | grep -iE 'cuda|cublas|cufft|cusolver|cusparse|nvjitlink' \
      && fail "$p needs a CUDA library"
  done
  "$root/usr/bin/paq-sim" --preset awgn --ebn0-db 20 --seconds 0.02 --seed 5 --output "$work/rec" > /dev/null 2>&1 \
    || fail "unpacked paq-sim failed"
  out=$(PAQD_CUDA_MODULE= "$root/usr/bin/paqd" replay "$work/rec.sigmf-meta" --backend auto 2>&1) \
    || fail "unpacked paqd replay --backend auto without paqd-cuda failed: $(tail -5 <<< "$out")"
  [[ $out == *"(cpu backend"* ]] || fail "replay without paqd-cuda did not say it ran on the cpu: $(tail -5 <<< "$out")"
  out=$(PAQD_CUDA_MODULE= "$root/usr/bin/paqd" replay "$work/rec.sigmf-meta" --backend cuda 2>&1) \
    && fail "unpacked paqd replay --backend cuda without paqd-cuda succeeded"
  [[ $out == *paqd-cuda* ]] || fail "--backend cuda without the module does not name paqd-cuda: $(tail -3 <<< "$out")"
  dpkg -x "$cuda_deb" "$root"
  out=$(PAQD_CUDA_MODULE= "$root/usr/bin/paqd" replay "$work/rec.sigmf-meta" --backend cuda 2>&1)
  [[ $out != *paqd-cuda* ]] || fail "paqd did not load the module beside it: $(tail -3 <<< "$out")"
fi

# 5. lintian (where installed: scripts/setup.sh installs it) on every package: no error or
#    warning. The Maintainer is whoever builds (DEBFULLNAME/DEBEMAIL, else git's user); only
#    where none was named does lintian's bogus-mail-host stand, and nothing else may.
if command -v lintian > /dev/null; then
  allowed='^$'
  grep -q 'unset@localhost' "$build/CPackConfig.cmake" && allowed='bogus-mail-host'
  for d in "$work"/cpack/*.deb; do
    lintian --tag-display-limit 0 "$d" 2> /dev/null | grep -E '^(E|W): ' | grep -Ev "$allowed" > "$work/lintian.out"
    [[ -s $work/lintian.out ]] && fail "lintian $(basename "$d"): $(cat "$work/lintian.out")"
  done
  echo "lintian: $(ls "$work"/cpack/*.deb | wc -l) package(s) clean"
else
  echo "lintian not installed: not run"
fi

((failures == 0)) || { echo "$failures failure(s)" >&2; exit 1; }
echo "package: $(basename "$deb"), $(wc -l < "$work/contents") entries; install prefix, dpkg -c, conffiles, dpkg -x run: ok"
