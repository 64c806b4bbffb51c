"""The simulator's draws on 32-bit halves (`PodDraws`, native integers when compiled) are
`uniform`'s, splitmix64 over Python's big integers, to the bit: every recorded figure of the
simulator (tests/sim/test_fleet_golden.py, the defaults' tables) rests on them. The fourth
test pass runs this compiled, where the halves are C's 64-bit integers."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from remediator.sim.fleet.draws import PodDraws, uniform

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
