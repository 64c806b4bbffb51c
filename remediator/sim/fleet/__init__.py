"""A discrete-event simulation of a GPU inference fleet in virtual time.

GPU nodes with capacity, TP=2 inference Deployments, scale-ups and image rollouts,
phase durations drawn from calibrated distributions, injected faults; the real core
(Session: tracker, policy, guardrails) is fed what the cluster would emit, and its
decisions are applied back. Ground truth (which pods would have become Ready) is kept
beside, so a policy can be scored by what it did, not by what it meant.
"""
