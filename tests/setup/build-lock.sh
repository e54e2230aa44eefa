# Sourced by the scripts that build binaries from Go modules. `build_lock DIR` waits while another run builds
# into DIR (build-go.sh in the background while the first tests run, or a test's fixture) and holds the lock
# until the script exits: one binary is never built twice at once, and a caller that waited finds it cached.
build_lock() {
  mkdir -p "$1"
  exec 9>"$1/.build.lock"
  flock 9
}
