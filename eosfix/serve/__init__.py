"""The Hub bot (``eosfix serve``): Hub webhooks in, a check of each pushed revision, a fix PR or
a report out; a persistent queue so a restart loses no push."""
