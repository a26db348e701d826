#!/usr/bin/env bash
# Builds boinc-gahp's distribution packages from its packed npm tarball, with no network:
#   boinc-gahp-VERSION.tgz            `npm pack` of this checkout (needs `npm ci` done), or --tarball
#   boinc-gahp_VERSION-1_all.deb      Debian/Ubuntu, Depends: nodejs (>= 20)       (dpkg-deb)
#   boinc-gahp-VERSION-1.noarch.rpm   EL 8/9, Requires: nodejs >= 20               (rpmbuild)
# Both lay out the tree that packaging/stage.mjs makes (the layout is described there).
#
# Usage: packaging/build-packages.sh [--tarball FILE] [--out DIR] [--no-rpm] [--no-deb]
#   --out: where the tarball and packages go (default packaging/out)
# Needs node >= 20, tar, dpkg-deb (for the .deb) and rpmbuild (for the .rpm; Debian's
# `rpm` package has it).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out="$repo/packaging/out"
tarball=""
build_deb=1
build_rpm=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tarball) tarball=$(realpath "$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-rpm) build_rpm=0; shift ;;
    --no-deb) build_deb=0; shift ;;
    *) echo "usage: $0 [--tarball FILE] [--out DIR] [--no-rpm] [--no-deb]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 022

version=$(node -p 'require(process.argv[1]).version' "$repo/package.json")
description=$(node -p 'require(process.argv[1]).description' "$repo/package.json")
spec_version=$(sed -n 's/^Version:[[:space:]]*//p' "$repo/packaging/rpm/boinc-gahp.spec")
if [ "$spec_version" != "$version" ]; then
  echo "packaging/rpm/boinc-gahp.spec has Version $spec_version, package.json $version: make them equal" >&2
  exit 1
fi

if [ -z "$tarball" ]; then
  # prepack builds the program; the runtime dependencies come from node_modules (bundleDependencies).
  (cd "$repo" && npm pack --loglevel=warn --pack-destination "$out" >/dev/null)
  tarball="$out/boinc-gahp-$version.tgz"
fi
echo "tarball: $tarball ($(stat -c %s "$tarball") bytes)"

if [ "$build_deb" = 1 ]; then
  root="$work/deb"
  mkdir -p "$root/DEBIAN"
  chmod 755 "$root"
  node "$repo/packaging/stage.mjs" "$tarball" "$root"
  (cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
  install -m 0755 "$repo/packaging/post-install.sh" "$root/DEBIAN/postinst"
  installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  # No conffiles: the BLAHP scripts are generated and carry no settings (those are in
  # /etc/blah.config, which the package leaves alone), so an upgrade replaces them.
  cat > "$root/DEBIAN/control" <<CONTROL
Package: boinc-gahp
Version: $version-1
Architecture: all
Maintainer: ${DEB_MAINTAINER:-boinc-gahp developers <boinc-gahp@localhost>}
Installed-Size: $installed_kb
Depends: nodejs (>= 20)
Section: net
Priority: optional
Description: $description
 boinc-gahp lets an HTCondor pool run jobs on a BOINC volunteer-computing
 project: as the GAHP that HTCondor's gridmanager starts, as BLAHP scripts
 (grid_resource = batch boinc, for HTCondor 23+ and HTCondor-CE) in
 /usr/libexec/blahp, and from the command line. The scripts read boinc_*
 lines of /etc/blah.config, which this package does not touch (see
 /usr/share/doc/boinc-gahp/README.md).
CONTROL
  deb="$out/boinc-gahp_${version}-1_all.deb"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  echo "deb: $deb ($(stat -c %s "$deb") bytes)"
fi

if [ "$build_rpm" = 1 ]; then
  mkdir -p "$work/rpm/SOURCES"
  cp "$tarball" "$work/rpm/SOURCES/boinc-gahp-$version.tgz"
  cp "$repo/packaging/stage.mjs" "$repo/packaging/man-page.mjs" "$repo/packaging/post-install.sh" "$work/rpm/SOURCES/"
  nodeps=()
  if ! rpm -q --whatprovides nodejs >/dev/null 2>&1; then
    # Not an RPM system (e.g. Debian): rpm's database knows no nodejs, node comes from elsewhere.
    echo "rpmbuild --nodeps: no nodejs in rpm's database; the build uses $(command -v node) ($(node --version))"
    nodeps=(--nodeps)
  fi
  # (Debian's rpm runs its brp-compress with dash, which prints "read: Illegal option -d"
  # twice: harmless here, stage.mjs compresses the man page itself.)
  rpmbuild -bb "${nodeps[@]}" --quiet \
    --define "_topdir $work/rpm" \
    --define "_sourcedir $work/rpm/SOURCES" \
    --define "_rpmdir $out" \
    --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
    "$repo/packaging/rpm/boinc-gahp.spec"
  rpmfile="$out/boinc-gahp-${version}-1.noarch.rpm"
  echo "rpm: $rpmfile ($(stat -c %s "$rpmfile") bytes)"
fi
