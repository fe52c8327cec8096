"""What problems a stage takes: the problem features a family names (grouped-query attention, a
key length apart from the query length, a strided layout, ...) against the `supports:` list of the
stage's stages.yaml entry. A stage refuses an undeclared problem before launch, never with a wrong
answer; a stage run records it as skipped with the reason."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ConfigError
from .family import Family, Problem
from .registry import family_registry


def require_supports(family: Family, where: str, supports: Iterable[str]) -> None:
    """A clear error for a stages.yaml `supports:` entry that names no problem feature of the family."""
    unknown = [name for name in supports if name not in family.problem_features]
    if unknown:
        raise ConfigError(f"{where}.supports: {unknown} are not problem features of the {family.name} family; "
                          f"known: {list(family.problem_features) or 'none'}")


def declared_supports(family: Family, stage_id: str) -> tuple[str, ...]:
    """The features a stage's stages.yaml entry declares it takes (none for an id not in the registry,
    such as a test's stand-in)."""
    stage = family_registry(family.name).stages.get(stage_id)
    supports = stage.supports if stage is not None else ()
    require_supports(family, f"stage {stage_id}", supports)
    return supports


def refusal(family: Family, problem: Problem, supports: Iterable[str]) -> str:
    """Why a stage declaring `supports` cannot take the problem ('' when it can)."""
    supports = tuple(supports)
    missing = [name for name in getattr(problem, "features", ()) if name not in supports]
    return refusal_message(family.problem_features, missing, supports, problem.tag) if missing else ""


def refusal_message(features: dict[str, str], missing: Iterable[str], supports: Iterable[str], what: str) -> str:
    """Why a stage refuses a problem: the features it lacks, and what its stages.yaml declares."""
    needs = "; ".join(f"{name}: {features.get(name, name)}" for name in missing)
    declared = ", ".join(supports) or "none"
    return f"the stage does not take {what}, which needs {needs} (its stages.yaml `supports:` lists {declared})"


def split_supported(family: Family, problems: Iterable[Problem], supports: Iterable[str]
                    ) -> tuple[list[Problem], dict[str, str]]:
    """The problems a stage declaring `supports` takes, and the others by tag with the reason."""
    supports = tuple(supports)
    taken, skipped = [], {}
    for problem in problems:
        reason = refusal(family, problem, supports)
        if reason:
            skipped[problem.tag] = reason
        else:
            taken.append(problem)
    return taken, skipped
