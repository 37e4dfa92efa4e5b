"""Every YAML text the tests hold, for proving a fast reading against ruamel's: golden inputs,
CLI fixtures, the real-world migrate corpus, policies, the chart's values, and every variant
of tests/migrate_cases.py (renamed, joined and randomly broken)."""

from __future__ import annotations

from pathlib import Path

from migrate_cases import variants

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(
    p
    for folder in ("tests", "policies", "webhook/defaults", "charts")
    for p in (ROOT / folder).rglob("*.y*ml")
    if "templates" not in p.parts  # Helm templates are not YAML until rendered
)
TEXTS = [(str(p.relative_to(ROOT)), p.read_text(errors="replace")) for p in FILES] + [
    (f"variant:{name}", text) for name, text in variants()
]
