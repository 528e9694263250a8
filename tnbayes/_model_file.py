"""The tnbayes model file: its format, its JSON codec, writing it and reading it back into a model.

A model file is a single file written with ``torch.save`` holding only tensors, strings and numbers
(format version 2): constructor arguments and scalar fitted attributes as JSON strings, tensors as tensors, and a
SHA-256 checksum of all of it. It is read back with ``torch.load(weights_only=True)``, so loading a file never
executes code from it, and everything else is checked before a model is built from it: that the file can be read
at all, the payload's layout and types, the format version, the checksum, the stored parameters' types, and, once
the model is built, that it predicts finite values at the centre of its training data (which catches tensors of
the wrong shape for the stored parameters). Every damaged or edited file raises one error,
:class:`ModelFileError`; version 1 files (no checksum) still load.

:meth:`tnbayes.models.base.BaseModel.save` and :meth:`~tnbayes.models.base.BaseModel.load` call
:func:`write_model_file`, :func:`read_model_file` and :func:`restore_model`; this module belongs to no axis (the
estimator contract's persistence).
"""

from __future__ import annotations

import collections.abc
import hashlib
import inspect
import json
import os
import types
import typing
import warnings
from typing import Any

import numpy as np
import torch

from tnbayes._deprecation import apply_renamed_parameters
from tnbayes._version import __version__
from tnbayes.preprocessing import AffineScaler

__all__ = ["ModelFileError", "FORMAT_NAME", "FORMAT_VERSION", "payload_checksum", "to_jsonable", "from_jsonable",
           "write_model_file", "read_model_file", "restore_model", "check_param_types", "check_loaded_model"]

#: the payload's ``format`` entry
FORMAT_NAME = "tnbayes-model"
#: 2: a SHA-256 checksum of the payload (version 1 files, without one, still load)
FORMAT_VERSION = 2
#: the dtypes a model file may name (``{"__dtype__": name}``); anything else is refused, never looked up on torch
DTYPE_NAMES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
               "float64": torch.float64, "complex64": torch.complex64, "complex128": torch.complex128,
               "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
#: the payload's entries and their types (``checksum`` from format version 2 on)
_LAYOUT: dict[str, type] = {"format": str, "format_version": int, "tnbayes_version": str, "class": str,
                            "params_json": str, "scalars_json": str, "scalers_json": str, "tensors": dict,
                            "extra": dict}
_JSON_ENTRIES = ("params_json", "scalars_json", "scalers_json")


class ModelFileError(ValueError):
    """A file that is not a valid tnbayes model file (damaged, truncated, edited or not a model at all).

    The message starts with "not a valid tnbayes model file: " and says what is wrong.
    """

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        super().__init__(f"not a valid tnbayes model file: {os.fspath(path)}: {problem}")


def payload_checksum(payload: dict[str, Any]) -> str:
    """SHA-256 (hex) of a payload's JSON entries and tensors (names, dtypes, shapes and bytes), in a fixed order.

    Parameters
    ----------
    payload : dict
        The dictionary ``BaseModel.save`` writes (its ``checksum`` entry is not part of the sum).

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    digest = hashlib.sha256()
    for key in ("format", "format_version", "class", *_JSON_ENTRIES):
        digest.update(f"{key}={payload[key]!s}\n".encode())
    for group in ("tensors", "extra"):
        for name in sorted(payload[group]):
            t = payload[group][name].detach().cpu().contiguous()
            digest.update(f"{group}.{name}:{t.dtype}:{tuple(t.shape)}\n".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON data; tuples and dtypes are tagged so :func:`from_jsonable` restores them exactly.

    Parameters
    ----------
    value : object
        ``None``, a bool, number or string, a numpy scalar, an array or tensor (stored as nested lists), a torch
        dtype or device, or a list, tuple or dict of those.

    Returns
    -------
    object
        JSON-serialisable data.

    Raises
    ------
    TypeError
        For any other type.
    """
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return to_jsonable(value.tolist())
    if isinstance(value, torch.dtype):
        return {"__dtype__": str(value).replace("torch.", "")}
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):  # kept a tuple on load, so get_params round-trips exactly
        return {"__tuple__": [to_jsonable(v) for v in value]}
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store {type(value).__name__} value {value!r} as JSON")


def from_jsonable(value: Any) -> Any:
    """Undo :func:`to_jsonable`: tagged tuples and dtypes come back as tuples and ``torch.dtype``.

    Parameters
    ----------
    value : object
        Decoded JSON data.

    Returns
    -------
    object

    Raises
    ------
    ValueError
        For a dtype name outside :data:`DTYPE_NAMES` (never looked up on torch).
    """
    if isinstance(value, dict):
        if set(value) == {"__dtype__"}:
            name = value["__dtype__"]
            if not isinstance(name, str) or name not in DTYPE_NAMES:
                raise ValueError(f"unknown dtype {name!r} (known: {sorted(DTYPE_NAMES)})")
            return DTYPE_NAMES[name]
        if set(value) == {"__tuple__"}:
            return tuple(from_jsonable(v) for v in value["__tuple__"])
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


def write_model_file(model: Any, path: str | os.PathLike) -> None:
    """Write a fitted model's parameters and fitted state to ``path``.

    The fitted state is every public attribute ending in ``_`` except the model's ``_transient_attributes``:
    tensors as tensors, :class:`~tnbayes.preprocessing.AffineScaler` s as their configuration (JSON) and state
    tensors, everything else as JSON; ``model._extra_state()`` adds tensors of the transient attributes.

    Parameters
    ----------
    model : BaseModel
        A fitted model.
    path : str or path-like

    Raises
    ------
    TypeError
        For a fitted attribute that is neither a tensor, a scaler nor JSON-able (the message says how to keep it).
    """
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    scalers: dict[str, dict] = {}
    for name, value in vars(model).items():
        if not name.endswith("_") or name.startswith("_") or name in model._transient_attributes:
            continue
        if isinstance(value, torch.Tensor):
            tensors[name] = value.detach().cpu()
        elif isinstance(value, AffineScaler):
            scalers[name] = value.config()
            for key, t in value.state().items():
                tensors[f"{name}.{key}"] = t.detach().cpu()
        else:
            try:
                scalars[name] = to_jsonable(value)
            except TypeError as err:
                raise TypeError(
                    f"{type(model).__name__}.{name} cannot be saved ({err}); list it in "
                    f"_transient_attributes and store it via _extra_state."
                ) from None
    payload = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tnbayes_version": __version__,
        "class": type(model).__name__,
        "params_json": json.dumps(to_jsonable(model.get_params())),
        "scalars_json": json.dumps(scalars),
        "scalers_json": json.dumps(scalers),
        "tensors": tensors,
        "extra": {k: v.detach().cpu() for k, v in model._extra_state().items()},
    }
    payload["checksum"] = payload_checksum(payload)
    torch.save(payload, os.fspath(path))


def read_model_file(path: str | os.PathLike, *, format_name: str = FORMAT_NAME, max_version: int = FORMAT_VERSION,
                    package_version: str = __version__) -> dict[str, Any]:
    """Read and check a model file's payload (never executes code from it).

    Parameters
    ----------
    path : str or path-like
    format_name : str
        The expected ``format`` entry (:data:`FORMAT_NAME`).
    max_version : int
        The newest format version this tnbayes reads (:data:`FORMAT_VERSION`).
    package_version : str
        This tnbayes's version (for the upgrade hint).

    Returns
    -------
    dict
        The payload with its JSON entries decoded (``params``, ``scalars``, ``scalers``) besides the raw ones.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ModelFileError
        For anything else that is wrong with the file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such model file: {path}")
    if os.path.isdir(path):
        raise ModelFileError(path, "it is a directory.")
    if os.path.getsize(path) == 0:
        raise ModelFileError(path, "the file is empty.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any reader failure means a damaged or foreign file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "weights_only" in str(err) or "Unpickl" in type(err).__name__:
            first = "it holds Python objects other than tensors, numbers and strings (refused without running them)"
        raise ModelFileError(path, f"it cannot be read as a torch file ({first[:200]}); it is damaged, "
                                   f"truncated or not written by model.save.") from None
    if not isinstance(payload, dict) or payload.get("format") != format_name:
        raise ModelFileError(path, "it is not a tnbayes model (no 'format': 'tnbayes-model' entry).")
    version = payload.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(path, f"format_version is {version!r}; expected a positive integer.")
    if version > max_version:
        raise ModelFileError(path, f"it uses model-file format version {version}; this tnbayes ({package_version}) "
                                   f"reads up to {max_version}. Upgrade tnbayes to load it.")
    for key, kind in _LAYOUT.items():
        if key not in payload:
            raise ModelFileError(path, f"the {key!r} entry is missing.")
        if not isinstance(payload[key], kind):
            raise ModelFileError(path, f"the {key!r} entry is a {type(payload[key]).__name__}, not a {kind.__name__}.")
    for group in ("tensors", "extra"):
        for name, value in payload[group].items():
            if not isinstance(name, str) or not isinstance(value, torch.Tensor):
                raise ModelFileError(path, f"{group}[{name!r}] is a {type(value).__name__}, not a tensor.")
            attribute = name.split(".", 1)[0]
            if group == "tensors" and (not attribute.isidentifier() or attribute.startswith("_")
                                       or not attribute.endswith("_")):
                raise ModelFileError(path, f"tensors[{name!r}] does not name a fitted attribute.")
    if version >= 2:
        stored = payload.get("checksum")
        if not isinstance(stored, str):
            raise ModelFileError(path, "the 'checksum' entry is missing.")
        if stored != payload_checksum(payload):
            raise ModelFileError(path, "its checksum does not match its contents (the file was damaged or edited).")
    decoded = dict(payload)
    for key in _JSON_ENTRIES:
        try:
            value = json.loads(payload[key])
        except ValueError as err:
            raise ModelFileError(path, f"the {key!r} entry is not valid JSON ({err}).") from None
        if not isinstance(value, dict):
            raise ModelFileError(path, f"the {key!r} entry is not a JSON object.")
        decoded[key.removesuffix("_json")] = value
    for name in decoded["scalars"]:
        if not name.isidentifier() or name.startswith("_") or not name.endswith("_"):
            raise ModelFileError(path, f"scalars_json entry {name!r} does not name a fitted attribute.")
    for name in decoded["scalers"]:
        if not name.isidentifier() or name.startswith("_") or not name.endswith("_"):
            raise ModelFileError(path, f"scalers_json entry {name!r} does not name a fitted attribute.")
    return decoded


def _matches(value: Any, hint: Any) -> bool:
    """Whether a stored parameter value fits a constructor annotation (unknown annotations accept anything)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    target = origin or hint
    if target in (list, tuple, collections.abc.Sequence):
        return isinstance(value, (list, tuple))
    if target in (dict, collections.abc.Mapping):
        return isinstance(value, dict)
    if isinstance(target, type):
        return isinstance(value, target) or target in (torch.dtype, torch.device)
    return True


def check_param_types(path: str | os.PathLike, model_cls: type, params: dict[str, Any]) -> None:
    """Refuse stored constructor arguments whose type the constructor's annotations do not allow.

    Parameters
    ----------
    path : str or path-like
        For the message.
    model_cls : type
        The model class named in the file.
    params : dict
        The decoded ``params_json``.

    Raises
    ------
    ModelFileError
        For an unknown parameter name or a value of the wrong type (e.g. ``quantized = -1``).
    """
    hints: dict[str, Any] = {}
    for klass in reversed(model_cls.__mro__):
        if klass is object or "__init__" not in vars(klass):
            continue
        try:
            hints.update(typing.get_type_hints(klass.__init__))
        except Exception:  # noqa: BLE001 - an annotation this Python cannot evaluate: no type check for it
            continue
    known = set(model_cls._param_names())
    for name, value in params.items():
        if name not in known:
            raise ModelFileError(path, f"{model_cls.__name__} has no parameter {name!r}.")
        if name in hints and not _matches(value, hints[name]):
            raise ModelFileError(path, f"parameter {name} = {value!r} is not of the type {model_cls.__name__} "
                                       f"takes ({hints[name]}).")


def check_loaded_model(path: str | os.PathLike, model: Any) -> None:
    """Predict at the centre of the training inputs; any failure or non-finite value means an inconsistent file.

    Parameters
    ----------
    path : str or path-like
        For the message.
    model : BaseModel
        The freshly loaded model.

    Raises
    ------
    ModelFileError
        When the stored tensors do not fit the stored parameters (e.g. a tensor of the wrong shape).
    """
    try:
        n_features = int(model.n_features_in_)
        box = getattr(model, "training_range_", None)  # (2, D) scaled: its midpoint is inside the data
        centre = (torch.zeros(n_features, dtype=model.dtype_, device=model.device_) if box is None
                  else box.to(dtype=model.dtype_, device=model.device_).mean(dim=0))
        X = model.x_scaler_.inverse_transform(centre.reshape(1, n_features))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if hasattr(model, "predict_proba"):
                values = torch.as_tensor(model.predict_proba(X.cpu().numpy()))
            else:
                post = model.posterior(X)
                values = torch.cat([post.mean.reshape(-1), post.variance.reshape(-1)])
    except Exception as err:  # noqa: BLE001 - the file's state is inconsistent, whatever broke
        raise ModelFileError(path, f"the stored state is inconsistent with its parameters "
                                   f"({type(err).__name__}: {str(err)[:200]}).") from None
    if not bool(torch.isfinite(values.to(torch.float64)).all()):
        raise ModelFileError(path, "the stored state predicts non-finite values.")


def restore_model(path: str | os.PathLike, payload: dict[str, Any], model_cls: type, *,
                  device: str | torch.device | None = None) -> Any:
    """Build a ``model_cls`` from a payload checked by :func:`read_model_file` and restore its fitted state.

    Parameters
    ----------
    path : str or path-like
        For the messages.
    payload : dict
        What :func:`read_model_file` returned.
    model_cls : type
        The model class the file names.
    device : str or torch.device, optional
        Override the stored device.

    Returns
    -------
    BaseModel
        The fitted model, checked by :func:`check_loaded_model`.

    Raises
    ------
    ModelFileError
        For invalid parameters, a state that cannot be restored or does not fit the parameters.
    RuntimeError
        For a stored CUDA device where CUDA is unavailable (the fix is ``load(..., device=...)``).
    """
    try:
        params = from_jsonable(payload["params"])
        check_param_types(path, model_cls, params)
        if device is not None:
            params["device"] = str(device)
        model = model_cls(**params)
        with warnings.catch_warnings():  # a file saved before a rename stores the old name; its value moves over
            warnings.simplefilter("ignore", FutureWarning)
            apply_renamed_parameters(model)
        model.dtype_  # noqa: B018 - the stored dtype and device must be valid
        target_device = model.device_
        # the checks fit runs first, where a tnbayes model defines them without arguments (scikit-learn's own
        # BaseEstimator._validate_params, which needs _parameter_constraints, is not one of them)
        validate = getattr(model, "_validate_params", None)
        if (callable(validate) and getattr(validate, "__module__", "").startswith("tnbayes.")
                and not inspect.signature(validate).parameters):
            validate()
    except (RuntimeError, ModelFileError):  # RuntimeError: CUDA unavailable here; the fix is load(..., device=)
        raise
    except Exception as err:  # noqa: BLE001 - an edited parameter, whatever it breaks
        raise ModelFileError(path, f"its parameters are invalid ({err}).") from None
    try:
        tensors = payload["tensors"]
        for name, config in payload["scalers"].items():
            state = {k.split(".", 1)[1]: v.to(target_device) for k, v in tensors.items()
                     if k.startswith(name + ".")}
            setattr(model, name, AffineScaler.from_state(config, state))
        for name, value in tensors.items():
            if "." not in name:
                setattr(model, name, value.to(target_device))
        for name, value in from_jsonable(payload["scalars"]).items():
            setattr(model, name, value)
        model._after_load({k: v.to(target_device) for k, v in payload["extra"].items()})
    except Exception as err:  # noqa: BLE001
        raise ModelFileError(path, f"its fitted state cannot be restored ({type(err).__name__}: "
                                   f"{str(err)[:200]}).") from None
    if not model.is_fitted:
        raise ModelFileError(path, "it holds no fitted model (n_features_in_ is missing).")
    check_loaded_model(path, model)
    return model
