"""The Hugging Face Hub: read a repo's small files (``read``) into eosfix's store by commit
(``store``), through one polite HTTP gate (``http``); write pull requests and uploads
(``write``)."""
