#!/bin/sh
# Runs COMMAND with a private view of the file system in which two fixed paths Kueue v0.17.0 reads
# certificates from hold the test's own, as the Secret volumes of its Deployment would: /etc/kueue/metrics/certs
# (cmd/kueue/main.go, when internal cert management is off) and /visibility (pkg/visibility/server.go). The host's
# / and /etc are not written: run inside `unshare --mount` (the caller adds --user --map-root-user when not root).
# usage: private-mounts.sh ROOT METRICS_DIR VISIBILITY_DIR COMMAND...
# Every step execs, so COMMAND keeps the pid the caller started.
set -eu
root=$1 metrics=$2 visibility=$3
shift 3
mount -t tmpfs tmpfs "$root"
for d in /* /.[!.]*; do
  [ -e "$d" ] || [ -L "$d" ] || continue
  n=${d#/}
  [ "$n" = etc ] && continue
  if [ -L "$d" ]; then ln -s "$(readlink "$d")" "$root/$n"
  elif [ -d "$d" ]; then mkdir "$root/$n" && mount --rbind "$d" "$root/$n"
  else : >"$root/$n" && mount --bind "$d" "$root/$n"
  fi
done
# /etc gains a directory: a new /etc of links into the host's, seen at /.host-etc.
mkdir "$root/.host-etc" "$root/etc"
mount --rbind /etc "$root/.host-etc"
for f in /etc/* /etc/.[!.]*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  ln -s "/.host-etc/${f#/etc/}" "$root/etc/${f#/etc/}"
done
mkdir -p "$root/etc/kueue/metrics/certs" "$root/visibility"
mount --bind "$metrics" "$root/etc/kueue/metrics/certs"
mount --bind "$visibility" "$root/visibility"
exec chroot "$root" "$@"
