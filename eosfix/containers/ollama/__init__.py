"""An ollama model: a manifest of blobs (GGUF, template, params); read only, never written."""
