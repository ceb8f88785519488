"""Where repos come from: each module turns one container into ``eosfix.repo.ModelRepo``.

``folder`` (a model folder on disk), ``cache`` (the Hugging Face cache), ``hub`` (a Hub repo
by id, small files only). Nothing past a source knows which container a repo came from.
"""
