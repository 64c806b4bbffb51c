"""Counter-based random draws: the same pod of the same replica gets the same durations
and the same fate under every policy (common random numbers), so policies are compared
on identical luck, whatever each one deletes or replaces on the way."""

from __future__ import annotations

import math
import zlib
from typing import Final

from mypy_extensions import i64

from remediator.sim.fleet.calibration import Profile

_M: Final = (1 << 64) - 1
_TWO_PI: Final = 2 * math.pi
_INV: Final = 1.0 / (1 << 53)
_GAMMA, _C1, _C2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def mix(*xs: int) -> int:
    """splitmix64's finaliser over a tuple of integers, each mixed in (64 bits), on 32-bit
    halves as `_uniform` is (over big integers it cost ~3 µs per call compiled, two per
    cold start)."""
    hi: i64 = _GAMMA_HI
    lo: i64 = _GAMMA_LO
    for x in xs:
        x &= _M
        hi ^= i64(x >> 32)
        lo ^= i64(x & _M32)
        hi, lo = times64(hi, lo, _C1_HI, _C1_LO)
        hi, lo = hi ^ (hi >> 31), lo ^ (((lo >> 31) | (hi << 1)) & _M32)
        hi, lo = times64(hi, lo, _C2_HI, _C2_LO)
        hi, lo = hi ^ (hi >> 29), lo ^ (((lo >> 29) | (hi << 3)) & _M32)
    return int(hi) << 32 | int(lo)


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
    """Every random figure one pod needs, from its (slot, attempt) key: `uniform(key, i)`
    exactly, worked out on the key's 32-bit halves (`_uniform`)."""

    __slots__ = ("_hi", "_lo", "_params")

    def __init__(self, key: int, profile_params: dict[str, tuple[float, float]]) -> None:
        key &= _M
        self._hi: i64 = key >> 32
        self._lo: i64 = key & _M32
        self._params = profile_params

    def u(self, i: int) -> float:
        """`uniform(key, i)`."""
        return _uniform(self._hi, self._lo, i)

    def normal(self, i: int) -> float:
        """A standard normal by Box-Muller over draws `i` and `i + 100` (one per vLLM step
        of every cold start)."""
        u1 = _uniform(self._hi, self._lo, i)
        u2 = _uniform(self._hi, self._lo, i + 100)
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)

    def phase(self, name: str, i: int) -> float:
        """Log-normal by Box-Muller over draws `i` and `i + 100` (one call per phase of
        every cold start)."""
        mu, sigma = self._params[name]
        return math.exp(mu + sigma * self.normal(i))


# `uniform` on 32-bit halves, as native 64-bit integers (mypy_extensions.i64: plain ints
# when interpreted). Over Python's big integers each of its dozen operations on 64-bit
# values allocates: compiled, those were a fifth of the simulator's instructions with the
# core. Here no value passes 2^50, so nothing overflows, and the answer is `uniform`'s to
# the bit (tests/sim/test_draws.py).
_M32: Final = 0xFFFFFFFF


def _uniform(hi: i64, lo: i64, i: i64) -> float:
    """`uniform(key, i)` for the key's halves `hi`, `lo` (0 <= i < 2^32 - 1)."""
    # state = key + (i + 1)·γ, mod 2^64
    g_hi, g_lo = times64(0, i + 1, _GAMMA_HI, _GAMMA_LO)
    lo += g_lo
    hi = (hi + g_hi + (lo >> 32)) & _M32
    lo &= _M32
    hi, lo = hi ^ (hi >> 30), lo ^ (((lo >> 30) | (hi << 2)) & _M32)
    hi, lo = times64(hi, lo, _C1_HI, _C1_LO)
    hi, lo = hi ^ (hi >> 27), lo ^ (((lo >> 27) | (hi << 5)) & _M32)
    hi, lo = times64(hi, lo, _C2_HI, _C2_LO)
    hi, lo = hi ^ (hi >> 31), lo ^ (((lo >> 31) | (hi << 1)) & _M32)
    return (float((hi << 21) + (lo >> 11)) + 0.5) * _INV  # (the top 53 bits: exact)


def times64(hi: i64, lo: i64, c_hi: i64, c_lo: i64) -> tuple[i64, i64]:
    """(hi·2^32 + lo) × (c_hi·2^32 + c_lo) mod 2^64, as halves: each product of 32-bit
    halves taken as two of 32 × 16 bits, so none passes 2^48."""
    low = lo * (c_lo & 0xFFFF)
    mid = lo * (c_lo >> 16)
    low += (mid & 0xFFFF) << 16  # lo × c_lo = low + (mid >> 16)·2^32
    carry = (low >> 32) + (mid >> 16)
    cross = hi * (c_lo & 0xFFFF) + ((hi * (c_lo >> 16) & 0xFFFF) << 16)  # hi × c_lo mod 2^32
    cross += lo * (c_hi & 0xFFFF) + ((lo * (c_hi >> 16) & 0xFFFF) << 16)  # lo × c_hi mod 2^32
    return (carry + cross) & _M32, low & _M32


# (Final: mypyc puts the figures in the code, where a module global is a dictionary lookup)
_GAMMA_HI: Final = 0x9E3779B9
_GAMMA_LO: Final = 0x7F4A7C15
_C1_HI: Final = 0xBF58476D
_C1_LO: Final = 0x1CE4E5B9
_C2_HI: Final = 0x94D049BB
_C2_LO: Final = 0x133111EB


def params(profile: Profile) -> dict[str, tuple[float, float]]:
    names = ("scheduling", "image_pull", "container_start", "engine_init", "first_token")
    return {n: profile.phase(n).mu_sigma for n in names}
