"""Lint rules, one module per area; importing this package registers them all."""

from webhook.lint.rules import cel, namespaces, pods, requests

__all__ = ["cel", "namespaces", "pods", "requests"]
