"""The fleet simulator (`remediator simulate`, `remediator demo`): a GPU fleet in virtual
time driving the real core. The watch-stream generator that tests and benchmarks use lives
in tests/simstream."""
