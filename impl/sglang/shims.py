"""Functional stand-ins: small, documented re-implementations of leaf libraries SGLang's item types need.

Why: from SGLang 0.5.20 ``MultimodalDataItem`` and ``MultimodalProcessorOutput``
are ``msgspec.Struct`` subclasses. msgspec is not a deferlab dependency, and a
permissive stand-in would make SGLang's *real* item class a hollow object
(attributes silently missing). So ``msgspec`` gets a functional stand-in that
implements what constructing and using a Struct means (fields from the class
annotations in MRO order, defaults and ``msgspec.field(default_factory=...)``,
keyword/positional construction that bypasses a subclass ``__setattr__`` as
msgspec's C layout does, ``__post_init__``, frozen, equality, copy and
pickling, ``msgspec.structs`` helpers). Its wire formats (``msgspec.msgpack``,
``msgspec.json``, ``convert``) are *not* emulated: they stay permissive
stand-ins that raise if called at run time.

Each shim is listed in `FUNCTIONAL` with the sentence that goes into the
stand-in record.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from typing import Any

from deferlab.impl.loader.standins import StandInModule


class _NoDefault:
    def __repr__(self) -> str:
        return "NODEFAULT"


NODEFAULT: Any = _NoDefault()


class _Field:
    """What ``msgspec.field(...)`` returns: a default or a default factory (and an encode name)."""

    def __init__(self, default: Any = NODEFAULT, default_factory: Any = NODEFAULT, name: str | None = None) -> None:
        if default is not NODEFAULT and default_factory is not NODEFAULT:
            raise TypeError("Cannot set both `default` and `default_factory`")
        self.default = default
        self.default_factory = default_factory
        self.name = name


def field(*, default: Any = NODEFAULT, default_factory: Any = NODEFAULT, name: str | None = None) -> Any:
    return _Field(default, default_factory, name)


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "t.ClassVar"))


class _StructConfig(types.SimpleNamespace):
    pass


_CONFIG_DEFAULTS = {
    "frozen": False,
    "eq": True,
    "order": False,
    "kw_only": False,
    "omit_defaults": False,
    "forbid_unknown_fields": False,
    "array_like": False,
    "gc": True,
    "weakref": False,
    "dict": False,
    "cache_hash": False,
    "tag": None,
    "tag_field": None,
    "rename": None,
    "repr_omit_defaults": False,
}


class Struct:
    """msgspec's ``Struct`` as construction semantics (no slots, no wire format)."""

    __struct_fields__: tuple[str, ...] = ()
    __struct_defaults__: tuple[Any, ...] = ()
    __struct_config__: Any = _StructConfig(**_CONFIG_DEFAULTS)
    __deferlab_struct_info__: dict[str, tuple[Any, bool]] = {}

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__()
        unknown = set(options) - set(_CONFIG_DEFAULTS)
        if unknown:
            raise TypeError(f"__init_subclass__() got unexpected keyword arguments {sorted(unknown)}")
        parent = next(b for b in cls.__mro__[1:] if isinstance(b, type) and issubclass(b, Struct))
        base_cfg = vars(parent.__struct_config__)
        cls.__struct_config__ = _StructConfig(**{**_CONFIG_DEFAULTS, **base_cfg, **options})
        kw_only_here = bool(options.get("kw_only", False))
        info: dict[str, tuple[Any, bool]] = {}
        for base in reversed(cls.__mro__[1:]):
            info.update(getattr(base, "__deferlab_struct_info__", {}))
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if _is_classvar(annotation):
                continue
            default = cls.__dict__.get(name, NODEFAULT)
            if name in cls.__dict__ and not isinstance(default, (types.FunctionType, property)):
                delattr(cls, name)  # msgspec keeps defaults off the class
            info.pop(name, None)
            info[name] = (default, kw_only_here)
        cls.__deferlab_struct_info__ = info
        cls.__struct_fields__ = tuple(info)
        cls.__struct_defaults__ = tuple(d for d, _ in info.values() if d is not NODEFAULT)
        cls.__match_args__ = tuple(n for n, (_, kw) in info.items() if not kw)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        info = type(self).__deferlab_struct_info__
        positional = [n for n, (_, kw) in info.items() if not kw]
        if len(args) > len(positional):
            raise TypeError(f"Extra positional arguments provided to {type(self).__name__}")
        values: dict[str, Any] = dict(zip(positional, args, strict=False))
        for key, value in kwargs.items():
            if key not in info:
                raise TypeError(f"Unexpected keyword argument '{key}'")
            if key in values:
                raise TypeError(f"Argument '{key}' given by name and position")
            values[key] = value
        for name, (default, _) in info.items():
            if name in values:
                continue
            if isinstance(default, _Field):
                if default.default_factory is not NODEFAULT:
                    values[name] = default.default_factory()
                elif default.default is not NODEFAULT:
                    values[name] = default.default
                else:
                    raise TypeError(f"Missing required argument '{name}'")
            elif default is NODEFAULT:
                raise TypeError(f"Missing required argument '{name}'")
            else:
                values[name] = copy.copy(default) if isinstance(default, (list, dict, set)) else default
        for name in info:
            object.__setattr__(self, name, values[name])
        post_init = getattr(type(self), "__post_init__", None)
        if post_init is not None:
            post_init(self)

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self).__struct_config__.frozen:
            raise AttributeError(f"immutable type: '{type(self).__name__}'")
        object.__setattr__(self, name, value)

    def __eq__(self, other: Any) -> Any:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__struct_fields__)

    def __hash__(self) -> int:
        if not type(self).__struct_config__.frozen:
            raise TypeError(f"unhashable type: '{type(self).__name__}'")
        return hash(tuple(getattr(self, n) for n in self.__struct_fields__))

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={object.__getattribute__(self, n)!r}" for n in self.__struct_fields__)
        return f"{type(self).__name__}({parts})"

    def __copy__(self) -> Any:
        return _rebuild_struct(type(self), _state(self))

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (_rebuild_struct, (type(self), _state(self)))


def _state(obj: Any) -> dict[str, Any]:
    state = dict(object.__getattribute__(obj, "__dict__"))
    return state


def _rebuild_struct(cls: type, state: dict[str, Any]) -> Any:
    """Unpickle / copy a Struct without running ``__init__`` or a subclass ``__setattr__`` (as msgspec does)."""
    obj = cls.__new__(cls)
    for key, value in state.items():
        object.__setattr__(obj, key, value)
    return obj


class FieldInfo(types.SimpleNamespace):
    pass


def _fields(type_or_instance: Any) -> tuple[FieldInfo, ...]:
    cls = type_or_instance if isinstance(type_or_instance, type) else type(type_or_instance)
    out = []
    for name, (default, _) in cls.__deferlab_struct_info__.items():
        factory = default.default_factory if isinstance(default, _Field) else NODEFAULT
        plain = default.default if isinstance(default, _Field) else default
        out.append(FieldInfo(name=name, encode_name=name, type=Any, default=plain, default_factory=factory))
    return tuple(out)


def _replace(struct: Any, **changes: Any) -> Any:
    new = _rebuild_struct(type(struct), _state(struct))
    for key, value in changes.items():
        if key not in type(struct).__struct_fields__:
            raise TypeError(f"`{type(struct).__name__}` has no field '{key}'")
        object.__setattr__(new, key, value)
    return new


def _asdict(struct: Any) -> dict[str, Any]:
    return {n: getattr(struct, n) for n in struct.__struct_fields__}


def _astuple(struct: Any) -> tuple[Any, ...]:
    return tuple(getattr(struct, n) for n in struct.__struct_fields__)


def _force_setattr(struct: Any, name: str, value: Any) -> None:
    object.__setattr__(struct, name, value)


class MsgspecError(Exception):
    pass


class DecodeError(MsgspecError):
    pass


class ValidationError(DecodeError):
    pass


class EncodeError(MsgspecError):
    pass


_BUILT: dict[str, StandInModule] = {}


def build_msgspec(name: str) -> StandInModule:
    """The ``msgspec`` stand-in (and its ``structs`` submodule), one object per name for the process."""
    if name not in _BUILT:
        _BUILT[name] = _build_msgspec(name)
    return _BUILT[name]


def _build_msgspec(name: str) -> StandInModule:
    """``msgspec`` or ``msgspec.structs``: the only names `FUNCTIONAL` builds here."""
    mod = StandInModule(name)
    mod.__deferlab_functional__ = True
    if name == "msgspec":
        names = {
            "Struct": Struct,
            "field": field,
            "NODEFAULT": NODEFAULT,
            "UNSET": NODEFAULT,
            "MsgspecError": MsgspecError,
            "DecodeError": DecodeError,
            "ValidationError": ValidationError,
            "EncodeError": EncodeError,
            "structs": build_msgspec("msgspec.structs"),
        }
    else:
        names = {
            "fields": _fields,
            "replace": _replace,
            "asdict": _asdict,
            "astuple": _astuple,
            "force_setattr": _force_setattr,
            "FieldInfo": FieldInfo,
        }
    for attr, value in names.items():
        setattr(mod, attr, value)
    return mod


def build_pybase64(name: str) -> StandInModule:
    """``pybase64``: SGLang decodes a data URI's base64 with ``pybase64.b64decode(s, validate=True)``, whose contract
    is the standard library's ``base64.b64decode`` (same arguments, same bytes, ``binascii.Error`` on bad input), so
    the stand-in is that function: a client's data URI then takes SGLang's own string path (semantics §20.8)."""
    import base64

    mod = StandInModule(name)
    mod.__deferlab_functional__ = True
    for attr in ("b64decode", "b64encode", "standard_b64decode", "standard_b64encode", "urlsafe_b64decode",
                 "urlsafe_b64encode"):  # fmt: skip
        setattr(mod, attr, getattr(base64, attr))
    return mod


FUNCTIONAL: dict[str, tuple[Callable[[str], StandInModule], str]] = {
    "pybase64": (
        build_pybase64,
        "functional stand-in (impl/sglang/shims.py): pybase64's b64decode/b64encode are the standard library's "
        "base64 functions, the same contract",
    ),
    "msgspec": (
        build_msgspec,
        "functional stand-in (impl/sglang/shims.py): msgspec.Struct construction, defaults, field(), "
        "__post_init__, frozen, copy/pickle and msgspec.structs; msgpack/json encoding not emulated",
    ),
    "msgspec.structs": (build_msgspec, "functional stand-in (impl/sglang/shims.py): msgspec.structs helpers"),
}
