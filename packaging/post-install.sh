#!/bin/sh
# boinc-gahp's post-install note: the .deb's postinst and the RPM's %post
# (packaging/build-packages.sh, packaging/rpm/boinc-gahp.spec).
# The package's BLAHP scripts are in /usr/libexec/blahp, where blahpd of HTCondor's own
# packages runs them. An HTCondor installed elsewhere runs them from its own folder, which
# `boinc-gahp blahp where` names (asked of that HTCondor's condor_config_val); the note
# stays quiet only when HTCondor itself says /usr/libexec/blahp.
where=$(/usr/bin/boinc-gahp blahp where 2>/dev/null | head -n 1) || where=
if [ "$where" = /usr/libexec/blahp ] && command -v condor_config_val >/dev/null 2>&1; then
  exit 0
fi
echo "boinc-gahp: the BLAHP scripts are in /usr/libexec/blahp, where blahpd of HTCondor's own packages runs them."
echo "boinc-gahp: for an HTCondor installed elsewhere${where:+ (blahpd here runs batch scripts from $where)}, run with its condor_config_val on PATH: boinc-gahp blahp install"
exit 0
