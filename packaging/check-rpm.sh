#!/usr/bin/env bash
# The documented check of the RPM (issue 26), for a machine without an RPM database of its
# own (e.g. Debian with its `rpm` package); changes nothing outside a temporary directory:
#   packaging/check-rpm.sh [packaging/out]
# Shows the RPM's requirements, provides, scriptlets and files; compares its file list with
# the .deb's (the same layout; the .deb also lists the system directories it lays files in,
# which on EL belong to the filesystem package); and resolves its nodejs requirement in a
# scratch rpm database against stand-ins for EL's nodejs 1:18 and 1:20 (EL's nodejs carries
# Epoch 1), built here empty, for the dependency check only.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(node -p 'require(process.argv[1]).version' "$repo/package.json")
out=$(realpath "${1:-$repo/packaging/out}")
rpmfile="$out/boinc-gahp-${version}-1.noarch.rpm"
deb="$out/boinc-gahp_${version}-1_all.deb"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '\n$ %s\n' "$*"; }

step rpm -qp --requires "$rpmfile"
rpm -qp --requires "$rpmfile"
step rpm -qp --provides "$rpmfile"
rpm -qp --provides "$rpmfile"
step rpm -qp --scripts "$rpmfile" "  # (no scriptlets: nothing printed)"
rpm -qp --scripts "$rpmfile"
step rpm -qlp "$rpmfile" "| grep -v '/node_modules/\|/dist/'"
rpm -qlp "$rpmfile" | grep -v '/node_modules/\|/dist/'
echo "($(rpm -qlp "$rpmfile" | wc -l) paths in all)"

step "diff <(dpkg-deb -c $(basename "$deb")) <(rpm -qlp $(basename "$rpmfile"))   # paths"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#; s#/$##' | grep -v '^/\?$' | sort > "$work/deb.list"
rpm -qlp "$rpmfile" | sort > "$work/rpm.list"
diff "$work/deb.list" "$work/rpm.list" || true
echo "(only in the .deb: the system directories above; $(comm -12 "$work/deb.list" "$work/rpm.list" | wc -l) paths in both)"

for v in 18 20; do
  cat > "$work/nodejs$v.spec" <<SPEC
Name: nodejs
Epoch: 1
Version: $v.19.0
Release: 1
Summary: empty stand-in for EL's nodejs, for a dependency check only
License: none
BuildArch: noarch
Provides: /usr/bin/env /bin/sh /bin/bash
%description
Empty.
%files
SPEC
  rpmbuild -bb --quiet --define "_topdir $work/top$v" --define "_rpmdir $work" "$work/nodejs$v.spec"
  mkdir "$work/db$v"
  rpm --dbpath "$work/db$v" --initdb
  rpm --dbpath "$work/db$v" -i --justdb --nodeps "$work/noarch/nodejs-$v.19.0-1.noarch.rpm" 2>/dev/null
  step "rpm -i --test $(basename "$rpmfile")   # scratch database holding only nodejs-1:$v.19.0"
  if rpm --dbpath "$work/db$v" -i --test "$rpmfile" 2>&1 | grep -v 'Alien\|assuming you know'; then :; fi
  if rpm --dbpath "$work/db$v" -i --test "$rpmfile" >/dev/null 2>&1; then echo "dependencies met"; else echo "refused"; fi
done
