"""One target at a time: what a string a user gives stands for, and the check of one Hub repo.

Between the sources (which enumerate and fetch) and the batches (which run many units): every
command, the page and the bot name what they check here, and a Hub repo is checked here, once
for all of them, beside the pipeline.
"""
