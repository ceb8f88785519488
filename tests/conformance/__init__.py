"""Conformance: each runtime's own loading code computes the stop set, eosfix predicts it."""
