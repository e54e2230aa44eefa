# Sourced by the scripts that build binaries from Go modules. `build_lock DIR` waits while another run builds
# into DIR (build-go.sh in the background while the first tests run, or a test's fixture) and holds the lock
# until the script exits: one binary is never built twice at once, and a caller that waited finds it cached.
build_lock() {
  # A stripped PATH (the scripts' own tests of "no Go here") has no flock: nothing to wait for then.
  command -v flock >/dev/null && command -v mkdir >/dev/null || return 0
  mkdir -p "$1"
  exec 9>"$1/.build.lock"
  flock 9
}
