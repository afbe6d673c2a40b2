"""Where a key of a file cellab reads belongs, for error messages: the root models of those files (registered
by their owners: the campaign's loader, the inventory's model), the dotted path of every key under them, and the
model a pydantic error location ends in. Pure model walking: it imports no owner, so the errors module can use it
without reaching up into the packages that raise its errors."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

#: model title (as pydantic's errors name it) -> (model, scope): 'campaign' or 'inventory'
ROOTS: dict[str, tuple[type[BaseModel], str]] = {}
#: scope -> the key index of that scope, when its owner knows more than its root models' fields
_SCOPE_KEYS: dict[str, Callable[[], dict[str, list[str]]]] = {}
#: the labs whose own run parameters include a key (the campaign's loader registers it)
_PARAM_LABS: list[Callable[[str], list[str]]] = []


def register_root(title: str, model: type[BaseModel], scope: str) -> None:
    ROOTS[title] = (model, scope)


def register_scope(scope: str, key_locations: Callable[[], dict[str, list[str]]]) -> None:
    _SCOPE_KEYS[scope] = key_locations


def register_param_labs(labs_with_param: Callable[[str], list[str]]) -> None:
    if labs_with_param not in _PARAM_LABS:
        _PARAM_LABS.append(labs_with_param)


def root_models() -> dict[str, tuple[type[BaseModel], str]]:
    return dict(ROOTS)


def key_locations(scope: str) -> dict[str, list[str]]:
    """key -> the paths where it is allowed in a file of that scope."""
    if scope in _SCOPE_KEYS:
        return _SCOPE_KEYS[scope]()
    out: dict[str, list[str]] = {}
    for model, model_scope in ROOTS.values():
        if model_scope == scope:
            for key, where in walk(model, ""):
                if where not in out.setdefault(key, []):
                    out[key].append(where)
    return out


def labs_with_param(name: str) -> list[str]:
    return [lab for find in _PARAM_LABS for lab in find(name)]


def unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def members(annotation: Any) -> list[Any]:
    """The members of a union (Optional included), else [annotation]."""
    annotation = unwrap(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [unwrap(a) for a in typing.get_args(annotation)]
    return [annotation]


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def container(annotation: Any) -> tuple[str, Any] | None:
    """('list', item) or ('dict', value) for list/tuple/set/dict annotations."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, set, frozenset) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return "list", args[0] if args else Any
    if origin is dict:
        return "dict", args[1] if len(args) == 2 else Any
    return None


def nested_models(annotation: Any, path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """(section path, model) of every model a field holds, through unions, lists ([]) and mappings (.NAME)."""
    for member in members(annotation):
        if is_model(member):
            yield path, member
        elif (inner := container(member)) is not None:
            kind, item = inner
            yield from nested_models(item, f"{path}[]" if kind == "list" else f"{path}.NAME")


def walk(model: type[BaseModel], path: str) -> Iterator[tuple[str, str]]:
    """(key, dotted path) of every field under the model, nested ones included."""
    for name, info in model.model_fields.items():
        sub = f"{path}.{name}" if path else name
        yield name, sub
        for sub_path, sub_model in nested_models(info.annotation, sub):
            if sub_model is not model:
                yield from walk(sub_model, sub_path)


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[type[BaseModel], tuple[Any, ...]] | None:
    """The model that holds the key at the end of `loc` (a pydantic error location under `model`), and the
    location without pydantic's union-member tags ('list[UESpec]'); None when the path leaves the models."""
    annotation: Any = model
    clean: list[Any] = []
    items = list(loc[:-1])
    i = 0
    while i < len(items):
        item = items[i]
        options = [m for m in members(annotation) if m is not type(None)]
        if len(options) > 1:
            tagged = [m for m in options if _tag(m) == item]
            if tagged:  # pydantic names the union member it tried
                annotation = tagged[0]
                i += 1
                continue
            structured = [m for m in options if is_model(m) or container(m) is not None]
            if len(structured) != 1:
                return None
            options = structured
        annotation = options[0]
        if is_model(annotation):
            if not isinstance(item, str) or item not in annotation.model_fields:
                return None
            annotation = annotation.model_fields[item].annotation
        elif (inner := container(annotation)) is not None:
            annotation = inner[1]
        else:
            return None
        clean.append(item)
        i += 1
    found = [m for m in members(annotation) if is_model(m)]
    if len(found) != 1:
        return None
    return found[0], (*clean, loc[-1]) if loc else ()


def _tag(annotation: Any) -> str:
    """The name pydantic gives a union member in an error location: 'int', 'UESpec', 'list[UESpec]'."""
    origin = typing.get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", str(annotation))
    args = ", ".join(_tag(a) for a in typing.get_args(annotation))
    return f"{getattr(origin, '__name__', str(origin))}[{args}]"
