"""judge: from measured results to one outcome (pass, valid negative, incorrect, ...).

Owns the outcome vocabulary and the rule that picks a stage's outcome from its results. It may
import `core` and `measure`.
"""
