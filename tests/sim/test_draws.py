"""The simulator's draws on 32-bit halves (`PodDraws`, native integers when compiled) are
`uniform`'s, splitmix64 over Python's big integers, to the bit: every recorded figure of the
simulator (tests/sim/test_fleet_golden.py, the defaults' tables) rests on them. The fourth
test pass runs this compiled, where the halves are C's 64-bit integers."""

from __future__ import annotations

import math
import uuid

from hypothesis import given
from hypothesis import strategies as st

from remediator.sim.fleet.cluster import pod_uid
from remediator.sim.fleet.draws import PodDraws, mix, uniform

KEYS = st.one_of(
    st.integers(min_value=0, max_value=(1 << 64) - 1),
    st.sampled_from([0, 1, (1 << 32) - 1, 1 << 32, (1 << 63), (1 << 64) - 1]),
)
DRAWS = st.one_of(st.integers(min_value=0, max_value=1000), st.sampled_from([(1 << 32) - 102]))


@given(KEYS, DRAWS)
def test_a_draw_is_uniforms_to_the_bit(key: int, i: int) -> None:
    assert PodDraws(key, {}).u(i) == uniform(key, i)


@given(KEYS, DRAWS, st.floats(-3, 8), st.floats(0, 2))
def test_normal_and_phase_are_box_muller_over_uniform(
    key: int, i: int, mu: float, sigma: float
) -> None:
    d = PodDraws(key, {"engine_init": (mu, sigma)})
    z = math.sqrt(-2.0 * math.log(uniform(key, i))) * math.cos(2 * math.pi * uniform(key, i + 100))
    assert d.normal(i) == z
    assert d.phase("engine_init", i) == math.exp(mu + sigma * z)


def test_the_known_first_draws_of_a_key() -> None:
    """splitmix64's published outputs for seed 0 (state γ, 2γ, ...), top 53 bits."""
    expected = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    for i, out in enumerate(expected):
        assert PodDraws(0, {}).u(i) == ((out >> 11) + 0.5) / (1 << 53)


def _mix_64(*xs: int) -> int:
    """`mix` as it was written over big integers: the reference."""
    m = (1 << 64) - 1
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = ((h ^ (x & m)) * 0xBF58476D1CE4E5B9) & m
        h ^= h >> 31
        h = (h * 0x94D049BB133111EB) & m
        h ^= h >> 29
    return h


@given(
    st.lists(st.one_of(KEYS, st.integers(), st.integers(min_value=0, max_value=1000)), max_size=5)
)
def test_mix_is_the_64_bit_mix_to_the_bit(xs: list[int]) -> None:
    """Slots' and pods' keys (seed, workload, wave, replica; slot, attempt), negative and
    wider than 64 bits taken mod 2^64 as before."""
    assert mix(*xs) == _mix_64(*xs)


@given(st.floats(0.0, 1.0, exclude_max=True), st.integers(min_value=0, max_value=(1 << 31) - 1))
def test_a_pods_uid_is_the_big_integer_formulas(u: float, index: int) -> None:
    """`pod_uid` on native integers is the formula it was written as over big integers,
    and a version-4 UUID."""
    a = int(u * (1 << 52)) ^ (index * 0x9E3779B1)
    b = (index * 0x85EBCA77C2B2AE63 + a) & ((1 << 64) - 1)
    want = (
        f"{a >> 20 & 0xFFFFFFFF:08x}-{a & 0xFFFF:04x}-4{b >> 52 & 0xFFF:03x}-"
        f"{0x8000 | (b >> 36 & 0x3FFF):04x}-{b & 0xFFFFFFFFFFFF:012x}"
    )
    assert pod_uid(u, index) == want
    assert uuid.UUID(want).version == 4 and str(uuid.UUID(want)) == want
