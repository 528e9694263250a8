"""Validation of tnbayes model files: every damaged or edited file gives one error, :class:`ModelFileError`.

A model file (see :mod:`tnbayes.models.base`) is read with ``torch.load(weights_only=True)``, so it never runs
code; this module checks everything else before a model is built from it: that the file can be read at all, the
payload's layout and types, the format version, a SHA-256 checksum of the payload (format version 2), and, once
the model is built, that it predicts finite values at the centre of its training data (which catches tensors of
the wrong shape for the stored parameters).
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

import torch

__all__ = ["ModelFileError", "payload_checksum", "read_model_file", "check_param_types", "check_loaded_model"]

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


def read_model_file(path: str | os.PathLike, *, format_name: str, max_version: int, package_version: str
                    ) -> dict[str, Any]:
    """Read and check a model file's payload (never executes code from it).

    Parameters
    ----------
    path : str or path-like
    format_name : str
        The expected ``format`` entry.
    max_version : int
        The newest format version this tnbayes reads.
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
