"""Sources enumerate and fetch: folder trees, the Hugging Face cache, a Hub organisation."""
