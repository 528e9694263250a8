"""Adapters to other libraries (imported lazily: their dependencies are optional extras)."""
