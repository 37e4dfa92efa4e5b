"""Runs the real `dragate serve` with `webhook.pipeline.review` replaced by the test double.

gunicorn workers are forked from this process after the replacement, so they serve the double.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests directory, as pytest has it

from admission import admission_support

import webhook.pipeline
from webhook.cli import main

if __name__ == "__main__":
    webhook.pipeline.review = admission_support.review
    main()
