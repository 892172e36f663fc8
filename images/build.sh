#!/usr/bin/env bash
# Builds a bootable Debian bookworm golden image with machine-agent baked in.
#
#   images/build.sh base
#       make sure the cached debootstrap tree exists; print its path
#   images/build.sh wheels DIR
#       the agent's wheel and its dependencies' wheels (for images/ansible)
#   images/build.sh image --out DIR [--site-bin DIR] [--overlay DIR]... [--enable UNIT]...
#       build DIR/rootfs.raw (ext4, no partition table), DIR/vmlinuz, DIR/initrd.img and
#       DIR/cmdline; boot it with images/boot.sh DIR (qemu, -kernel/-initrd: no boot loader)
#
#   --site-bin DIR  site-provided binaries (kubeadm, kubelet, containerd, crictl, ...):
#                   copied into /usr/local/bin of the image
#   --overlay DIR   a tree copied over / of the image (e.g. etc/machine-agent/config.yaml);
#                   repeatable, copied in the order given
#   --enable UNIT   also enable this unit (one from the overlay); repeatable
#
# Environment: MIRROR (Debian mirror; default: debootstrap's own), CACHE_DIR (default
# /var/cache/machine-agent-image), PYTHON (builds the wheels; default: the repo's .venv),
# IMAGE_SIZE (default 3G). Needs root, debootstrap, mke2fs; network only for the Debian
# mirror and the package index the wheels come from.
#
# The base tree (debootstrap + base-packages.txt: the slow part, minutes) is cached under
# CACHE_DIR/<key>, the key being a hash of everything that shapes it: the package list,
# the text of build_base below, the suite and the mirror. Everything after it (the agent's
# venv, units, site binaries, overlay, the file system) is redone by every build, seconds.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
SUITE=bookworm
CACHE_DIR=${CACHE_DIR:-/var/cache/machine-agent-image}
IMAGE_SIZE=${IMAGE_SIZE:-3G}
VENV=/opt/machine-agent
CMDLINE="root=/dev/vda rw console=ttyS0 net.ifnames=0"

say() { printf '[build %3ss] %s\n' "$SECONDS" "$*" >&2; }

build_base() {  # $1: the directory to create
  local packages
  packages=$(sed 's/#.*//' "$HERE/base-packages.txt" | tr -s ' \t\n' ',' | sed 's/^,//; s/,$//')
  debootstrap --variant=minbase --include="$packages" "$SUITE" "$1" ${MIRROR:+"$MIRROR"} >&2
  # debootstrap leaves a package unconfigured, and says nothing, when one of its
  # dependencies is a virtual package: fail here instead of in the booted image.
  chroot "$1" apt-get check >&2
  if [ -n "$(chroot "$1" dpkg --audit)" ]; then
    chroot "$1" dpkg --audit >&2
    echo "the base tree has unconfigured packages (see above)" >&2
    return 1
  fi
  chroot "$1" apt-get clean
  rm -rf "$1"/var/lib/apt/lists/*
}

base_key() {
  { cat "$HERE/base-packages.txt"; declare -f build_base; echo "$SUITE ${MIRROR:-default}"; } \
    | sha256sum | cut -c1-16
}

ensure_base() {  # prints the cached tree's path
  local dir
  dir="$CACHE_DIR/$(base_key)"
  mkdir -p "$CACHE_DIR"
  exec 9>"$dir.lock"
  flock 9  # two builds on one machine share the cache; the second waits for the first
  if [ -e "$dir/complete" ]; then
    say "base tree cached: $dir"
    touch "$dir/complete"
  else
    say "base tree not cached: debootstrap $SUITE into $dir (minutes)"
    rm -rf "$dir"
    build_base "$dir/rootfs"
    touch "$dir/complete"
    say "base tree ready"
    # Trees of other inputs (older recipes, other branches) go after a week unused.
    find "$CACHE_DIR" -mindepth 2 -maxdepth 2 -name complete -mtime +7 -printf '%h\n' |
      while read -r stale; do say "removing unused $stale"; rm -rf "$stale" "$stale.lock"; done
  fi
  exec 9>&-
  echo "$dir/rootfs"
}

build_wheels() {  # $1: directory. The project's wheel and every dependency's.
  local wheels=$1 python=${PYTHON:-}
  if [ -z "$python" ]; then
    python=python3
    [ -x "$REPO/.venv/bin/python" ] && python=$REPO/.venv/bin/python
  fi
  mkdir -p "$wheels"
  "$python" -m pip wheel -q --no-deps --wheel-dir "$wheels" "$REPO"
  # The dependencies as the host's pip resolves them (same Python 3.11 as bookworm's);
  # the image installs offline from these files.
  "$python" -m pip wheel -q --wheel-dir "$wheels" "$wheels"/machine_agent-*.whl
}

install_agent() {  # $1: tree. The project's wheel and its dependencies, into its own venv.
  local tree=$1 wheels=$1/tmp/machine-agent-wheels
  build_wheels "$wheels"
  chroot "$tree" python3 -m venv "$VENV"
  chroot "$tree" "$VENV/bin/pip" install -q --no-index --find-links /tmp/machine-agent-wheels \
    --disable-pip-version-check machine-agent
  rm -rf "$wheels"
  chroot "$tree" "$VENV/bin/machine-agent" --version >&2
}

install_units() {  # $1: tree
  local tree=$1
  install -D -m 0644 -t "$tree/usr/lib/systemd/system" "$REPO"/units/*.service
  local dropins
  for dropins in "$REPO"/units/*.service.d; do
    install -D -m 0644 -t "$tree/usr/lib/systemd/system/$(basename "$dropins")" "$dropins"/*.conf
  done
  install -D -m 0644 "$REPO/README.md" "$tree/usr/share/doc/machine-agent/README.md"
  # The agent owns the network: cloud-init still provides instance data, but writes no
  # network configuration that would race the agent's.
  install -D -m 0644 "$HERE/files/99-machine-agent.cfg" \
    "$tree/etc/cloud/cloud.cfg.d/99-machine-agent.cfg"
  # What any Kubernetes node needs before kubeadm join (the join preflight checks it):
  # br_netfilter loaded, IPv4 forwarding and the bridge's iptables hooks on.
  install -D -m 0644 "$HERE/files/kubernetes-modules.conf" \
    "$tree/etc/modules-load.d/kubernetes.conf"
  install -D -m 0644 "$HERE/files/kubernetes-sysctl.conf" "$tree/etc/sysctl.d/99-kubernetes.conf"
  # Pod veths and bridges keep the MAC their CNI plugin set (udev would change it).
  install -D -m 0644 "$HERE/files/cni-links.link" "$tree/usr/lib/systemd/network/50-cni-links.link"
  mkdir -p "$tree/etc/machine-agent/config.d"
  # networkd applies what the network phase renders (its default renderer).
  # machine-agent-cloud-init.service: on a boot where the agent runs, cloud-init
  # discards the user-data (CABPK's bootstrap data, which the agent carries out).
  systemctl --root="$tree" enable machine-agent.service machine-agent-cloud-init.service \
    systemd-networkd.service >&2
}

build_image() {
  local out="" site_bin="" overlays=() enable=()
  while (($#)); do
    case $1 in
      --out) out=$2; shift 2 ;;
      --site-bin) site_bin=$2; shift 2 ;;
      --overlay) overlays+=("$2"); shift 2 ;;
      --enable) enable+=("$2"); shift 2 ;;
      *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
  done
  [ -n "$out" ] || { echo "image needs --out DIR" >&2; exit 2; }
  local base tree
  base=$(ensure_base)
  mkdir -p "$out"
  tree="$out/tree"
  rm -rf "$tree"
  say "copying the base tree"
  cp -a --reflink=auto "$base" "$tree"
  say "installing the agent into $VENV"
  install_agent "$tree"
  install_units "$tree"
  printf '/dev/vda / ext4 defaults 0 1\n' >"$tree/etc/fstab"
  echo machine-agent-image >"$tree/etc/hostname"
  if [ -n "$site_bin" ]; then
    say "site binaries from $site_bin"
    install -m 0755 -t "$tree/usr/local/bin" "$site_bin"/*
  fi
  local overlay
  for overlay in ${overlays[@]+"${overlays[@]}"}; do
    say "overlay from $overlay"
    cp -a "$overlay"/. "$tree"/
  done
  if ((${#enable[@]})); then
    systemctl --root="$tree" enable "${enable[@]}" >&2
  fi
  cp "$tree"/boot/vmlinuz-* "$out/vmlinuz"
  cp "$tree"/boot/initrd.img-* "$out/initrd.img"
  echo "$CMDLINE" >"$out/cmdline"
  say "making the ext4 file system"
  rm -f "$out/rootfs.raw"
  truncate -s "$IMAGE_SIZE" "$out/rootfs.raw"
  mke2fs -q -t ext4 -L agent-root -d "$tree" "$out/rootfs.raw"
  rm -rf "$tree"
  say "image ready: $out"
}

case ${1:-} in
  base) ensure_base ;;
  wheels) build_wheels "${2:?wheels needs a directory}" ;;
  image) shift; build_image "$@" ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
