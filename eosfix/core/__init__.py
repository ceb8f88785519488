"""The ground floor: the repo model, errors, finding codes, render limits, safe file IO."""
