# Make sure the golden image's debootstrap tree is cached (/var/cache/machine-agent-image,
# keyed by the recipe's inputs) before the tests: a cold debootstrap takes minutes and
# belongs to setting up the machine, not to the boot test's time.
bash images/build.sh base >/dev/null
# Likewise the trees each distribution's .deb is built in and installed into
# (tests/integration/image/test_deb*.py).
for suite in bookworm trixie noble; do
  bash images/build.sh tree deb "$suite" >/dev/null
  bash images/build.sh tree target "$suite" >/dev/null
done
