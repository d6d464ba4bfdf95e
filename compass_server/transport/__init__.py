"""Thin adapters that put the servicers on gRPC (grpc.aio) and Connect (ASGI)."""
