"""Kernel families: each module `<name>` exports `FAMILY`, the Family object for kernels/<name>/."""
