"""A model folder: read every file transformers reads, plan byte-minimal JSON edits, write them."""
