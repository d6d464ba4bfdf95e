"""Compass server: channels, asks, the relay for agent runners and the inbox."""

import os

# No process the server forks uses gRPC; with gRPC's fork handlers on, every
# fork (pg_ctl stopping the embedded database) logs a warning. Set before
# anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
