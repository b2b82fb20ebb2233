"""Typed parameters: the one type check and command-line coercion behind RunConfig and every study's settings.

RunConfig (config.py) and a study's StudySettings subclass both check their fields here, so a wrong type reads
the same wherever it is given (notebook parameter, `-p key=value`, CLI flag). A study defines its own knobs as

    from hpml_lab.params import StudySettings
    @dataclass(frozen=True)
    class Settings(StudySettings):
        rev_stages: tuple[int, ...] = (1, 2)

and config.py re-exports ConfigError, StudySettings and coerce_value, the names callers already import from
there.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any


class ConfigError(ValueError):
    """A bad parameter. The message is one line, meant to be shown as it is."""


def _short(value: Any, limit: int = 80) -> str:
    """A value for an error message, cut to `limit` characters (a message stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def check_types(obj: Any) -> None:
    """The one type check of RunConfig and StudySettings: each field's value must have its annotated type
    (int, float, str, bool or tuple[item, ...]); an int given for a float becomes a float, a list for a tuple
    a tuple."""
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value, want = getattr(obj, f.name), hints[f.name]
        if typing.get_origin(want) is tuple:
            item = typing.get_args(want)[0]
            if isinstance(value, (list, tuple)) and all(_is_type(v, item) for v in value):
                object.__setattr__(obj, f.name, tuple(float(v) if item is float else v for v in value))
                continue
            raise ConfigError(f"parameter {f.name!r} must be a list of {item.__name__}, got {_short(value)}")
        if want is float and _is_type(value, float):
            object.__setattr__(obj, f.name, float(value))
        elif not _is_type(value, want):
            raise ConfigError(
                f"parameter {f.name!r} must be {want.__name__}, got {type(value).__name__} {_short(value)}"
            )


def _is_type(value: Any, want: type) -> bool:
    if want is bool:
        return isinstance(value, bool)
    if want is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if want is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, want)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce_value(name: str, value: Any, want: type) -> Any:
    """Convert a command-line string to the field's type (other values pass through)."""
    if not isinstance(value, str) or want is str:
        return value
    text = value.strip()
    try:
        if want is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if want is int:
            return int(text)
        if want is float:
            return float(text)
    except ValueError:
        kind = "true or false" if want is bool else want.__name__
        raise ConfigError(f"parameter {name!r} must be {kind}, got {_short(value)}") from None
    return value


def _numbers(value: Any) -> list:
    """The numbers in a setting (itself, or the items of a tuple), bools left out."""
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _numeric(want: Any) -> bool:
    """Whether a field of type `want` holds numbers (int, float, or a tuple of them)."""
    if typing.get_origin(want) is tuple:
        want = typing.get_args(want)[0]
    return want in (int, float)


class StudySettings:
    """Base for a study's own settings: the knobs of one study that are not RunConfig fields (the memory
    task's RevNet depths, C3's tolerance, Lab 5's batch sizes). Subclass it as a frozen dataclass with typed
    fields (int, float, str, bool or tuple[int | float | str, ...]) and defaults, and name it in the task
    (report/tasks.py, `Task(..., settings=...)`). Its field names are then notebook parameters like
    RunConfig's: `-p rev_stages=3,5`, `-f params.yaml` and papermill set them and the runner checks them
    before any kernel starts. In the notebook:

        settings = memory.Settings.from_namespace(globals())   # the parameters cell's values, checked

    The pre-run check every study passes, the same for all (a new study cannot leave it out): types; every
    number within its range in RANGES, which every numeric field must have (a count of repeats, steps or
    rounds with no bound once ran without end); check() for what ranges cannot say; and check_run(cfg) for
    what needs the run's RunConfig (the data's size, the learning rate), called by the runner before any
    kernel starts.
    """

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        names = [f.name for f in fields(self)]  # type: ignore[arg-type]
        unbounded = [n for n in names if _numeric(hints[n]) and n not in self.RANGES]
        if unbounded:  # a study's own mistake, met by its first test: not a user's
            raise TypeError(
                f"{type(self).__qualname__} gives no range for {', '.join(unbounded)}: every number a study "
                "takes is bounded before compute (RANGES = {name: (lowest, highest, why)})"
            )
        check_types(self)
        for f in fields(self):  # type: ignore[arg-type]
            for v in _numbers(getattr(self, f.name)):
                if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= 1e6) or abs(v) > 10**9:
                    raise ConfigError(
                        f"parameter {f.name!r} must be a finite number of sensible size (at most 1e6 "
                        f"for a float, 1e9 for a count), got {_short(v)}"
                    )
        for name, (lo, hi, why) in self.RANGES.items():  # what can run, refused before compute
            for v in _numbers(getattr(self, name)):
                if not lo <= v <= hi:
                    raise ConfigError(self.out_of_range(name, v, lo, hi, why))
        self.check()

    RANGES: typing.ClassVar[dict[str, tuple[float, float, str]]] = {}  # name: (lowest, highest, why)

    @classmethod
    def out_of_range(cls, name: str, value: float, lo: float, hi: float, why: str) -> str:
        """The one line for a value outside its range (a study whose options are flags words it as flags)."""
        return f"parameter {name!r} {_short(value)} is out of range: use {_short(lo)} to {_short(hi)} ({why})"

    def check(self) -> None:
        """Value checks beyond types and ranges (override; raise ConfigError with one line)."""

    def check_run(self, cfg: Any) -> None:
        """What these settings can run with `cfg`, the run's RunConfig (the data's size, the learning rate,
        the time the run may take): override; raise ConfigError with one line. The runner calls it before any
        kernel starts, for every task with settings."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def coerce(cls, name: str, value: Any) -> Any:
        """A command-line string to the field's type; a tuple field takes comma-separated items."""
        want = typing.get_type_hints(cls)[name]
        if typing.get_origin(want) is tuple:
            if isinstance(value, str):
                item = typing.get_args(want)[0]
                return tuple(coerce_value(name, v, item) for v in value.split(",") if v.strip())
            return value
        return coerce_value(name, value, want)

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]):
        """The settings named in `namespace` (a notebook's globals), defaults for the rest, checked."""
        return cls(**{k: namespace[k] for k in cls.field_names() if k in namespace})
