"""The layer every other imports: the repo model, errors, finding codes, render limits, safe file IO."""
