#!/usr/bin/env bash
# The documented check of the .deb (issue 26), run by hand as root on a Debian/Ubuntu
# machine where boinc-gahp is not installed and nodejs >= 20 is a dpkg package:
#   packaging/check-deb.sh [packaging/out/boinc-gahp_VERSION-1_all.deb]
# It installs the package with dpkg -i, runs the installed program (--version, the man
# page, the demo, boinc_ping.sh against the bundled test server), removes it with dpkg -r
# and compares the file lists of /usr, /etc, /opt and /var/lib before and after.
# Changes the machine while it runs; leaves it as it found it (the comparison says so).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(node -p 'require(process.argv[1]).version' "$repo/package.json")
deb=$(realpath "${1:-$repo/packaging/out/boinc-gahp_${version}-1_all.deb}")
[ "$(id -u)" = 0 ] || { echo "run as root (dpkg -i)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' boinc-gahp 2>/dev/null | grep -q installed; then
  echo "boinc-gahp is installed already: remove it first" >&2
  exit 2
fi
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n$ %s\n' "$*"; }
# Paths only (contents of dpkg's own database change, the names must not).
snapshot() { find /usr /etc /opt /var/lib -xdev 2>/dev/null | sort; }

step apt-cache policy nodejs
apt-cache policy nodejs
step dpkg-deb --info "$deb"
dpkg-deb --info "$deb"

started=$(date -u '+%F %T UTC')
snapshot > "$work/before"
step dpkg -i "$deb"
dpkg -i "$deb"
step dpkg -L boinc-gahp "| grep -v /node_modules/ | grep -v /dist/"
dpkg -L boinc-gahp | grep -v '/node_modules/' | grep -v '/dist/'
echo "($(dpkg -L boinc-gahp | wc -l) paths in all)"

step command -v boinc-gahp
command -v boinc-gahp
step cat /usr/bin/boinc-gahp
cat /usr/bin/boinc-gahp
step boinc-gahp --version
boinc-gahp --version
step "MANWIDTH=80 man boinc-gahp | head -25"
MANWIDTH=80 MANPAGER=cat man boinc-gahp 2>&1 | head -25
step ls -l /usr/libexec/blahp
ls -l /usr/libexec/blahp
step cat /usr/libexec/blahp/boinc_ping.sh
cat /usr/libexec/blahp/boinc_ping.sh

step /usr/lib/boinc-gahp/bin/boinc-gahp-demo --quiet --output-dir "$work/demo"
(cd "$work" && /usr/lib/boinc-gahp/bin/boinc-gahp-demo --quiet --output-dir "$work/demo")

step "/usr/lib/boinc-gahp/bin/boinc-test-server --port 0 &"
/usr/lib/boinc-gahp/bin/boinc-test-server --port 0 > "$work/server.out" &
server_pid=$!
for _ in $(seq 100); do grep -q '^authenticator: ' "$work/server.out" && break; sleep 0.1; done
url=$(sed -n 's/^project URL: //p' "$work/server.out")
echo "project URL: $url"
(umask 077 && sed -n 's/^authenticator: //p' "$work/server.out" > "$work/project.auth")

# blahp is not installed here, so there is no blah_load_config.sh beside the scripts: they
# read blah.config themselves, from where blahpd would (here: BLAHPD_CONFIG_LOCATION).
printf 'supported_lrms=boinc\nboinc_project_url=%s\nboinc_authenticator_file=%s\nboinc_state_dir=%s\n' \
  "$url" "$work/project.auth" "$work/state" > "$work/blah.config"
ping() {
  step "BLAHPD_CONFIG_LOCATION=$work/blah.config /usr/libexec/blahp/boinc_ping.sh"
  (cd "$work" && env BLAHPD_CONFIG_LOCATION="$work/blah.config" /usr/libexec/blahp/boinc_ping.sh)
  echo "exit $?"
}
ping
# boinc-gahp's own check of the set-up, with that blah.config (blahp itself is not
# installed here: a line that needs HTCondor may fail; the lines to read are the BLAHP
# scripts' and blah.config's).
step BLAHPD_CONFIG_LOCATION="$work/blah.config" boinc-gahp doctor --blahp /usr/libexec/blahp
set +e
(cd "$work" && BLAHPD_CONFIG_LOCATION="$work/blah.config" timeout 120 boinc-gahp doctor --blahp /usr/libexec/blahp)
echo "exit $?"
set -e
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "(the test server stopped: the same ping again)"
ping

step dpkg -r boinc-gahp
dpkg -r boinc-gahp
step "dpkg-query -W boinc-gahp"
dpkg-query -W -f='${Package} ${Status}\n' boinc-gahp 2>&1 || true
snapshot > "$work/after"
step "diff <(file list before dpkg -i) <(file list after dpkg -r)   # /usr /etc /opt /var/lib"
if diff "$work/before" "$work/after"; then
  echo "no difference: $(wc -l < "$work/after") paths, the same before and after"
else
  echo "FAILED: the file lists differ (a path the package does not hold can be another process's, see its time; the check started at $started):" >&2
  comm -3 "$work/before" "$work/after" | sed 's/^\t//' | while read -r p; do ls -ld --time-style=full-iso "$p" 2>&1; done >&2
  exit 1
fi
