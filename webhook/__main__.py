"""`python -m webhook` is `dragate`, for machines where the console script is not on PATH."""

from webhook.cli import entry

entry()
