"""Lint rules, one module per area; importing this package registers them all."""

from webhook.lint.rules import cel, legacy, namespaces, pods, requests

__all__ = ["cel", "legacy", "namespaces", "pods", "requests"]
