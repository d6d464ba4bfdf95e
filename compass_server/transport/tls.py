"""The server's certificate and key for every port, reloaded on SIGHUP.

A reload reads the files again; new connections get the new certificate
and open ones carry on with theirs. hypercorn's listeners share Python
`SSLContext`s, which take a new chain in place; gRPC's take their
certificate from a fetcher grpc asks on each new handshake
(`dynamic_ssl_server_credentials`).
"""

from __future__ import annotations

import logging
import pathlib
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

log = logging.getLogger(__name__)


class TlsFileError(Exception):
    """TLS files that can't be used, in one line naming the settings."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_files(
    cert: pathlib.Path,
    key: pathlib.Path,
    client_ca: pathlib.Path | None = None,
    named: Callable[[str], str] = lambda name: name,
) -> None:
    """TlsFileError unless the certificate and key load as a pair (and the CA
    file as certificates); `named` says how each setting is called."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    files = {"tls_cert": cert, "tls_key": key, "tls_client_ca": client_ca}
    for name, p in files.items():
        if p is not None and not p.is_file():
            raise TlsFileError(f"{named(name)}: can't read the TLS file {p}: no such file")
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise TlsFileError(
            f"{named('tls_cert')} {cert} and {named('tls_key')} {key} "
            f"don't load as a certificate and its key ({exc.__class__.__name__})"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError):
            raise TlsFileError(
                f"{named('tls_client_ca')}: {client_ca} holds no PEM CA certificate"
            ) from None


@dataclass(frozen=True)
class TlsFiles:
    cert: pathlib.Path
    key: pathlib.Path
    # Runners' client certificates must chain to these (the relay listener).
    client_ca: pathlib.Path | None = None


class ServerTls:
    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self._contexts: list[ssl.SSLContext] = []
        self._lock = threading.Lock()
        self.version = 0
        self._read()

    def _read(self) -> None:
        check_files(self.files.cert, self.files.key, self.files.client_ca)
        with self._lock:
            self._cert = self.files.cert.read_bytes()
            self._key = self.files.key.read_bytes()
            self._ca = self.files.client_ca.read_bytes() if self.files.client_ca else None
            self.version += 1

    def reload(self) -> bool:
        """Reads the files again; False (logged, the old certificate kept)
        when they don't load."""
        try:
            self._read()
        except TlsFileError as exc:
            log.error("TLS reload failed, keeping the certificate in use: %s", exc.message)
            return False
        for context in self._contexts:
            context.load_cert_chain(self.files.cert, self.files.key)
        log.info("reloaded the TLS certificate %s", self.files.cert)
        return True

    def ssl_context(self, alpn: list[str]) -> ssl.SSLContext:
        """A server context for hypercorn, kept up to date by reload."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_COMPRESSION
        context.set_alpn_protocols(alpn)
        context.load_cert_chain(self.files.cert, self.files.key)
        self._contexts.append(context)
        return context

    def _configuration(self, with_ca: bool) -> Any:
        with self._lock:
            return grpc.ssl_server_certificate_configuration(
                [(self._key, self._cert)], root_certificates=self._ca if with_ca else None
            )

    def grpc_credentials(self, require_client_cert: bool = False) -> grpc.ServerCredentials:
        """Credentials for a gRPC port; with `require_client_cert`, a client
        must present a certificate chaining to the client CA."""
        seen = [self.version]

        def fetch() -> Any:
            # Asked on every handshake: a new configuration only after a reload.
            if seen[0] == self.version:
                return None
            seen[0] = self.version
            return self._configuration(require_client_cert)

        return grpc.dynamic_ssl_server_credentials(
            self._configuration(require_client_cert),
            fetch,
            require_client_authentication=require_client_cert,
        )
