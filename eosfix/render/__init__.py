"""Renderers: text, JSON, CSV, markdown and explain views of results; they format, never compute."""
