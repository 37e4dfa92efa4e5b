"""Lint rules, one module per area; importing this package registers them all."""

from webhook.lint.rules import cel, claims, deviceclasses, legacy, namespaces, pods, versions

__all__ = ["cel", "claims", "deviceclasses", "legacy", "namespaces", "pods", "versions"]
