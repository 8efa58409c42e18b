"""``helion.autotuner.config_fragment``: the config fragments ``hl.register_tunable`` takes.

A tunable reads the config's value for its name, else the fragment's default; the autotuner
(``tpukit.helion._autotune``) tunes block sizes, not tunables."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PowerOfTwoFragment:
    low: int
    high: int
    default_val: int | None = None

    def default(self):
        return self.default_val if self.default_val is not None else self.low


@dataclass(frozen=True)
class IntegerFragment:
    low: int
    high: int
    default_val: int | None = None

    def default(self):
        return self.default_val if self.default_val is not None else self.low


@dataclass(frozen=True)
class EnumFragment:
    choices: tuple

    def default(self):
        return self.choices[0]


@dataclass(frozen=True)
class BooleanFragment:
    def default(self):
        return False


def default_of(fragment):
    return fragment.default() if hasattr(fragment, "default") else fragment
