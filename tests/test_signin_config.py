"""Sign-in providers in the configuration: the file's tables, the
environment's JSON, what `config check` shows, and what it refuses."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest

from compass_server import config
from compass_server.transport.cookies import SessionCookies

WS = str(uuid.uuid4())


def test_providers_come_from_the_files_tables(tmp_path: pathlib.Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret-from-file\n")
    file = tmp_path / "compass.toml"
    file.write_text(
        f"""
[signin]
session_idle_seconds = 600

[[signin.providers]]
name = "google"
issuer = "https://accounts.google.com/"
client_id = "abc.apps.googleusercontent.com"
client_secret_file = "{secret}"
workspace = "{WS}"
domains = ["Acme.com"]

[[signin.providers]]
name = "okta"
label = "Acme SSO"
issuer = "https://acme.okta.com/oauth2/default"
client_id = "0oa1"
client_secret = "inline-secret"
workspace = "{WS}"
"""
    )
    loaded = config.load(path=file, env={})
    google, okta = loaded.settings.signin_providers
    assert google.issuer == "https://accounts.google.com" and google.domains == ("acme.com",)
    assert google.label == "Google" and google.secret() == "s3cret-from-file"
    assert okta.label == "Acme SSO" and okta.secret() == "inline-secret" and okta.domains == ()
    assert loaded.settings.signin_session_idle_seconds == 600
    shown = config.effective_toml(loaded)
    assert "inline-secret" not in shown and "s3cret" not in shown
    assert 'client_secret = "***"' in shown and str(secret) in shown


def test_the_environment_takes_the_same_list_as_json() -> None:
    providers = [
        {
            "name": "kc",
            "issuer": "https://sso.acme.com/realms/acme",
            "client_id": "compass",
            "client_secret_env": "KC_SECRET",
            "workspace": WS,
        }
    ]
    loaded = config.load(env={"COMPASS_SIGNIN_PROVIDERS": json.dumps(providers)})
    (kc,) = loaded.settings.signin_providers
    assert kc.secret({"KC_SECRET": "from-env"}) == "from-env"
    assert loaded.sources["signin_providers"] == "COMPASS_SIGNIN_PROVIDERS"


@pytest.mark.parametrize(
    ("provider", "said"),
    [
        ({"name": "Bad Name"}, "name must be 1 to 40 lower-case letters"),
        ({"issuer": "http://accounts.example.com"}, "plain http:// only on loopback"),
        ({"workspace": "acme"}, "workspace must be a workspace id"),
        ({"domains": ["not a domain"]}, "is not an email domain"),
        ({"client_secret_env": "X"}, "give one of client_secret, client_secret_env"),
        ({"scopes": "email"}, "scopes must include openid"),
        ({"clientid": "x"}, "unknown key clientid"),
    ],
)
def test_a_provider_that_cant_be_used_is_named(provider: dict[str, object], said: str) -> None:
    base = {
        "name": "p",
        "issuer": "https://id.example.com",
        "client_id": "c",
        "client_secret": "very-secret",
        "workspace": WS,
        **provider,
    }
    with pytest.raises(config.ConfigError) as refused:
        config.load(env={"COMPASS_SIGNIN_PROVIDERS": json.dumps([base])})
    assert refused.value.message.startswith("COMPASS_SIGNIN_PROVIDERS: ")
    assert said in refused.value.message
    assert "very-secret" not in refused.value.message


def test_the_session_cookie_is_secure_under_tls() -> None:
    plain = SessionCookies("http://127.0.0.1:8080", secure=False).set("x", 60)
    tls = SessionCookies("https://compass.acme.com", secure=True).set("x", 60)
    for cookie in (plain, tls):
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Max-Age=60" in cookie
    assert "Secure" not in plain and tls.endswith("; Secure")
