"""Writing a config as YAML: with PyYAML (Debian's python3-yaml) when it is
installed, else with the small writer below, which covers what a config
holds (mappings, lists, text, whole numbers, booleans) and quotes any text
a YAML reader could take for something else."""
import json
import re

try:
    import yaml as _pyyaml
except ImportError:  # pragma: no cover - depends on the machine
    _pyyaml = None

_PLAIN = re.compile(r"[A-Za-z0-9_./$-][A-Za-z0-9_./${}:,=+@-]*")
_NUMBER = re.compile(r"[-+]?(\d[\d_]*|\.\d+|\d+\.\d*)([eE][-+]?\d+)?|"
                     r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|0[xob][0-9a-fA-F_]+")
_SPECIAL = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~",
            ""}


def _text(s):
    if (_PLAIN.fullmatch(s) and s.lower() not in _SPECIAL and
            not _NUMBER.fullmatch(s) and not s.endswith(":") and
            not s.startswith("-")):
        return s
    return json.dumps(s)  # JSON's string escapes are valid YAML


def _scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if v is None:
        return "null"
    return _text(str(v))


def _emit(v, indent, out):
    pad = "  " * indent
    if isinstance(v, dict):
        for k, item in v.items():
            key = _text(str(k))
            if isinstance(item, dict) and item:
                out.append("%s%s:" % (pad, key))
                _emit(item, indent + 1, out)
            elif isinstance(item, (list, tuple)) and item:
                out.append("%s%s:" % (pad, key))
                _emit(item, indent + 1, out)
            elif isinstance(item, (dict, list, tuple)):
                out.append("%s%s: %s" % (pad, key,
                                         "{}" if isinstance(item, dict)
                                         else "[]"))
            else:
                out.append("%s%s: %s" % (pad, key, _scalar(item)))
    else:
        for item in v:
            if isinstance(item, (dict, list, tuple)):
                raise TypeError("nested collections in a list are not part "
                                "of a skippr config")
            out.append("%s- %s" % (pad, _scalar(item)))


def dump(data):
    """YAML text for data (a dict), keys in their given order."""
    if _pyyaml is not None:
        return _pyyaml.safe_dump(data, sort_keys=False,
                                 default_flow_style=False, allow_unicode=True)
    out = []
    _emit(data, 0, out)
    return "\n".join(out) + "\n"
