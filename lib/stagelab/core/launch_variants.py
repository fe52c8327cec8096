"""A family's launch variants: the same built stage launched another way and timed beside its own
launch in the stage's run, e.g. an INT8 stage with its quantizer's kernels inside the timed launch
(sdpa's `quantizing`). The timing step labels each `<stage>+<name>` (measure.results.variant_label),
the stage's speedups leave it out, and the recorder publishes its timing under metrics.VARIANT."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any


class LaunchVariantHooks:
    """The hook mixed into core.family.Family; the default means "no variants"."""

    def launch_variants(self, module: ModuleType, problem: Any, inputs: tuple, out: Any,
                        input_kind: str = "") -> dict[str, Callable[[], None]]:
        """No-argument launches of the built stage on the standard inputs (as module_launch's, on the
        current stream, any conversion outside them) by name; {} for a stage without variants."""
        return {}
