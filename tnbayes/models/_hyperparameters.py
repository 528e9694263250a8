"""Moved to :mod:`tnbayes.selection.hyperparameters`; kept importable for code written against the old path."""

from tnbayes.selection.hyperparameters import KernelHyperparameters, estimate_kernel_hyperparameters

__all__ = ["KernelHyperparameters", "estimate_kernel_hyperparameters"]
