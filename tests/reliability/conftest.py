"""The reliability tests start real `dragate serve` processes; see reliability_support.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # reliability_support, whatever the import mode
