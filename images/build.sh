#!/usr/bin/env bash
# Builds a bootable Debian bookworm golden image with machine-agent baked in.
#
#   images/build.sh base
#       make sure the cached debootstrap tree exists; print its path
#   images/build.sh wheels DIR
#       the agent's wheel and its dependencies' wheels (for images/ansible)
#   images/build.sh deb DIR
#       DIR/machine-agent_VERSION_amd64.deb: the agent in a venv under /opt/machine-agent
#       (its dependencies as requirements/runtime.txt pins them), its units and drop-ins,
#       a default /etc/machine-agent/config.yaml; its postinst enables, never starts
#   images/build.sh image --out DIR [--site-bin DIR] [--overlay DIR]... [--enable UNIT]...
#                         [--with-ssh]
#       build DIR/rootfs.raw (ext4, no partition table), DIR/vmlinuz, DIR/initrd.img and
#       DIR/cmdline; boot it with images/boot.sh DIR (qemu, -kernel/-initrd: no boot loader)
#
#   --site-bin DIR  site-provided binaries (kubeadm, kubelet, containerd, crictl, ...):
#                   copied into /usr/local/bin of the image
#   --overlay DIR   a tree copied over / of the image (e.g. etc/machine-agent/config.yaml);
#                   repeatable, copied in the order given
#   --enable UNIT   also enable this unit (one from the overlay); repeatable
#   --with-ssh      start sshd at boot (host keys made at the node's first boot; give
#                   authorized keys through cloud-init or an overlay); off by default
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
# shellcheck source=../.ci/progress.sh
source "$REPO/.ci/progress.sh"

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
    # (with_progress here, not in build_base: its text is part of the cache key)
    with_progress "the base tree (debootstrap $SUITE)" build_base "$dir/rootfs"
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
  # The dependencies exactly as requirements/runtime.txt pins them, each file checked
  # against its hash (same Python 3.11 as bookworm's); the image installs offline from
  # these files, with the same check.
  "$python" -m pip wheel -q --require-hashes --wheel-dir "$wheels" \
    -r "$REPO/requirements/runtime.txt"
  cp "$REPO/requirements/runtime.txt" "$wheels/runtime.txt"
}

DEB_PYTHON=/usr/bin/python3  # bookworm's 3.11: the venv's python is a link to it

deb_version() {  # $1: the agent's version. The release's own at its tag (v$1); built from
  # another commit, $1+git<commits>.g<hash>: a later commit is a later version to dpkg
  # and apt, so an image build (or the Ansible role) installs it over an older one.
  local base=$1
  if ! git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
    echo "$base"
  elif [ "$(git -C "$REPO" describe --tags --exact-match 2>/dev/null)" = "v$base" ]; then
    echo "$base"
  else
    echo "$base+git$(git -C "$REPO" rev-list --count HEAD).g$(git -C "$REPO" rev-parse --short=12 HEAD)"
  fi
}

build_deb() {  # $1: output directory; prints the .deb's path
  local out=$1 work stage venv version
  mkdir -p "$out"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  build_wheels "$work/wheels" >&2
  stage=$work/stage
  venv=$stage$VENV
  # Made where it is staged, then its paths moved to $VENV: a venv records its own path
  # only in bin/ (scripts' #! lines, activate) and pyvenv.cfg. No pip inside (pip
  # --python installs into it) and no .pyc files (postinst compiles them in place).
  "$DEB_PYTHON" -m venv --without-pip "$venv"
  "$DEB_PYTHON" -m pip --python "$venv/bin/python" install -q --no-compile --no-index \
    --disable-pip-version-check --find-links "$work/wheels" --require-hashes \
    -r "$work/wheels/runtime.txt" >&2
  "$DEB_PYTHON" -m pip --python "$venv/bin/python" install -q --no-compile --no-index \
    --disable-pip-version-check --find-links "$work/wheels" --no-deps machine-agent >&2
  grep -rlI --null "$stage" "$venv" | xargs -0 -r sed -i "s#$stage##g"
  if grep -rlI "$stage" "$venv" >&2; then
    echo "the staging path is left in the files above" >&2
    return 1
  fi
  version=$(deb_version "$("$venv/bin/python" -c 'import agent; print(agent.__version__)')")
  install_units "$stage"
  install -D -m 0644 "$HERE/deb/config.yaml" "$stage/etc/machine-agent/config.yaml"
  mkdir -p "$stage/usr/bin" "$stage/DEBIAN"
  ln -s "$VENV/bin/machine-agent" "$stage/usr/bin/machine-agent"
  install -m 0755 -t "$stage/DEBIAN" "$HERE/deb/postinst" "$HERE/deb/prerm" "$HERE/deb/postrm"
  (cd "$stage" && find etc -type f | sed 's#^#/#' | sort) >"$stage/DEBIAN/conffiles"
  cat >"$stage/DEBIAN/control" <<CONTROL
Package: machine-agent
Version: $version
Architecture: amd64
Maintainer: machine-agent maintainers <machine-agent@example.net>
Depends: python3 (>= 3.11), python3 (<< 3.12), init-system-helpers (>= 1.54), iproute2, systemd
Recommends: chrony | systemd-timesyncd, containernetworking-plugins
Section: admin
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Homepage: https://cluster-api.sigs.k8s.io
Description: turns a freshly booted machine into a Cluster API node
 machine-agent configures network (with IPAM) and time, joins the cluster with
 kubeadm, installs the CNI and reports each step on the Machine's status. Runs from
 its own virtualenv in /opt/machine-agent; the units are enabled, not started.
CONTROL
  local deb=$out/machine-agent_${version}_amd64.deb
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
  echo "$deb"
}

install_units() {  # $1: tree (the .deb's staging tree): the units and the files they rely on
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
}

build_image() {
  local out="" site_bin="" overlays=() enable=() ssh=0
  while (($#)); do
    case $1 in
      --out) out=$2; shift 2 ;;
      --site-bin) site_bin=$2; shift 2 ;;
      --overlay) overlays+=("$2"); shift 2 ;;
      --enable) enable+=("$2"); shift 2 ;;
      --with-ssh) ssh=1; shift ;;
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
  say "installing the agent's package (images/build.sh deb)"
  local deb
  deb=$(build_deb "$out/deb")
  cp "$deb" "$tree/tmp/"
  chroot "$tree" dpkg -i "/tmp/$(basename "$deb")" >&2
  rm "$tree/tmp/$(basename "$deb")"
  chroot "$tree" "$VENV/bin/machine-agent" --version >&2
  # networkd applies what the network phase renders (its default renderer).
  systemctl --root="$tree" enable systemd-networkd.service >&2
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
  # sshd: for logging into a node that failed to join, when the site wants it. Its host
  # keys are never in the image (every node would share them): cloud-init's ssh module
  # makes them at the first boot, before ssh.service starts.
  rm -f "$tree"/etc/ssh/ssh_host_*
  mkdir -p "$tree/etc/systemd/system/ssh.service.d"
  printf '%s\n' '# The image has no host keys; make any missing (as cloud-init does, where it runs).' \
    '[Service]' 'ExecStartPre=/usr/bin/ssh-keygen -A' \
    >"$tree/etc/systemd/system/ssh.service.d/host-keys.conf"
  if ((ssh)); then
    systemctl --root="$tree" enable ssh.service >&2
  else
    systemctl --root="$tree" disable ssh.service >&2
  fi
  # cloud-init's locale module sets its default, en_US.UTF-8 (update-locale refuses a
  # locale that was never generated: `cloud-init status` would say error).
  grep -qx "en_US.UTF-8 UTF-8" "$tree/etc/locale.gen" 2>/dev/null ||
    echo "en_US.UTF-8 UTF-8" >>"$tree/etc/locale.gen"
  chroot "$tree" locale-gen >&2
  # No machine ID in the image (the base tree's would be every node's): an empty file,
  # so systemd makes the node's own at its first boot (machine-id(5)). Not
  # `uninitialized`: that boot would also apply the presets to every unit, and Debian's
  # ("enable *") would start what the image leaves off, sshd among them.
  : >"$tree/etc/machine-id"
  if [ -f "$tree/var/lib/dbus/machine-id" ] && [ ! -L "$tree/var/lib/dbus/machine-id" ]; then
    rm -f "$tree/var/lib/dbus/machine-id"
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
  deb) build_deb "${2:?deb needs a directory}" ;;
  image) shift; build_image "$@" ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
