"""Exit codes shared by every command, so scripts can tell findings from failures."""

OK = 0
FINDINGS = 1  # denied objects, lint findings, `migrate --check` work, failed policy tests
BAD_INPUT = 2  # unreadable or malformed input, invalid policies, bad flags
