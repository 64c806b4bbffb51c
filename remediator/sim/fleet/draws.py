"""Counter-based random draws: the same pod of the same replica gets the same durations
and the same fate under every policy (common random numbers), so policies are compared
on identical luck, whatever each one deletes or replaces on the way."""

from __future__ import annotations

import math
import zlib

from remediator.sim.fleet.calibration import Profile

_M = (1 << 64) - 1
_TWO_PI = 2 * math.pi
_INV = 1.0 / (1 << 53)
_GAMMA, _C1, _C2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def mix(*xs: int) -> int:
    """splitmix64 over a tuple of integers."""
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = ((h ^ (x & _M)) * 0xBF58476D1CE4E5B9) & _M
        h ^= h >> 31
        h = (h * 0x94D049BB133111EB) & _M
        h ^= h >> 29
    return h


def stable(text: str) -> int:
    """A hash of a string that is the same in every process (str hashes are salted)."""
    return zlib.crc32(text.encode())


def uniform(key: int, i: int) -> float:
    """A uniform in (0, 1) for draw `i` of `key`: splitmix64's output for state key + i·γ."""
    h = (key + (i + 1) * _GAMMA) & _M
    h = ((h ^ (h >> 30)) * _C1) & _M
    h = ((h ^ (h >> 27)) * _C2) & _M
    return (((h ^ (h >> 31)) >> 11) + 0.5) * _INV


class PodDraws:
    """Every random figure one pod needs, from its (slot, attempt) key."""

    __slots__ = ("_key", "_params")

    def __init__(self, key: int, profile_params: dict[str, tuple[float, float]]) -> None:
        self._key = key
        self._params = profile_params

    def u(self, i: int) -> float:
        """`uniform(key, i)`, inlined (several per cold start)."""
        h = (self._key + (i + 1) * _GAMMA) & _M
        h = ((h ^ (h >> 30)) * _C1) & _M
        h = ((h ^ (h >> 27)) * _C2) & _M
        return (((h ^ (h >> 31)) >> 11) + 0.5) * _INV

    def normal(self, i: int) -> float:
        """A standard normal by Box-Muller over draws `i` and `i + 100` (`uniform`, inlined:
        one per vLLM step of every cold start)."""
        key = self._key
        h = (key + (i + 1) * _GAMMA) & _M
        h = ((h ^ (h >> 30)) * _C1) & _M
        h = ((h ^ (h >> 27)) * _C2) & _M
        u1 = (((h ^ (h >> 31)) >> 11) + 0.5) * _INV
        h = (key + (i + 101) * _GAMMA) & _M
        h = ((h ^ (h >> 30)) * _C1) & _M
        h = ((h ^ (h >> 27)) * _C2) & _M
        u2 = (((h ^ (h >> 31)) >> 11) + 0.5) * _INV
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)

    def phase(self, name: str, i: int) -> float:
        """Log-normal by Box-Muller over draws `i` and `i + 100` (`uniform`, inlined: one
        call per phase of every cold start)."""
        mu, sigma = self._params[name]
        key = self._key
        h = (key + (i + 1) * _GAMMA) & _M
        h = ((h ^ (h >> 30)) * _C1) & _M
        h = ((h ^ (h >> 27)) * _C2) & _M
        u1 = (((h ^ (h >> 31)) >> 11) + 0.5) * _INV
        h = (key + (i + 101) * _GAMMA) & _M
        h = ((h ^ (h >> 30)) * _C1) & _M
        h = ((h ^ (h >> 27)) * _C2) & _M
        u2 = (((h ^ (h >> 31)) >> 11) + 0.5) * _INV
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)
        return math.exp(mu + sigma * z)


def params(profile: Profile) -> dict[str, tuple[float, float]]:
    names = ("scheduling", "image_pull", "container_start", "engine_init", "first_token")
    return {n: profile.phase(n).mu_sigma for n in names}
