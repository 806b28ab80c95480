"""A saved regression trace's divergence class, as a matrix cell names it (``part@operation``)."""

from __future__ import annotations

import re


def class_of(data: dict) -> str:
    """``part@operation`` of a saved trace's divergence (a build divergence: ``build@build``; a data
    plane's event field keeps its event: ``outcome@schedule@resize``)."""
    saved = data["divergence"]
    if saved["step"] is None:
        assert saved["field"] == "build" and saved["step_index"] == -1
        return "build@build"
    part = re.split(r"[\[.]", saved["field"])[0]
    return f"{part}@{saved['step']['op']}"
