"""Fixtures for tiny models of families with special attention (built by tests/tiny_families.py)."""

from __future__ import annotations

import pytest
from tiny_families import build


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory):
    """family_dir(kind, encoder_only=False) -> a folder with a tiny random model of that family (cached)."""
    made = {}

    def get(kind: str, encoder_only: bool = False):
        key = (kind, encoder_only)
        if key not in made:
            made[key] = build(
                kind, tmp_path_factory.mktemp(f"{kind}{'-encoder' if encoder_only else ''}"), encoder_only
            )
        return made[key]

    return get
