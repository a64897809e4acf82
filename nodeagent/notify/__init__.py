"""Webhook notifications of a node's shutdown (drain started, lock released, node back)."""

from nodeagent.notify.sender import Webhooks

__all__ = ["Webhooks"]
