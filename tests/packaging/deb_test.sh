#!/usr/bin/env bash
# The Debian package as an admin installs it: `cpack -G DEB` lists every file it must ship, with
# its conffiles and maintainer scripts; `dpkg -i` creates the gpubind user; the socket unit's
# daemon, started by hand as systemd would (socket activation, the unit's ExecStart, user
# gpubind), answers root's `gpubindctl status`, refuses gRPC to an unprivileged user with the reason
# and plans that user's gpubind-run over the compact protocol; every man page is found by man;
# `dpkg --purge` removes it all. Also: the source tarball holds every tracked source and the
# RPM spec, and rpmbuild unpacks it with that spec.
# Usage: deb_test.sh BUILD_DIR SOURCE_DIR   (exit 77 = skipped)
set -uo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
if [[ $(id -u) -ne 0 ]]; then echo "skipped: installing a package needs root"; exit 77; fi
for cmd in cpack dpkg dpkg-deb systemd-socket-activate setpriv man; do
  command -v "$cmd" >/dev/null || { echo "skipped: $cmd is needed"; exit 77; }
done
if dpkg-query -W -f='${Status}' gpubind 2>/dev/null | grep -q installed; then
  echo "skipped: a gpubind package is installed on this machine; not touching it"; exit 77
fi
tmp=$(mktemp -d)
activator=""
# dpkg, waiting (up to 10 minutes) while another apt or dpkg holds its lock, as apt's
# DPkg::Lock::Timeout does: another package operation on the machine is no failure of ours.
dpkg_waiting() {
  local out rc
  for _ in $(seq 600); do
    out=$(dpkg "$@" 2>&1)
    rc=$?
    [[ $rc -ne 0 && "$out" == *"lock"*"locked by another process"* ]] || break
    sleep 1
  done
  printf '%s\n' "$out"
  return $rc
}
cleanup() {
  [[ -n "$activator" ]] && kill "$activator" 2>/dev/null
  pkill -u gpubind -x gpubindd 2>/dev/null
  dpkg_waiting --purge gpubind >/dev/null 2>&1
  rm -rf "$tmp" /run/gpubind
}
trap cleanup EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; shift; printf '     %s\n' "$@" | head -20; failed=$((failed + 1)); }

(cd "$build" && cpack -G DEB -B "$tmp" >"$tmp/cpack.log" 2>&1) || { bad "cpack -G DEB" "$(tail -5 "$tmp/cpack.log")"; exit 1; }
deb=$(ls "$tmp"/gpubind_*.deb)
# Where Debian's Slurm looks for plugins, whatever the build was configured with.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null)
[[ -n "$multiarch" ]] || { echo "skipped: dpkg-architecture (dpkg-dev) is needed"; exit 77; }
plugin_dir=lib/$multiarch/slurm-wlm
listing=$(dpkg-deb -c "$deb" | awk '{print $1, $6}')
missing=()
for path in usr/sbin/gpubindd usr/sbin/gpubind-healthcheck usr/share/gpubind/nhc/gpubind.nhc \
  usr/share/gpubind/enroot/60-gpubind.sh \
  usr/share/gpubind/epilog/gpubind-audit-epilog \
  usr/bin/gpubindctl usr/bin/gpubind-check usr/bin/gpubind-run \
  "usr/$plugin_dir/spank_gpubind.so" "usr/$plugin_dir/libgpubind_stepd.so" \
  lib/systemd/system/gpubindd.service lib/systemd/system/gpubindd.socket \
  lib/systemd/system/gpubind-metrics.service lib/systemd/system/gpubind-metrics.timer \
  usr/lib/sysusers.d/gpubind.conf etc/gpubind/policy.conf etc/slurm/plugstack.conf.d/gpubind.conf \
  usr/share/man/man8/gpubindd.8.gz usr/share/man/man1/gpubindctl.1.gz \
  usr/share/man/man1/gpubind-check.1.gz usr/share/man/man1/gpubind-run.1.gz \
  usr/share/man/man5/gpubind.conf.5.gz \
  usr/share/man/man8/spank-gpubind.8.gz usr/share/doc/gpubind/README.md \
  usr/share/doc/gpubind/admin.md usr/share/doc/gpubind/user.md \
  usr/share/doc/gpubind/images/lumi-g-plan.svg usr/share/gpubind/policies/lumi-g.conf; do
  grep -qE " \./$path\$" <<<"$listing" || missing+=("$path")
done
((${#missing[@]} == 0)) && ok "dpkg -c lists every file ($(grep -c '^-' <<<"$listing") files)" ||
  bad "dpkg -c lacks" "${missing[@]}"
grep -qE '^-rwxr-xr-x \./usr/sbin/gpubindd$' <<<"$listing" && ok "gpubindd is executable" || bad "gpubindd mode"
grep -qE '^-rwxr-xr-x \./usr/sbin/gpubind-healthcheck$' <<<"$listing" &&
  ok "gpubind-healthcheck is executable" || bad "gpubind-healthcheck mode"
control=$(dpkg-deb -I "$deb")
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == $'/etc/gpubind/policy.conf\n/etc/slurm/plugstack.conf.d/gpubind.conf' ]] &&
  ok "both configuration files are conffiles" || bad "conffiles" "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)"
for script in postinst prerm postrm; do
  grep -q " $script " <<<"$control" || bad "no $script"
done
grep -qE '^ Depends: .*libhwloc15.*' <<<"$control" && ok "dependencies from the binaries (shlibdeps)" || bad "Depends" "$control"
# Built for one Slurm release: the version says which, and the package needs exactly that release.
release=$(cat "$build/slurm-release")
next=$(awk -F. '{printf "%d.%02d", $1, $2 + 1}' <<<"$release")
grep -qE "^ Version: [0-9.]+\+slurm$release\$" <<<"$control" && ok "the version names Slurm $release" ||
  bad "version without the Slurm release" "$control"
grep -qF "slurm-wlm-basic-plugins (>= $release), slurm-wlm-basic-plugins (<< $next)" <<<"$control" &&
  ok "depends on Slurm $release (>= $release, << $next)" || bad "no Slurm $release dependency" "$control"
[[ "$(basename "$deb")" == *"+slurm${release}_"* ]] && ok "the file name names Slurm $release ($(basename "$deb"))" ||
  bad "file name $(basename "$deb")"
echo "package size $(stat -c %s "$deb") bytes; $(grep -E '^ Installed-Size' <<<"$control" | sed 's/^ //') KiB"

# Install as an admin would.
dpkg_waiting -i "$deb" >"$tmp/dpkg.log" 2>&1 && ok "dpkg -i" || { bad "dpkg -i" "$(cat "$tmp/dpkg.log")"; exit 1; }
id gpubind >/dev/null 2>&1 && ok "the maintainer scripts created the gpubind user" || bad "no gpubind user"
for page in gpubindd.8 gpubindctl.1 gpubind-check.1 gpubind-run.1 gpubind.conf.5 spank-gpubind.8; do
  name=${page%.*} section=${page##*.}
  if man -w "$section" "$name" >/dev/null 2>&1 && [[ -n $(MANWIDTH=80 man "$section" "$name" 2>/dev/null | head -3) ]]; then
    :
  else bad "man $section $name"; fi
done
ok "man finds and renders the six installed pages"

# The socket unit's daemon, by hand: listen as gpubindd.socket does, start the unit's ExecStart as
# its User= on the first connection, with the socket passed in (LISTEN_FDS).
exec_start=$(sed -nE 's/^ExecStart=(.*)$/\1/p' /lib/systemd/system/gpubindd.service)
listen=$(sed -nE 's/^ListenStream=(.*)$/\1/p' /lib/systemd/system/gpubindd.socket)
mode=$(sed -nE 's/^SocketMode=(.*)$/\1/p' /lib/systemd/system/gpubindd.socket)
user=$(sed -nE 's/^User=(.*)$/\1/p' /lib/systemd/system/gpubindd.service)
mkdir -p "$(dirname "$listen")"
rm -f "$listen"
# shellcheck disable=SC2086
systemd-socket-activate -l "$listen" setpriv --reuid="$user" --regid="$user" --init-groups \
  $exec_start >"$tmp/daemon.log" 2>&1 &
activator=$!
for _ in $(seq 100); do grep -q "^Listening on" "$tmp/daemon.log" && break; sleep 0.05; done
chmod "$mode" "$listen"
# gRPC is served to root and the daemon's own user (and --grpc-group, none by default): an
# unprivileged user is told so; the launch path, the compact protocol, is every user's.
status=$(/usr/bin/gpubindctl status 2>&1)
if [[ "$status" == *"(socket-activated)"* && "$status" == *"policy    /etc/gpubind/policy.conf (generation 1)"* ]]; then
  ok "root's gpubindctl status reaches the socket-activated daemon"
else
  bad "gpubindctl status" "$status" "$(cat "$tmp/daemon.log")"
fi
refused=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/gpubindctl status 2>&1)
[[ $? -ne 0 && "$refused" == *"gpubindd serves gRPC only to root, its own user and members of its --grpc-group"* ]] &&
  ok "an unprivileged user's gpubindctl status is refused, saying why" || bad "unprivileged status" "$refused"
bound=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/gpubind-run --local-rank 0 \
  --local-size 1 --dry-run -- true 2>&1)
[[ "$bound" == *"[daemon]"* ]] &&
  ok "an unprivileged user's gpubind-run is planned by the installed daemon (compact protocol)" ||
  bad "unprivileged gpubind-run" "$bound" "$(cat "$tmp/daemon.log")"
owner=$(ps -o user=,comm= -p "$activator" | xargs)  # systemd-socket-activate execs the daemon
[[ "$owner" == "gpubind gpubindd" ]] && ok "gpubindd runs as the gpubind user" || bad "gpubindd runs as '$owner'"
plan=$(/usr/bin/gpubindctl plan --ntasks 1 2>&1)
[[ "$plan" == rank* ]] && ok "plan from the installed daemon" || bad "plan" "$plan"
kill "$activator" 2>/dev/null
pkill -u gpubind -x gpubindd
activator=""

dpkg_waiting --purge gpubind >"$tmp/purge.log" 2>&1 && ok "dpkg --purge" || bad "dpkg --purge" "$(cat "$tmp/purge.log")"
left=$(for f in /usr/sbin/gpubindd /etc/gpubind/policy.conf "/usr/$plugin_dir/spank_gpubind.so"; do [[ -e $f ]] && echo "$f"; done)
[[ -z "$left" ]] && ok "nothing left after purge" || bad "left after purge" "$left"

# The source tarball: every tracked source (the CI script aside) and the spec rpmbuild unpacks.
if command -v git >/dev/null && git -C "$source_dir" rev-parse >/dev/null 2>&1; then
  (cd "$build" && cpack --config CPackSourceConfig.cmake -B "$tmp" >"$tmp/source.log" 2>&1) || bad "source package" "$(tail -3 "$tmp/source.log")"
  tarball=$(ls "$tmp"/gpubind-*-Source.tar.gz)
  tar tzf "$tarball" | sed -E 's|^[^/]+/||' | grep -v '/$' | sort >"$tmp/tar.txt"
  missing=$(git -C "$source_dir" ls-files | grep -v '^\.ci/' | sort | comm -23 - "$tmp/tar.txt")
  [[ -z "$missing" ]] && ok "the source tarball holds every tracked file" || bad "source tarball lacks" "$missing"
  if command -v rpmbuild >/dev/null; then
    rpmbuild --nodeps -tp "$tarball" --define "_topdir $tmp/rpm" >"$tmp/rpm.log" 2>&1 &&
      [[ -f "$tmp/rpm/BUILD/$(basename "$tarball" .tar.gz)/packaging/rpm/gpubind.spec" ]] &&
      ok "rpmbuild -tp unpacks the tarball with its spec" || bad "rpmbuild -tp" "$(tail -5 "$tmp/rpm.log")"
  fi
fi
# The RPM likewise requires the Slurm release whose headers it is built against: this system's,
# and another release's from its cached root (tests/e2e/slurm-root), if there is one.
if command -v rpmspec >/dev/null; then
  spec=$source_dir/packaging/rpm/gpubind.spec
  for headers in /usr/include $(for r in $("$source_dir/tests/e2e/slurm-root" releases); do
    root=$("$source_dir/tests/e2e/slurm-root" path "$r"); [[ -f "$root/.gpubind-root" ]] && echo "$root/usr/include"; done); do
    [[ -f "$headers/slurm/slurm_version.h" ]] || continue
    r=$(sed -nE 's/^#define SLURM_VERSION_NUMBER 0x(..)(..).*/\1 \2/p' "$headers/slurm/slurm_version.h" |
      { read -r a b; printf '%d.%02d' "0x$a" "0x$b"; })
    n=$(awk -F. '{printf "%d.%02d", $1, $2 + 1}' <<<"$r")
    requires=$(rpmspec -q --requires --define "_includedir $headers" "$spec" 2>&1)
    name=$(rpmspec -q --define "_includedir $headers" "$spec" 2>&1)
    [[ "$requires" == *"slurm >= $r"*"slurm < $n"* && "$name" == *".slurm$r."* ]] &&
      ok "RPM built against Slurm $r's headers requires slurm >= $r, < $n ($name)" ||
      bad "RPM for Slurm $r" "$requires" "$name"
  done
fi

echo "$passed passed, $failed failed"
((failed == 0))
