"""Benchmark entries that reproduce a paper's table or figure and set our numbers beside the published ones
(T-KRR, QTKM, FL, RFFNet, TNKF, the Hilbert-space approximation rule)."""
