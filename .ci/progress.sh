# Sourced by tests/setup.sh, tests/integration/netbox/lib.sh and images/build.sh.
#
# with_progress WHAT CMD...: run CMD; while it runs, say every PROGRESS_EVERY seconds
# (default 30) that WHAT still runs and for how long, so a long silent step (apt, pip,
# debootstrap, a database restore) is never mistaken for a hung one. Returns CMD's status.
with_progress() {
  local what=$1 every=${PROGRESS_EVERY:-30} t0=$SECONDS pid next
  shift
  "$@" &
  pid=$!
  next=$((t0 + every))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      printf '   ... %s: still running, %ss\n' "$what" "$((SECONDS - t0))" >&2
      next=$((next + every))
    fi
  done
  wait "$pid"
}
