"""The one way to render the jinja2 templates of the repository's templates/ (networkd,
netplan, chrony, kubeadm, RBAC, CNI): one environment for every phase.

Values reaching a template are validated before (agent/config/checks.py); the filter `q`
quotes a string as JSON, which is also a YAML double-quoted scalar reading back the same.
Whatever checked a value before, every expression's output passes `refuse_separators` on
its way into the text (the environment's `finalize`): a value holding a line or record
separator would add a line (a directive, a section) of its own to the file. Files written
without a template (/etc/hostname, /etc/hosts) call `refuse_separators` themselves.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError, FieldError, shown

if TYPE_CHECKING:
    import jinja2

SEPARATORS = re.compile("[\x00\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What some reader takes as the end of a line or record: systemd and chrony split on
\\n, Python's str.splitlines (and so many tools) also on \\r \\v \\f \\x1c-\\x1e \\x85
U+2028 U+2029; NUL ends a C string."""
def refuse_separators(value: object, what: str = "a value") -> None:
    """Raise ConfigError when `value`, as it would be written, holds a line or record
    separator."""
    text = value if isinstance(value, str) else str(value)
    found = SEPARATORS.search(text)
    if found is not None:
        raise ConfigError([FieldError(
            what, f"holds a line or record separator (U+{ord(found.group()):04X}) at "
                  f"character {found.start()}: {shown(text)}",
            hint="give a single-line value without control characters")])


def _finalize(value: object) -> object:
    refuse_separators(value)
    return value


# Characters a YAML reader does not take as they are inside a double-quoted scalar:
# non-printable ones (DEL, C1, surrogates, non-characters) and the line breaks NEL, LS and
# PS, which it would fold into a space.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def quote(value: object) -> str:
    """`value` as JSON, with non-ASCII text as it is (JSON's escape of a character beyond
    U+FFFF is a surrogate pair, which YAML reads as two broken characters), and the
    characters YAML does not take as they are escaped."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                            json.dumps(value, ensure_ascii=False))


def template_dir() -> Path:
    """Where the templates are: the package data agent/templates of an installed wheel, or
    the top-level templates/ of a source checkout (an editable install maps no data)."""
    spec = importlib.util.find_spec("agent.templates")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[1] / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # lazily: start-up time and memory are measured

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir()),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True, finalize=_finalize)
    env.filters["q"] = quote
    return env


def render(name: str, **values: Any) -> str:
    """Render the template at `name` (relative to templates/, e.g. `time/chrony.conf.j2`).

    The environment, and with it every compiled template, is made once per process. A
    value holding a line or record separator is refused (ConfigError naming the
    template), whatever checked it before."""
    try:
        return _environment().get_template(name).render(**values)
    except ConfigError as err:
        raise ConfigError([FieldError(f"{e.path} (rendering {name})" if e.path ==
                                      "a value" else e.path, e.message, hint=e.hint,
                                      origin=e.origin) for e in err.errors]) from None


class UndefinedVariable(Exception):
    """A template that came with data asked for a variable its values do not hold."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
        """Its dotted path, e.g. `ds.meta_data.instance_id`."""


class TemplateProblem(Exception):
    """A template that came with data does not parse, or its rendering failed."""


class _Scope(dict[str, Any]):
    """A mapping of the values that knows where it is, so that a variable missing below
    it is named by its whole path."""

    def __init__(self, items: dict[str, Any], path: str) -> None:
        super().__init__({k: _scoped(v, f"{path}.{k}" if path else k)
                          for k, v in items.items()})
        self.path = path


def _scoped(value: Any, path: str) -> Any:
    return _Scope(value, path) if isinstance(value, dict) else value


@functools.cache
def _data_environment() -> jinja2.Environment:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    class Missing(jinja2.StrictUndefined):
        """Fails on any use but `is defined` and `default`, naming the whole path."""

        @property
        def _undefined_message(self) -> str:
            owner = self._undefined_obj
            where = owner.path if isinstance(owner, _Scope) else ""
            name = str(self._undefined_name)
            raise UndefinedVariable(f"{where}.{name}" if where else name)

    # As cloud-init renders user-data (cloudinit/templater.py): trim_blocks, the `do`
    # extension; sandboxed, as the data comes from elsewhere.
    return SandboxedEnvironment(undefined=Missing, trim_blocks=True, autoescape=False,
                                keep_trailing_newline=True, finalize=_finalize,
                                extensions=["jinja2.ext.do"])


def render_data_template(text: str, values: dict[str, Any]) -> str:
    """Render a jinja template that came with data (not one of the repository's), with
    `values`. Raises UndefinedVariable naming the first variable `values` does not hold,
    TemplateProblem when it does not parse or fails, ConfigError when an expression's
    output holds a line or record separator."""
    import jinja2

    try:
        template = _data_environment().from_string(text)
    except jinja2.TemplateSyntaxError as err:
        raise TemplateProblem(f"line {err.lineno}: {err.message}") from None
    try:
        return template.render(_Scope(values, ""))
    except UndefinedVariable:
        raise
    except ConfigError:
        raise
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError) as err:
        raise TemplateProblem(shown(str(err), 200)) from None
