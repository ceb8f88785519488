"""Read a chat template: probes rendered in the sandbox, where each control token is written."""
