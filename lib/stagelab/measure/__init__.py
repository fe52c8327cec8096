"""measure: what a built stage does on the GPU, as typed results nobody has judged yet.

Owns the correctness checks against the family's reference, the dependent-launch chains, the
timing and the clocks it ran at, the sanitizer and Nsight Compute runs in a child process
(`launch`), the steps that run them for one stage and the typed results they return. It may
import `core`.
"""
