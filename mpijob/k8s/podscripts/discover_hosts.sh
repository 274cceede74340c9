#!/bin/sh
# Horovod elastic host discovery (horovodrun --host-discovery-script): one "host:slots" line
# per worker pod that is Ready now. The job's <job>-ready headless Service publishes only
# Ready pods (publishNotReadyAddresses: false), so cluster DNS lists exactly the live
# workers: no API access, no RBAC. A replaced worker comes back with a new address, which
# Horovod has never blacklisted.
getent ahostsv4 "$HVDK8S_READY_SERVICE" 2>/dev/null \
  | awk -v slots="${HVDK8S_SLOTS:-1}" '{ print $1 ":" slots }' | sort -u
exit 0
