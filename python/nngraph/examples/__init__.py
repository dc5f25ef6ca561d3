"""Runnable examples: python -m nngraph.examples.<name>."""
