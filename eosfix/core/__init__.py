"""The ground floor: the repo model, errors, finding codes, render limits, memo keys, safe file IO."""
