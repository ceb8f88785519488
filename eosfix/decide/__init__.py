"""Decide: terminators against the written stop ids -> findings, the proposal, runtime verdicts."""
