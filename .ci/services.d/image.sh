# Make sure the golden images' debootstrap trees (one per distribution) are cached
# (/var/cache/machine-agent-image, keyed by the recipe's inputs) before the tests: a cold
# debootstrap takes minutes and belongs to setting up the machine, not to the boot test's
# time. Likewise the trees each distribution's .deb is built in and installed into
# (tests/integration/image/test_deb*.py).
# Each tree has its own lock and cache entry: the distributions are made side by side
# (mostly downloads and dpkg), each distribution's two trees one after the other.
image_trees=()
for suite in bookworm trixie noble; do
  bash images/build.sh base "$suite" >/dev/null &
  image_trees+=($!)
  (bash images/build.sh tree deb "$suite" >/dev/null &&
     bash images/build.sh tree target "$suite" >/dev/null) &
  image_trees+=($!)
done
for pid in "${image_trees[@]}"; do
  wait "$pid"  # a tree that failed fails the set-up (set -e)
done
unset image_trees pid suite
