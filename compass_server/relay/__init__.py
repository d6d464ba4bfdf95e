"""The runner relay: the hub side of AgentGatewayService, its arm dispatcher
and server liveness."""

from compass_server.relay.dispatch import Dispatcher, arms_for
from compass_server.relay.gateway import AgentGateway
from compass_server.relay.liveness import Heartbeat

__all__ = ["AgentGateway", "Dispatcher", "Heartbeat", "arms_for"]
