"""The OpenID providers people sign in through, as configured, and who each
admits.

In the TOML file each provider is one `[[signin.providers]]` table; in the
environment (`COMPASS_SIGNIN_PROVIDERS`) or a flag, the same list as JSON.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import pathlib
import re
import urllib.parse
import uuid
from collections.abc import Mapping

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9-]{1,63}\.)+[a-z]{2,63}$")
DEFAULT_SCOPES = "openid email profile"
DEFAULT_HANDLE_CLAIM = "preferred_username"
_FIELDS = {
    "name",
    "label",
    "issuer",
    "client_id",
    "client_secret",
    "client_secret_file",
    "client_secret_env",
    "workspace",
    "domains",
    "handle_claim",
    "scopes",
}


class ProviderError(ValueError):
    """A provider's configuration that can't be used; the message names it."""


@dataclasses.dataclass(frozen=True)
class Provider:
    # In the sign-in address (/auth/login/<name>): lower-case letters, digits, dashes.
    name: str
    # On the button: "Sign in with <label>".
    label: str
    issuer: str
    client_id: str
    workspace_id: uuid.UUID
    # Email domains whose people get an account at their first sign-in;
    # empty: only people an admin created (with their email) sign in.
    domains: tuple[str, ...] = ()
    client_secret: str | None = dataclasses.field(default=None, repr=False)
    client_secret_file: pathlib.Path | None = None
    client_secret_env: str | None = None
    handle_claim: str = DEFAULT_HANDLE_CLAIM
    scopes: str = DEFAULT_SCOPES

    def secret(self, env: Mapping[str, str] | None = None) -> str | None:
        """The client secret from where the configuration says; ProviderError
        when that place has none. None: a public client (PKCE alone)."""
        if self.client_secret:
            return self.client_secret
        if self.client_secret_file is not None:
            try:
                text = self.client_secret_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                raise ProviderError(
                    f"signin provider {self.name}: can't read client_secret_file "
                    f"{self.client_secret_file}"
                ) from None
            if not text:
                raise ProviderError(
                    f"signin provider {self.name}: {self.client_secret_file} is empty"
                )
            return text
        if self.client_secret_env is not None:
            value = (os.environ if env is None else env).get(self.client_secret_env, "")
            if not value:
                raise ProviderError(
                    f"signin provider {self.name}: the environment has no {self.client_secret_env}"
                )
            return value
        return None

    def admits(self, email: str) -> bool:
        """Whether a verified email of this domain may get an account."""
        domain = email.rpartition("@")[2].lower()
        return bool(domain) and domain in self.domains

    def shown(self) -> dict[str, object]:
        """As `config check` shows it: the secret masked."""
        out: dict[str, object] = {
            "name": self.name,
            "label": self.label,
            "issuer": self.issuer,
            "client_id": self.client_id,
            "workspace": str(self.workspace_id),
            "domains": list(self.domains),
            "handle_claim": self.handle_claim,
            "scopes": self.scopes,
        }
        if self.client_secret:
            out["client_secret"] = "***"
        if self.client_secret_file is not None:
            out["client_secret_file"] = str(self.client_secret_file)
        if self.client_secret_env is not None:
            out["client_secret_env"] = self.client_secret_env
        return out


def _text(raw: Mapping[str, object], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()) or "\x00" in value:
        raise ProviderError(f"{where}: {key} must be a non-empty string")
    return value.strip()


def _issuer(value: str, where: str) -> str:
    url = urllib.parse.urlsplit(value)
    if url.scheme not in ("https", "http") or not url.hostname or url.query or url.fragment:
        raise ProviderError(f"{where}: issuer must be an https:// URL, not {value[:64]!r}")
    if url.scheme == "http" and not _loopback(url.hostname):
        raise ProviderError(
            f"{where}: issuer must be https:// (plain http:// only on loopback, for tests)"
        )
    return value.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def provider(raw: object, index: int) -> Provider:
    where = f"signin.providers[{index}]"
    if not isinstance(raw, Mapping):
        raise ProviderError(f"{where} must be a table (name, issuer, client_id, workspace, …)")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ProviderError(
            f"{where}: unknown key {unknown[0]}; keys: " + ", ".join(sorted(_FIELDS))
        )
    name = _text(raw, "name", where)
    if not _NAME.match(name):
        raise ProviderError(
            f"{where}: name must be 1 to 40 lower-case letters, digits or dashes, not {name!r}"
        )
    where = f"signin provider {name}"
    try:
        workspace = uuid.UUID(_text(raw, "workspace", where))
    except ValueError:
        raise ProviderError(f"{where}: workspace must be a workspace id") from None
    domains_raw = raw.get("domains", [])
    if not isinstance(domains_raw, list) or not all(isinstance(d, str) for d in domains_raw):
        raise ProviderError(f"{where}: domains must be a list of email domains")
    domains = tuple(d.strip().lower().lstrip("@") for d in domains_raw)
    for d in domains:
        if not _DOMAIN.match(d):
            raise ProviderError(f"{where}: {d!r} is not an email domain")
    secrets = [
        k for k in ("client_secret", "client_secret_file", "client_secret_env") if raw.get(k)
    ]
    if len(secrets) > 1:
        raise ProviderError(f"{where}: give one of {', '.join(secrets)}, not several")
    secret_file = _text(raw, "client_secret_file", where, required=False)
    scopes = _text(raw, "scopes", where, required=False) or DEFAULT_SCOPES
    if "openid" not in scopes.split():
        raise ProviderError(f"{where}: scopes must include openid")
    return Provider(
        name=name,
        label=_text(raw, "label", where, required=False) or name.title(),
        issuer=_issuer(_text(raw, "issuer", where), where),
        client_id=_text(raw, "client_id", where),
        workspace_id=workspace,
        domains=domains,
        client_secret=_text(raw, "client_secret", where, required=False) or None,
        client_secret_file=pathlib.Path(secret_file) if secret_file else None,
        client_secret_env=_text(raw, "client_secret_env", where, required=False) or None,
        handle_claim=_text(raw, "handle_claim", where, required=False) or DEFAULT_HANDLE_CLAIM,
        scopes=scopes,
    )


def providers(value: object) -> tuple[Provider, ...]:
    """The providers of a TOML array of tables (or of JSON text)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise ProviderError("signin.providers must be a JSON list of providers") from None
    if not isinstance(value, list):
        raise ProviderError("signin.providers must be a list of providers")
    found = tuple(provider(raw, i) for i, raw in enumerate(value))
    names = [p.name for p in found]
    for name in names:
        if names.count(name) > 1:
            raise ProviderError(f"two signin providers are named {name}")
    return found
