"""What an operator sees of a running server: each call's span, metrics and
log lines (calls.py), the traces' set-up (traces.py), the Prometheus metrics
(metrics.py) and the log formats (logs.py)."""
