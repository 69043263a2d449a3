//! TODO(sources helper)
