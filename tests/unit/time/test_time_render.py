"""The chrony and timesyncd files, as an operator reads them: golden files, hostile input
refused at validation, and no value able to add a directive of its own."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config.fields import Decoder
from agent.config.timesync import TimeSpec
from agent.phases.time.render import render

GOLDEN = Path(__file__).parent / "golden"


def decode(doc: dict[str, Any]) -> tuple[TimeSpec | None, list[str]]:
    decoder = Decoder()
    spec = decoder.decode(TimeSpec, doc, "spec.time")
    return (spec if not decoder.errors else None), [str(e) for e in decoder.errors]


def spec_of(doc: dict[str, Any]) -> TimeSpec:
    spec, errors = decode(doc)
    assert not errors, errors
    assert spec is not None
    return spec


def golden_input(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((GOLDEN / name).read_text())
    assert isinstance(doc, dict)
    return doc


def chrony_dropin_input() -> dict[str, Any]:
    doc = golden_input("time.yaml")
    del doc["makestep"]  # a sources.d file holds only sources
    return {**doc, "chrony": {"target": "dropin"}}


@pytest.mark.parametrize(("doc", "path", "golden"), [
    (golden_input("time.yaml"), "/etc/chrony/chrony.conf", "chrony.conf"),
    (chrony_dropin_input(), "/etc/chrony/sources.d/machine-agent.sources",
     "machine-agent.sources"),
    (golden_input("timesyncd.yaml"), "/etc/systemd/timesyncd.conf.d/machine-agent.conf",
     "timesyncd.conf"),
], ids=["chrony-main", "chrony-dropin", "timesyncd"])
def test_rendered_file_matches_its_golden_file(doc: dict[str, Any], path: str,
                                                golden: str) -> None:
    rendered = render(spec_of(doc))
    assert rendered.path == path
    assert rendered.content == (GOLDEN / golden).read_text()


def test_main_file_names_nts_dump_dir_only_when_a_source_uses_nts() -> None:
    plain = render(spec_of({"servers": ["ntp1.example.net"]})).content
    assert "ntsdumpdir" not in plain
    nts = render(spec_of({"servers": ["ntp1.example.net"], "nts": True})).content
    assert "server ntp1.example.net iburst nts\n" in nts
    assert "ntsdumpdir /var/lib/chrony\n" in nts


@pytest.mark.parametrize(("doc", "path"), [
    ({"servers": ["ntp.example\nmakestep 1 -1"]}, "spec.time.servers[0].host"),
    ({"servers": ["ntp.example maxpoll 1"]}, "spec.time.servers[0].host"),
    ({"servers": ["ntp1.example.net\n"]}, "spec.time.servers[0].host"),
    ({"chrony": {"driftFile": "/var/lib/chrony/drift\n"}}, "spec.time.chrony.driftFile"),
    ({"servers": [{"host": "ntp.example", "port": 0}]}, "spec.time.servers[0].port"),
    ({"servers": [{"host": "ntp.example", "minpoll": -7}]}, "spec.time.servers[0].minpoll"),
    ({"servers": [{"host": "ntp.example", "maxpoll": 25}]}, "spec.time.servers[0].maxpoll"),
    ({"servers": [{"host": "ntp.example", "minpoll": 6, "maxpoll": 4}]},
     "spec.time.servers[0].maxpoll"),
    ({"chrony": {"driftFile": "/var/lib/chrony/drift\nrtcsync"}}, "spec.time.chrony.driftFile"),
    ({"chrony": {"driftFile": "drift"}}, "spec.time.chrony.driftFile"),
    ({"chrony": {"ntsDumpDir": "/var/lib/../../etc"}}, "spec.time.chrony.ntsDumpDir"),
    ({"chrony": {"commandAddress": "localhost; reboot"}}, "spec.time.chrony.commandAddress"),
    ({"chrony": {"target": "dropin", "sourcesFile": "/etc/chrony/sources.d/a.conf"}},
     "spec.time.chrony.sourcesFile"),
    ({"makestep": {"threshold": "1s", "limit": 0}}, "spec.time.makestep.limit"),
    ({"makestep": {"threshold": 0}}, "spec.time.makestep.threshold"),
    ({"chrony": {"target": "dropin"}, "makestep": {}}, "spec.time.makestep"),
    ({"reloadCommand": []}, "spec.time.reloadCommand"),
    ({"reloadCommand": ["systemctl", "restart\nchrony"]}, "spec.time.reloadCommand[1]"),
    ({"reloadCommand": ["systemctl", ""]}, "spec.time.reloadCommand[1]"),
    ({"renderer": "ntpd"}, "spec.time.renderer"),
    ({"renderer": "timesyncd", "servers": [{"host": "ntp.example", "port": 11123}]},
     "spec.time.servers[0].port"),
    ({"renderer": "timesyncd", "nts": True}, "spec.time.nts"),
    ({"renderer": "timesyncd", "servers": [{"host": "ntp.example", "minpoll": 2}]},
     "spec.time.servers[0].minpoll"),
    ({"renderer": "timesyncd", "makestep": {}}, "spec.time.makestep"),
    ({"onTimeout": "ignore"}, "spec.time.onTimeout"),
    ({"maxOffset": "-5ms"}, "spec.time.maxOffset"),
])
def test_hostile_or_unusable_values_are_refused_with_their_path(doc: dict[str, Any],
                                                                path: str) -> None:
    spec, errors = decode(doc)
    assert spec is None
    assert [e.split(":")[0] for e in errors] == [path], errors


# -- no value can add a directive ---------------------------------------------------------

CHRONY_DIRECTIVES = {"server", "pool", "makestep", "driftfile", "ntsdumpdir", "rtcsync"}
SOURCE_OPTION = re.compile(
    r"^(?: port \d+)?(?: iburst)?(?: nts)?(?: minpoll -?\d+)?(?: maxpoll -?\d+)?$")

HOSTILE = "ab1.-:/ \t\n\r#;$`'\"\\{}%=[]\x00\x0b\u2028é"
# A seeded generator rather than hypothesis: hypothesis caches constants of the agent's
# modules under .hypothesis/ in the work tree, which the suite's side-effect guard refuses.
SAMPLES = 3000


def hostile_text(rng: random.Random) -> str:
    return "".join(rng.choice(HOSTILE) for _ in range(rng.randint(0, 24)))


def time_document(rng: random.Random) -> dict[str, Any]:
    host = rng.choice([hostile_text(rng), "ntp1.example.net", "192.0.2.1", "2001:db8::1",
                       rng.choice(["ntp1.example.net", "a1"]) + rng.choice(HOSTILE)])
    server: dict[str, Any] = {"host": host}
    for key in ("port", "minpoll", "maxpoll"):
        if rng.random() < 0.5:
            server[key] = rng.randint(-10, 70000) if key == "port" else rng.randint(-10, 30)
    drift = rng.choice(["/" + hostile_text(rng), "/var/lib/chrony/drift"])
    return {"servers": [server], "chrony": {"driftFile": drift},
            "renderer": rng.choice(["chrony", "timesyncd"])}


def parse_chrony(content: str) -> list[list[str]]:
    directives = []
    for line in content.split("\n"):
        if not line or line.startswith("#"):
            continue
        words = line.split(" ")
        assert words[0] in CHRONY_DIRECTIVES, f"unexpected directive in {line!r}"
        directives.append(words)
    return directives


def test_no_value_can_add_a_directive() -> None:
    rng = random.Random(20240607)
    accepted = 0
    for _ in range(SAMPLES):
        doc = time_document(rng)
        spec, errors = decode(doc)
        if spec is None:
            assert errors  # refused, with a reason: nothing was rendered
            continue
        accepted += 1
        assert_only_its_own_directives(doc, render(spec).content)
    assert SAMPLES / 20 < accepted < SAMPLES  # both paths were exercised


def assert_only_its_own_directives(doc: dict[str, Any], content: str) -> None:
    assert all(c == "\n" or (c.isprintable() and c.isascii()) for c in content)
    host = doc["servers"][0]["host"]
    if doc["renderer"] == "timesyncd":
        lines = [line for line in content.split("\n") if line and not line.startswith("#")]
        assert lines == ["[Time]", f"NTP={host}"]
        return
    directives = parse_chrony(content)
    sources = [d for d in directives if d[0] in ("server", "pool")]
    assert len(sources) == 1 and sources[0][1] == host
    assert SOURCE_OPTION.match(" " + " ".join(sources[0][2:]) if sources[0][2:] else "")
    assert [d[0] for d in directives if d[0] not in ("server", "pool")] == \
        ["makestep", "driftfile", "rtcsync"]
    assert ["driftfile", doc["chrony"]["driftFile"]] in directives
