"""Role contracts: what an agent of one role answers, with typed parameters and results.

A contract is owned by the core; rooms implement it (an `Agent` subclass with an `@operation` per
contract operation, taking the contract's params model) and register the implementation under an entry
point (`cellab.agents`, name `ROLE.KIND`). The controller calls agents through a `RoleClient`, so call sites
hold models, never operation-name strings or hand-built dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:
    from cellab.bus import Controller

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


class Model(BaseModel):
    """Base of every contract model: unknown fields are refused, in both directions."""

    model_config = ConfigDict(extra="forbid")


class Empty(Model):
    """The parameters (or result) of an operation that takes (or returns) nothing."""


@dataclass(frozen=True)
class Op(Generic[P, R]):
    """One operation of a role: its wire name, its params model, its result model."""

    name: str
    params: type[P]
    result: type[R]
    doc: str = ""


@dataclass(frozen=True)
class Contract:
    role: str
    ops: tuple[Op, ...]
    # telemetry topic -> the model of one sample on it
    telemetry: dict[str, type[BaseModel]] = field(default_factory=dict)

    def op(self, name: str) -> Op:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(f"role {self.role} has no operation {name!r}")

    def missing_in(self, agent_cls: type) -> list[str]:
        """What `agent_cls` lacks of this contract: operations absent or taking another params model."""
        from cellab.bus.operation import _MARK, OperationSpec, _params_model

        found: dict[str, type[BaseModel] | None] = {}
        for cls in reversed(agent_cls.__mro__):
            for value in vars(cls).values():
                spec = getattr(value, _MARK, None)
                if isinstance(spec, OperationSpec):
                    found[spec.name] = _params_model(value, cls)
        problems = []
        for op in self.ops:
            if op.name not in found:
                problems.append(f"{op.name}: missing")
            elif (found[op.name] or Empty) is not op.params and op.params is not Empty:
                got = found[op.name].__name__ if found[op.name] else "no params"
                problems.append(f"{op.name}: takes {got}, contract says {op.params.__name__}")
        return problems


class ContractError(TypeError):
    pass


def implements(contract: Contract) -> Callable[[type], type]:
    """Class decorator: the agent class must implement every operation of `contract` (checked at import)."""

    def check(cls: type) -> type:
        problems = contract.missing_in(cls)
        if problems:
            raise ContractError(f"{cls.__name__} does not implement the {contract.role} contract: "
                                + "; ".join(problems))
        cls.contract = contract  # type: ignore[attr-defined]
        return cls

    return check


class RoleClient:
    """The controller's typed handle on one agent of a role. Subclasses add one method per operation."""

    contract: ClassVar[Contract]

    def __init__(self, controller: Controller, agent: str, timeout_s: float = 10.0):
        self.controller, self.agent, self.timeout_s = controller, agent, timeout_s

    def call(self, op: Op[P, R], params: P | None = None, timeout_s: float | None = None) -> R:
        if params is not None and not isinstance(params, op.params):
            raise TypeError(f"{op.name} takes {op.params.__name__}, not {type(params).__name__}")
        payload: Any = params.model_dump(mode="json", exclude_none=False) if params is not None else {}
        reply = self.controller.request(self.agent, op.name, payload, timeout_s=timeout_s or self.timeout_s)
        try:
            return op.result.model_validate(reply)
        except ValidationError as exc:
            from cellab.bus.errors import OperationError

            raise OperationError(self.agent, op.name, f"reply does not match the {self.contract.role} "
                                 f"contract: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
