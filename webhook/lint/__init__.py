"""Pure lint rules for DRA manifests and dragate policies.

Plain dicts in, `Finding`s (rule id, severity, path into the object, message, fix) out. No
YAML, no files, no click: the CLI reads the files and turns paths into `file:line`.
"""

from webhook.lint.core import INTERNAL, PARSE, POLICY, lint_object
from webhook.lint.findings import ERROR, WARNING, Finding, Severity
from webhook.lint.registry import RULES, Known, RuleInfo

__all__ = [
    "ERROR",
    "INTERNAL",
    "PARSE",
    "POLICY",
    "RULES",
    "WARNING",
    "Finding",
    "Known",
    "RuleInfo",
    "Severity",
    "lint_object",
]
