"""A service's methods read from its descriptor, bound to one implementation.

The implementation has one coroutine (or async generator) per RPC, named in
snake_case, taking the signed-in principal and the request (or, for a
bidirectional stream, the request iterator). A service signed in with "any"
token takes the whole SignIn instead of the principal. Both transports adapt the same
binding, so the behaviour is one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from google.protobuf.message import Message

from compass_server.api.auth import Authenticator, PrincipalKind
from compass_server.store.types import SignIn


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass(frozen=True)
class Method:
    name: str
    attr: str
    request: type[Message]
    response: type[Message]
    client_streaming: bool
    server_streaming: bool


@dataclass(frozen=True)
class ServiceBinding:
    full_name: str
    methods: tuple[Method, ...]
    impl: Any
    principal: PrincipalKind

    @classmethod
    def of(
        cls, module: ModuleType, service: str, impl: object, principal: PrincipalKind
    ) -> ServiceBinding:
        descriptor = module.DESCRIPTOR.services_by_name[service]
        methods = []
        for m in descriptor.methods:
            methods.append(
                Method(
                    name=m.name,
                    attr=snake(m.name),
                    request=_message_class(m.input_type.full_name),
                    response=_message_class(m.output_type.full_name),
                    client_streaming=m.client_streaming,
                    server_streaming=m.server_streaming,
                )
            )
            if not callable(getattr(impl, snake(m.name), None)):
                raise TypeError(f"{type(impl).__name__} has no {snake(m.name)} for {m.name}")
        return cls(descriptor.full_name, tuple(methods), impl, principal)

    @property
    def short_name(self) -> str:
        """The service's name without its package: CommsService."""
        return self.full_name.rpartition(".")[2]

    def resolver(self, auth: Authenticator) -> Callable[[str | None], Awaitable[SignIn]]:
        def resolve(authorization: str | None) -> Awaitable[SignIn]:
            return auth.sign_in(authorization, self.principal)

        return resolve

    def caller(self, sign_in: SignIn) -> Any:
        """What the implementation takes first: the principal, or for "any"
        the whole sign-in (which token, not just whose)."""
        return sign_in if self.principal == "any" else sign_in.principal


def _message_class(full_name: str) -> type[Message]:
    from google.protobuf import symbol_database

    return symbol_database.Default().GetSymbol(full_name)
