"""Renders a `## template: jinja` user-data file as cloud-init does, with cloud-init's own
code and the instance data it wrote under ROOT; prints the result.

Run with the system Python that has Debian's cloud-init (`/usr/bin/python3 THIS ROOT
FILE`); it is not a test module and is not imported by the suite.
"""

import os
import sys

from cloudinit.handlers.jinja_template import render_jinja_payload_from_file

if __name__ == "__main__":
    root, payload = sys.argv[1], sys.argv[2]
    with open(payload) as handle:
        text = handle.read()
    data = os.path.join(root, "run/cloud-init/instance-data-sensitive.json")
    sys.stdout.write(render_jinja_payload_from_file(text, payload, data))
