"""Sources enumerate and fetch: the Hugging Face cache, a Hub organisation and its files.

They run no check and print nothing: ``eosfix.batch`` runs what they give through the
pipeline. Writers of their own places (Hub pull requests and uploads) sit beside them.
"""

from __future__ import annotations

# What decides a repo revision's analysis: (path in the repo, content hash) of each file a
# check reads. Revisions and repos with the same key share one analysis.
Key = tuple[tuple[str, str], ...]
