#!/usr/bin/env bash
# Prepare this machine for the test suite (as root, on Debian): the system packages the
# tests use (.ci/apt.d/*.txt), the venv with the agent and its dev tools, and the services
# (.ci/services.d/*.sh: a real NetBox on 127.0.0.1, the golden image's cached base tree).
# Safe to run again: it installs and starts only what is missing. A step that runs long
# says so every 30 s (.ci/progress.sh). What it leaves running, and how to stop it: the
# README's "Try it, test it".
#
# Components add what they need without touching this file:
#   .ci/apt.d/NAME.txt      Debian packages, one per line
#   .ci/services.d/NAME.sh  sourced after the venv exists; starts a service
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }
# shellcheck source=../.ci/progress.sh
source .ci/progress.sh

step "system packages"
mapfile -t packages < <(cat .ci/apt.d/*.txt | sed 's/#.*//' | tr -s ' \t' '\n' | sed '/^$/d' | sort -u)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  with_progress "apt-get update" apt-get update -qq
  with_progress "apt-get install (${#missing[@]} packages)" \
    bash -c 'apt-get install -y -qq "$@" >/dev/null' apt-get "${missing[@]}"
fi

step "python environment"
[ -x .venv/bin/python ] || python3 -m venv .venv
with_progress "pip install (the agent, the sandbox, dev tools)" \
  .venv/bin/pip install -q -e '.[dev]' -e ./sandbox

for service in .ci/services.d/*.sh; do
  [ -e "$service" ] || continue
  step "service: $service"
  # shellcheck source=/dev/null
  source "$service"
done
step "ready"
