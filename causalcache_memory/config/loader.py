"""YAML loading with every validation error reported at once (field path, bad value, what is allowed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from causalcache_memory.config.files import MAX_CONFIG_BYTES, read_regular_file
from causalcache_memory.config.models import CausalCacheConfig
from causalcache_memory.config.paths import resolve_config_paths
from causalcache_memory.errors import ConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "MAX_SCALAR_CHARS",
    "config_schema",
    "format_validation_error",
    "load_config",
    "parse_config",
    "read_yaml_bytes",
    "read_yaml_file",
    "refuse_foreign",
    "show_key",
    "show_value",
]

#: bounds of :func:`load_config` (a real config is a few KiB, a few levels deep, a few hundred values)
MAX_DEPTH = 32
MAX_NODES = 20_000
MAX_INT_DIGITS = 40
#: the longest single value (a path, a prompt) in characters; checked on the token stream
MAX_SCALAR_CHARS = 64 * 1024
#: unknown keys named in one error (each cut to :data:`_KEY_CHARS` characters); the rest are counted
MAX_UNKNOWN_SHOWN = 5
_KEY_CHARS = 40

M = TypeVar("M", bound=BaseModel)


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """Field names allowed at ``loc`` (the parent of an unknown key)."""
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def format_validation_error(
    exc: ValidationError, model: type[BaseModel], source: str = "config"
) -> ConfigError:
    """Turn a pydantic ``ValidationError`` into one :class:`ConfigError` listing every problem."""
    lines: list[str] = []
    unknown = 0
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        path = ".".join(show_key(str(p)) for p in loc) or "(top level)"
        shown = show_value(err.get("input"))
        if err["type"] == "missing":
            lines.append(f"{path}: required key is missing; add it")
        elif err["type"] == "extra_forbidden":
            unknown += 1
            if unknown > MAX_UNKNOWN_SHOWN:
                continue
            allowed = _allowed_keys(model, loc[:-1])
            hint = f"unknown key; allowed keys here: {', '.join(allowed)}" if allowed else "unknown key"
            lines.append(f"{path}: {hint}")
        else:
            lines.append(f"{path}: got {shown} — {err['msg']}")
    if unknown > MAX_UNKNOWN_SHOWN:
        lines.append(f"... and {unknown - MAX_UNKNOWN_SHOWN} more unknown keys (not shown)")
    noun = "problem" if len(lines) == 1 else "problems"
    message = f"{source}: {len(lines)} {noun}:\n  " + "\n  ".join(lines)
    return ConfigError(message, lines)


def show_key(key: str) -> str:
    """A key as an error names it: at most :data:`_KEY_CHARS` characters."""
    return key if len(key) <= _KEY_CHARS else key[: _KEY_CHARS - 3] + "..."


def show_value(value: Any) -> str:
    """A short rendering of a bad value that never walks into it (an alias bomb stays unexpanded)."""
    if isinstance(value, Mapping):
        return "{...}"
    if isinstance(value, (list, tuple, set)):
        return f"a list of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    if isinstance(value, str):
        shown = json.dumps(value[:80])
    elif value is None or isinstance(value, (bool, int, float)):
        shown = json.dumps(value)
    else:
        shown = f"a {type(value).__name__}"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def refuse_foreign(data: Mapping[str, Any], model: type[BaseModel], source: str) -> None:
    """Refuse a mapping that shares no top-level key with ``model`` without naming any of its keys: it
    is another file (a wrong or planted path), whose keys or values an error must not print."""
    if data and not any(isinstance(k, str) and k in model.model_fields for k in data):
        raise ConfigError(
            f"{source}: none of its {len(data)} top-level keys is a key of this config (allowed: "
            f"{', '.join(sorted(model.model_fields))}); is this the config file? (The keys of a file that "
            "shares none with the config are not shown, so a wrong path never prints another file.)"
        )


def parse_config(
    data: Mapping[str, Any] | None,
    model: type[M] = CausalCacheConfig,  # type: ignore[assignment]  # mypy#3737: a default for a TypeVar
    source: str = "config",
) -> M:
    """Validate a mapping into ``model``; raises :class:`ConfigError` with every problem."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got {type(data).__name__}")
    refuse_foreign(data, model, source)
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise format_validation_error(exc, model, source) from None


def load_config(path: str | Path, model: type[M] = CausalCacheConfig, *, follow_links: bool = False) -> M:  # type: ignore[assignment]
    """Load and validate a YAML file (``yaml.safe_load`` semantics, bounded; never arbitrary objects).

    Bounded in time and memory whatever the file holds: a regular file only (a FIFO, ``/dev/stdin`` or a
    device is refused without reading it, so loading never blocks), at most :data:`MAX_CONFIG_BYTES`
    bytes, nesting depth :data:`MAX_DEPTH`, :data:`MAX_NODES` values counted on the token stream *before*
    any node is built and again after alias expansion (a "billion laughs" alias bomb is refused before it
    is built) and integers of at most :data:`MAX_INT_DIGITS` digits. Duplicate keys, invalid UTF-8 and
    every other problem raise :class:`ConfigError` naming the file.

    Errors never print another file: a symbolic link to a file outside the config's folder is refused
    unless ``follow_links=True`` (:func:`read_yaml_file`), values are cut to 80 characters, at most
    :data:`MAX_UNKNOWN_SHOWN` unknown keys are named, and a file sharing no top-level key with the config
    has none of its keys shown.
    """
    path = Path(path)
    data = read_yaml_file(path, follow_links=follow_links)
    if isinstance(data, Mapping):
        refuse_foreign(data, model, str(path))  # before resolve_config_paths adds keys of its own
    data = resolve_config_paths(data, path.parent) if model is CausalCacheConfig else data
    return parse_config(data, model, source=str(path))


def read_yaml_file(path: str | Path, *, follow_links: bool = False) -> Any:
    """The YAML document of the config file ``path``, read and parsed with :func:`load_config`'s bounds.

    Only a regular file is read. A symbolic link whose target lies outside the folder of ``path`` (a
    link to ``~/.aws/credentials`` or ``/etc/shadow``) is refused unread unless ``follow_links=True``:
    a wrong or planted path must not make an error message print another file's lines."""
    path = Path(path)
    return read_yaml_bytes(read_regular_file(path, follow_links=follow_links), source=str(path))


def read_yaml_bytes(raw: bytes, *, source: str) -> Any:
    """Parse YAML bytes with the bounds of :func:`load_config`; every problem is a :class:`ConfigError`."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{source}: the file is larger than the limit of {MAX_CONFIG_BYTES} bytes; a config is a few KiB"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{source}: not valid UTF-8 at byte {exc.start} (line {line}); save the file as UTF-8"
        ) from None
    try:
        _check_depth(text, source)
        loader = _BoundedLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"{source}: the YAML is nested too deeply (limit {MAX_DEPTH} levels)") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise ConfigError(
            f"{source}: a value cannot be read: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None


#: libyaml's scanner and parser when PyYAML has them (about 80 times less CPU than the pure-Python ones:
#: a 1 MiB plain scalar costs about 10 ms to scan instead of 0.8 s), else PyYAML's own
_SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _BoundedLoader(_SAFE_LOADER):
    """``SafeLoader`` (no Python tags); the bounds are checked on the composed node graph."""


_CONTAINERS = (yaml.SequenceNode, yaml.MappingNode)
_INT_TAG = "tag:yaml.org,2002:int"


def _check_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` and more than :data:`MAX_NODES` values, before composing.

    A character pass counts unclosed flow brackets outside quotes and comments (conservative: a refusal
    at worst for 32 unclosed brackets inside plain text; skipped when the text has too few brackets to
    nest that deep); the token pass counts block nesting and the values (scalars, aliases, collections)
    and stops at the first one over the limit, so its cost is bounded by :data:`MAX_NODES` tokens whatever
    the file holds (a flat 1 MiB list of 520k values is refused after scanning 20k of them).
    """
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_flow_depth(text, source)
    _check_tokens(text, source)


def _check_flow_depth(text: str, source: str) -> None:
    flow = 0
    quote = ""
    for line_no, line in enumerate(text.splitlines(), 1):
        for i, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "\"'" and (i == 0 or line[i - 1] in " \t[{,:"):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                break
            elif ch in "[{":
                flow += 1
                if flow > MAX_DEPTH:
                    raise ConfigError(
                        f"{source}: nesting deeper than {MAX_DEPTH} levels at line {line_no}; "
                        "a config is a few levels deep"
                    )
            elif ch in "]}":
                flow = max(0, flow - 1)
        if quote == "'":
            quote = ""  # single-quoted scalars may span lines; be lenient, the token pass still bounds


_VALUE_TOKENS = (yaml.ScalarToken, yaml.AliasToken)


def _check_tokens(text: str, source: str) -> None:
    depth = 0
    values = 0
    opening = (
        yaml.BlockSequenceStartToken,
        yaml.BlockMappingStartToken,
        yaml.FlowSequenceStartToken,
        yaml.FlowMappingStartToken,
    )
    closing = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)
    for token in yaml.scan(text, Loader=_SAFE_LOADER):
        if isinstance(token, yaml.ScalarToken) and len(token.value) > MAX_SCALAR_CHARS:
            raise ConfigError(
                f"{source}: a value of {len(token.value)} characters at line {token.start_mark.line + 1} "
                f"(the limit MAX_SCALAR_CHARS is {MAX_SCALAR_CHARS}); a config value is a name, a path or "
                "a short text — is this the right file?"
            )
        if isinstance(token, _VALUE_TOKENS) or isinstance(token, opening):
            values += 1
            if values > MAX_NODES:
                raise ConfigError(
                    f"{source}: more than {MAX_NODES} values (the limit MAX_NODES, reached at line "
                    f"{token.start_mark.line + 1}); a config holds a few hundred values — is this the right file?"
                )
        if isinstance(token, opening):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    f"{source}: nesting deeper than {MAX_DEPTH} levels at line {token.start_mark.line + 1}; "
                    "a config is a few levels deep"
                )
        elif isinstance(token, closing):
            depth -= 1


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Expanded size (aliases counted at every use), cycles, duplicate keys and integer lengths."""
    sizes: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_stack.discard(key)
            children = _children(node)
            total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_NODES:
                raise ConfigError(
                    f"{source}: the YAML expands to more than {MAX_NODES} values (the limit MAX_NODES; "
                    f"each alias counts its anchor's values at every use, line {node.start_mark.line + 1}); "
                    "anchors/aliases may not multiply the document"
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_stack:
            raise ConfigError(f"{source}: a YAML alias refers to itself (line {node.start_mark.line + 1})")
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _INT_TAG and len(node.value) > MAX_INT_DIGITS:
                raise ConfigError(
                    f"{source}: line {node.start_mark.line + 1}: an integer of {len(node.value)} characters; "
                    f"numbers in a config have at most {MAX_INT_DIGITS} digits"
                )
            sizes[key] = 1
            continue
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, source)
        on_stack.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
            raise ConfigError(
                f"{source}: duplicate key {key_node.value[:80]!r} at line {line} (first at line "
                f"{seen[key_node.value]}); YAML would silently keep only the last one — remove one"
            )
        seen[key_node.value] = line


def config_schema(model: type[BaseModel] = CausalCacheConfig) -> dict[str, Any]:
    """JSON schema of the configuration."""
    return model.model_json_schema()
