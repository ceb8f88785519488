"""A GGUF file: read its header, plan the tokenizer.ggml.*_token_id keys, write them in place or
by a verified rewrite."""
