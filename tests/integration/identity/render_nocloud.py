"""Renders what cloud-init writes on first boot from a NoCloud seed, with cloud-init's own
code, into a node root: /run/cloud-init/{instance-data.json, instance-data-sensitive.json,
status.json, result.json} and /var/lib/cloud/instances/IID/user-data.txt.

Run with the system Python that has Debian's cloud-init (`/usr/bin/python3 THIS ROOT
[--stages N]`); it is not a test module and is not imported by the suite. Everything is
read from and written under ROOT: the seed in ROOT/var/lib/cloud/seed/nocloud, paths of
cloud-init's `Paths` pointed into ROOT. `--stages N` runs only the first N of cloud-init's
stages (init-local, init, modules-config, modules-final), so a root can show cloud-init
still running. Stages other than the data source's are recorded (status_wrapper) but do
nothing: no module touches the machine.
"""

import argparse
import json
import os
import sys

from cloudinit import atomic_helper, helpers, sources, util
from cloudinit.cmd import main as cloudinit_main
from cloudinit.sources import DataSourceNoCloud

STAGES = (("init", True), ("init", False), ("modules", "config"), ("modules", "final"))


def _confine(root: str) -> None:
    """Refuse any file cloud-init's helpers would write outside `root`."""
    write_file, sym_link = util.write_file, util.sym_link

    def inside(path: str) -> str:
        real = os.path.abspath(path)
        if not real.startswith(os.path.abspath(root) + os.sep):
            raise SystemExit(f"refusing to write {path}: outside {root}")
        return path

    write_json = atomic_helper.write_json
    util.write_file = lambda path, *a, **k: write_file(inside(path), *a, **k)
    atomic_helper.write_json = lambda path, *a, **k: write_json(inside(path), *a, **k)
    sources.write_json = atomic_helper.write_json
    util.sym_link = lambda source, link, *a, **k: sym_link(source, inside(link), *a, **k)


def render(root: str, stages_to_run: int) -> None:
    _confine(root)
    cloud_dir = os.path.join(root, "var/lib/cloud")
    run_dir = os.path.join(root, "run/cloud-init")
    paths = helpers.Paths({"cloud_dir": cloud_dir, "run_dir": run_dir})
    # No block devices (fs_label None): the seed directory is the only source.
    sys_cfg = {"datasource": {"NoCloud": {"fs_label": None}}}

    def find_datasource(name: str, args: argparse.Namespace) -> tuple[object, list[str]]:
        ds = DataSourceNoCloud.DataSourceNoCloud(sys_cfg, None, paths)
        if not ds.get_data():  # also writes instance-data(-sensitive).json
            raise RuntimeError(f"no NoCloud seed under {cloud_dir}/seed/nocloud")
        paths.datasource = ds
        # What stages.Init._reflect_cur_instance and Init.update (_store_rawdata) do,
        # without Init: it re-reads the machine's own /etc/cloud and paths.
        util.sym_link(paths.get_ipath(), paths.instance_link)
        util.write_file(paths.get_ipath("userdata_raw"), ds.get_userdata_raw(), 0o600)
        return ds, []

    def nothing(name: str, args: argparse.Namespace) -> object:
        return (None, []) if name == "init" else []

    for index, (name, mode) in enumerate(STAGES[:stages_to_run]):
        functor = find_datasource if index == 1 else nothing
        args = argparse.Namespace(action=(name, functor), local=mode is True, mode=mode)
        cloudinit_main.status_wrapper(name, args, data_d=os.path.join(cloud_dir, "data"),
                                      link_d=run_dir)
    with open(os.path.join(cloud_dir, "data/status.json")) as handle:
        status = json.load(handle)["v1"]
    errors = [e for stage in status.values() if isinstance(stage, dict)
              for e in stage["errors"]]
    if errors:
        raise SystemExit(f"cloud-init stages failed: {errors}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--stages", type=int, default=len(STAGES))
    options = parser.parse_args()
    render(options.root, options.stages)
    sys.exit(0)
