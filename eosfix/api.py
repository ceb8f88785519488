"""The Python API: what a conversion script calls in-process.

    >>> import eosfix.api as eosfix
    >>> result = eosfix.check("./my-model")          # read only
    >>> result.status.value, [t.content for t in result.check.id_terminators]
    ('fixable', ['<|im_end|>'])
    >>> result = eosfix.fix("./my-model")            # atomic, minimal, idempotent
    >>> result.written, result.status.value, result.before.status.value
    (('generation_config.json',), 'ok', 'fixable')

A path is what the command line accepts: a model folder, one of its config or template files,
or a GGUF file. Every function returns a ``RepoResult``; expected input problems (a missing
path, a folder that is not a model folder, an invalid file) are captured in ``result.error``
(an ``EosfixError``) with ``result.status`` ``Status.ERROR``, instead of raised, so a batch
can go on.
"""

from __future__ import annotations

from eosfix.decide.check import Status
from eosfix.pipeline import check, check_folder, fix, fix_gguf
from eosfix.result import RepoResult

__all__ = ["RepoResult", "Status", "check", "check_folder", "fix", "fix_gguf"]
