"""tune: searching a stage's knob space and promoting the best configuration.

Owns the search, its store of tried configurations, its report and the promotion of a winner into
the registry. It may import `core`, `measure`, `judge` and `record`; `run` and `tune` do not import
each other.
"""
