"""Log lines as text or as one JSON object per line.

A JSON line carries the time, level, logger and message, and, inside a call,
its trace and span ids, method and actor id. Nothing here reads a request's
headers, so a token never reaches a log line.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

from opentelemetry import trace

from compass_server.telemetry.calls import current_call

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            line["trace_id"] = format(context.trace_id, "032x")
            line["span_id"] = format(context.span_id, "016x")
        call = current_call()
        if call is not None:
            line["method"] = call.method
            if call.actor_id:
                line["actor_id"] = call.actor_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        for key, value in getattr(record, "fields", {}).items():
            line.setdefault(key, value)
        return json.dumps(line, default=str)


def configure(level: str, fmt: str) -> None:
    """Logs to stderr at `level`, as text lines or JSON objects."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
