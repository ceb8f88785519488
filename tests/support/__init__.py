"""What several test modules share and none owns: repos laid out as on the Hub, the output
schemas' checks, webhook payloads, the hostile templates, an ollama store, two racing
processes. A test module imports its helpers from here (or gets them as a fixture from a
``conftest.py``), never from another test module."""
