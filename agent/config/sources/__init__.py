"""Where the configuration comes from: one module per source (files, cloud-init, the
kernel command line; the Machine's ConfigMap or Secret: agent.kube.machine_config), and
the chain above them (`chain.py`) that reads, merges and validates. These read and may wait
(cloud-init for up to --cloud-init-wait); the model below them is pure."""

from agent.config.fragment import Fragment, parse_fragment, yaml_structure_problem
from agent.config.loaded import LoadedConfig, Origins
from agent.config.sources.chain import ConfigCheck, Source, default_sources, load_config
from agent.config.sources.files import BAKED_FILE, DROP_IN_DIR, DropInSource, FileSource

__all__ = ["BAKED_FILE", "DROP_IN_DIR", "ConfigCheck", "DropInSource", "FileSource",
           "Fragment", "LoadedConfig", "Origins", "Source", "default_sources", "load_config",
           "parse_fragment", "yaml_structure_problem"]
