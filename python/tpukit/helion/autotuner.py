"""``tpukit.helion.autotuner``: the config fragments ``hl.register_tunable`` takes.

There is no autotuning: a kernel uses the first config it is given, and a fragment's default
when the config has no value for a tunable."""

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
