#!/bin/sh
# heartbeat-check MAX_AGE_SECONDS
#
# Exit 0 iff $TRAIN_HEARTBEAT_FILE (default /tmp/trainer/heartbeat) exists and
# was modified less than MAX_AGE_SECONDS ago; 1 if it is missing or stale;
# 2 on a usage error. Installed in the image as /usr/local/bin/heartbeat-check
# for the pod's startup and liveness probes (exec). Ages are whole seconds, so
# a file is judged up to one second older or younger than it is: use a
# MAX_AGE well above one second (probes use tens of seconds or more).
set -eu

usage() {
    echo "usage: heartbeat-check MAX_AGE_SECONDS (a whole number >= 1)" >&2
    exit 2
}

[ "$#" -eq 1 ] || usage
case "$1" in
    '' | *[!0-9]*) usage ;;
esac
max_age=$1
[ "$max_age" -ge 1 ] || usage

file=${TRAIN_HEARTBEAT_FILE:-/tmp/trainer/heartbeat}
if [ ! -f "$file" ]; then
    echo "heartbeat-check: $file does not exist (no training progress yet)" >&2
    exit 1
fi

# GNU/busybox stat first, BSD stat as a fallback.
mtime=$(stat -c %Y "$file" 2>/dev/null || stat -f %m "$file" 2>/dev/null) || {
    echo "heartbeat-check: cannot stat $file" >&2
    exit 1
}
now=$(date +%s)
age=$((now - mtime))
if [ "$age" -lt "$max_age" ]; then
    exit 0
fi
echo "heartbeat-check: $file is ${age}s old (limit ${max_age}s): training made no progress" >&2
exit 1
