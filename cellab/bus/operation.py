"""`@operation`: marks an agent method as callable over the bus, with a pydantic params model."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__cellab_operation__"


@dataclass(frozen=True)
class OperationSpec:
    name: str
    concurrent: bool
    # Built-ins that only look at memory or read one bounded chunk run on the I/O thread itself.
    inline: bool = False


@dataclass(frozen=True)
class BoundOperation:
    spec: OperationSpec
    method: Callable[..., Any]
    params_model: type[BaseModel] | None

    @property
    def name(self) -> str:
        return self.spec.name

    def schema(self) -> dict[str, Any]:
        return self.params_model.model_json_schema() if self.params_model else {}


@overload
def operation(fn: F) -> F: ...
@overload
def operation(*, concurrent: bool = False, name: str | None = None) -> Callable[[F], F]: ...


def operation(fn: Any = None, *, concurrent: bool = False, name: str | None = None, _inline: bool = False) -> Any:
    """Expose a method as a bus operation.

    The params model is the annotation of the method's `params` argument (a pydantic BaseModel);
    a method without `params` takes none. Operations of one agent run one at a time in arrival
    order unless `concurrent=True`.
    """

    def mark(f: F) -> F:
        setattr(f, _MARK, OperationSpec(name or f.__name__, concurrent or _inline, _inline))
        return f

    return mark(fn) if fn is not None else mark


def collect_operations(obj: object) -> dict[str, BoundOperation]:
    """The operations of an agent instance, resolving annotations now that every class exists."""
    found: dict[str, BoundOperation] = {}
    for cls in reversed(type(obj).__mro__):
        for attr, value in vars(cls).items():
            spec = getattr(value, _MARK, None)
            if not isinstance(spec, OperationSpec):
                continue
            method = getattr(obj, attr)
            found[spec.name] = BoundOperation(spec, method, _params_model(value, cls))
    return found


def _params_model(fn: Callable[..., Any], owner: type) -> type[BaseModel] | None:
    signature = inspect.signature(fn)
    if "params" not in signature.parameters:
        return None
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        raise TypeError(f"{owner.__name__}.{fn.__name__}: cannot resolve the params annotation ({exc})") from None
    model = hints.get("params")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{owner.__name__}.{fn.__name__}: `params` must be annotated with a pydantic BaseModel")
    return model
