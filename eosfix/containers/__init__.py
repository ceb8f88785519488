"""Containers (a model folder, a GGUF file, an ollama model): read one into a ModelRepo, plan
its own edits, apply them safely."""
