"""Data the tests read; everything lives in the repo (see README.md here for provenance)."""

from pathlib import Path

DATA = Path(__file__).resolve().parent
CAPTURES = DATA / "captures"
SCHEMAS = DATA / "schemas"
PUBLIC = DATA / "public"  # found in public repositories, trimmed (README.md)
