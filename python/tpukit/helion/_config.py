"""``helion.Config``: one point of a kernel's configuration space."""

from __future__ import annotations

import json
from collections.abc import Mapping


class Config(Mapping):
    """``helion.Config(block_sizes=[…], …)``: keyword arguments only; unknown keys are kept
    (``hl.register_tunable`` values). Only ``block_sizes`` and tunables affect tpukit; other
    keys (``num_warps``, ``num_stages``, ``pallas_loop_type``, …) are Helion's GPU or code
    generation knobs, accepted and ignored."""

    def __init__(self, **kwargs):
        self._d = {k: v for k, v in kwargs.items() if v is not None}

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._d.items()) + ")"

    @property
    def config(self) -> dict:
        """The keys as a dict (Helion's ``Config.config``)."""
        return dict(self._d)

    @property
    def block_sizes(self):
        return self._d.get("block_sizes", [])

    def to_json(self) -> str:
        return json.dumps(self._d)

    @classmethod
    def from_json(cls, text: str) -> Config:
        return cls(**json.loads(text))

    @classmethod
    def from_dict(cls, d) -> Config:
        return cls(**dict(d))

    def save(self, path) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path) -> Config:
        with open(path) as f:
            return cls.from_json(f.read())


def as_config(c) -> Config:
    return c if isinstance(c, Config) else Config(**dict(c))
