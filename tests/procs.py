"""Real `compass-server serve` processes for scale-out and fault tests."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

BIN = pathlib.Path(sys.executable).parent


class ServerProcess:
    def __init__(
        self,
        database_url: str,
        *,
        grpc_port: int = 0,
        http_port: int = 0,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.args = args or []
        self.ready: dict[str, object] = {}
        self.extra_env = env or {}
        self.want_grpc, self.want_http = grpc_port, http_port
        self.proc: subprocess.Popen[str] | None = None
        self.grpc_port = self.http_port = 0
        self.log: list[str] = []

    def start(self) -> ServerProcess:
        env = {**os.environ, "COMPASS_LOG_LEVEL": "WARNING", **self.extra_env}
        env.pop("COMPASS_DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [
                str(BIN / "compass-server"),
                "serve",
                "--database-url",
                self.database_url,
                "--grpc-listen",
                f"127.0.0.1:{self.want_grpc}",
                "--http-listen",
                f"127.0.0.1:{self.want_http}",
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline()
        if not line:
            why = self.proc.stderr.read()
            self.proc.wait(timeout=60)
            self.proc.stderr.close()
            self._close()
            raise RuntimeError("server did not start:\n" + why)
        ready = self.ready = json.loads(line)
        self.grpc_port, self.http_port = ready["grpc_port"], ready["http_port"]
        # Keep later ports stable across a restart of this same process slot.
        self.want_grpc, self.want_http = self.grpc_port, self.http_port
        stderr = self.proc.stderr

        def pump() -> None:
            self.log.extend(stderr)
            stderr.close()

        threading.Thread(target=pump, daemon=True).start()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_kib(self, pid: int | None = None) -> int:
        assert self.proc is not None
        status = pathlib.Path(f"/proc/{pid or self.proc.pid}/status")
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._close()

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self._close()
        return code

    def _close(self) -> None:
        assert self.proc is not None
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
