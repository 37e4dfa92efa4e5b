"""Runs the real `dragate serve` with `webhook.pipeline.review` replaced by the test double.

The gunicorn worker is forked from this process after the replacement, so it serves the
double. gevent patches the standard library first, as `dragate serve` does (`cli.entry`).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests directory, as pytest has it

from admission import admission_support  # noqa: E402

import webhook.pipeline  # noqa: E402
from webhook.cli import main  # noqa: E402

if __name__ == "__main__":
    webhook.pipeline.review = admission_support.review
    main()
