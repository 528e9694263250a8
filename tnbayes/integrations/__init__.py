"""Adapters to other libraries (imported lazily: their dependencies are optional extras).

They sit beside the three axes (basis, format, inference).
"""
