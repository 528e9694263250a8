"""Input validation shared by every estimator, kernel and metric: the package's one validation place.

All user-facing entry points funnel arrays through these helpers so that bad input gets one
consistent, explanatory error instead of silent garbage further down. Estimators, kernels and bases take
torch tensors (:func:`check_inputs`, :func:`check_targets`, :func:`check_X_y`); :mod:`tnbayes.metrics` takes
float64 numpy arrays (:func:`check_values`, :func:`check_same_shape`, :func:`check_level`). It belongs to no axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.exceptions import DataConversionWarning

from tnbayes._warnings import warn_user

ArrayLike = Any  # numpy array, torch tensor, or nested sequence of numbers

DEFAULT_DTYPE = torch.float64


def resolve_dtype(dtype: torch.dtype | str | None) -> torch.dtype:
    """Turn ``None``/``"float32"``/``torch.float32`` into a torch floating dtype (default float64)."""
    if dtype is None:
        return DEFAULT_DTYPE
    if isinstance(dtype, str):
        name = dtype.replace("torch.", "")
        if name in ("float64", "double"):
            return torch.float64
        if name in ("float32", "float", "single"):
            return torch.float32
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}.")
    return dtype


def resolve_device(device: torch.device | str | None) -> torch.device:
    """Turn ``None``/``"cuda"``/``torch.device`` into a ``torch.device``; refuse unavailable CUDA."""
    dev = torch.device("cpu" if device is None else device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "device='cuda' was requested but torch.cuda.is_available() is False. "
            "Install a CUDA build of torch or use device='cpu'."
        )
    return dev


def _to_numpy_or_tensor(a: ArrayLike, name: str) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        t = a.detach()
        if t.is_complex():
            raise ValueError(f"Complex data not supported: {name} is complex; pass real-valued data.")
        if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32,
                                                       torch.int64, torch.uint8, torch.bool)):
            raise ValueError(f"{name} has unsupported dtype {t.dtype}; pass numbers.")
        return t
    if _is_sparse(a):
        raise TypeError(f"{name} is a sparse {type(a).__name__}; sparse input is not supported (the feature maps "
                        f"are dense). Pass {name}.toarray() if it fits in memory.")
    if hasattr(a, "to_numpy") and not isinstance(a, np.ndarray):  # pandas objects
        a = _pandas_to_numpy(a)
    arr = np.asarray(a)
    if arr.dtype.kind == "O":
        arr = _object_array_as_float(arr, name)
    if arr.dtype.kind in "USV" or arr.dtype.kind == "M":
        raise ValueError(
            f"{name} has dtype {arr.dtype} (strings/objects/dates); numeric data are required. "
            f"Encode categorical columns as numbers first (e.g. one-hot) and convert with "
            f"np.asarray({name}, dtype=float)."
        )
    if arr.dtype.kind == "c":
        raise ValueError(f"Complex data not supported: {name} is complex; pass real-valued data.")
    arr = np.ascontiguousarray(arr)
    if not arr.flags.writeable:  # read-only views (pandas 3 copy-on-write, memory maps): torch.from_numpy would warn
        arr = arr.copy()
    return torch.from_numpy(arr)


def _pandas_to_numpy(frame: Any) -> np.ndarray:
    """An object with ``to_numpy`` as a numpy array. For a pandas DataFrame or Series, nullable numeric and boolean
    columns (``Int64``, ``Float64``, ``boolean``) become float64 with NaN where they hold ``pd.NA``, so a missing
    value gets the NaN check's message (as scikit-learn's ``check_array`` converts them), not an object array that
    float() refuses; any other object (polars, pyarrow, xarray …) is converted by its own ``to_numpy()``."""
    if not type(frame).__module__.startswith("pandas"):
        return frame.to_numpy()
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    dtypes = list(frame.dtypes) if hasattr(frame, "columns") else [frame.dtype]
    extension = [dtype for dtype in dtypes if not isinstance(dtype, np.dtype)]
    if extension and all(is_numeric_dtype(dtype) or is_bool_dtype(dtype) for dtype in dtypes):
        return frame.to_numpy(dtype=np.float64, na_value=np.nan)
    return frame.to_numpy()


def _is_sparse(a: Any) -> bool:
    """Whether ``a`` is a scipy sparse matrix or array (scipy is imported only if it already is)."""
    import sys

    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(a)


def _object_array_as_float(arr: np.ndarray, name: str) -> np.ndarray:
    """An object array of numbers as float64; entries that are not numbers raise with what to do about them."""
    advice = (f"numeric data are required. Encode categorical columns as numbers first (e.g. one-hot) and convert "
              f"with np.asarray({name}, dtype=float).")
    try:
        return arr.astype(np.float64)
    except TypeError as err:  # e.g. a dict or an object() in a cell; numpy's wording kept, as scikit-learn does
        raise TypeError(f"{name} has dtype object with entries that are not numbers ({err}); {advice}") from None
    except ValueError as err:  # strings that do not parse as numbers
        raise ValueError(f"{name} has dtype object with entries that are not numbers ({err}); {advice}") from None


def check_finite(values: torch.Tensor | np.ndarray, name: str, *, remedy: str | None = None) -> None:
    """Raise when a tensor or array holds NaN or infinite values, saying how many and where the first is.

    Parameters
    ----------
    values : torch.Tensor or numpy.ndarray of any shape
    name : str
        Name used in the message.
    remedy : str, optional
        The message's last sentence (what to do); by default it advises keeping the finite rows or entries.

    Raises
    ------
    ValueError
        If any value is not finite.
    """
    ops = torch if isinstance(values, torch.Tensor) else np
    bad = ~ops.isfinite(values)
    if not bool(bad.any()):
        return
    first = tuple(int(i) for i in ops.argwhere(bad)[0].tolist())
    kind = "NaN" if bool(ops.isnan(values).any()) else "inf"
    if remedy is None:
        keep = (f"the rows where np.isfinite({name}).all(axis=1) holds" if values.ndim == 2
                else f"the entries where np.isfinite({name}) holds")
        remedy = f"Remove or impute the missing values first (e.g. keep only {keep})."
    raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) ({kind}), first at index {first}. {remedy}")


def _as_finite(t: torch.Tensor, name: str, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """``t`` on ``dtype`` and ``device``, checked for NaN and inf (the last step of every array check)."""
    t = t.to(dtype=dtype, device=device)
    check_finite(t, name)
    return t


def check_inputs(
    X: ArrayLike,
    *,
    name: str = "X",
    n_features: int | None = None,
    dtype: torch.dtype = DEFAULT_DTYPE,
    device: torch.device | str = "cpu",
    model_name: str = "the model",
) -> torch.Tensor:
    """Validate an input matrix and return it as a tensor.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Numpy array, torch tensor or nested sequence of numbers.
    name : str
        Name used in error messages.
    n_features : int, optional
        Required number of columns (the number seen in ``fit``).
    dtype, device
        Target dtype and device of the returned tensor.
    model_name : str
        The estimator named in the wrong-number-of-columns message.

    Returns
    -------
    torch.Tensor of shape (n_samples, n_features)

    Raises
    ------
    ValueError
        For non-numeric, non-2-D, empty or non-finite input, or a wrong number of columns.
    TypeError
        For an object array with entries that are not numbers.
    """
    t = _to_numpy_or_tensor(X, name)
    if t.ndim != 2:
        hint = (
            f" Reshape your data: if it has a single feature, use {name}.reshape(-1, 1); if it is a single "
            f"sample, use {name}.reshape(1, -1)." if t.ndim == 1 else ""
        )
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_features); got {t.ndim}-D with shape "
            f"{tuple(t.shape)}.{hint}"
        )
    if t.shape[0] == 0:  # the counts are worded as scikit-learn's check_array words them
        raise ValueError(f"{name} is empty: found array with 0 sample(s) (shape={tuple(t.shape)}) while a "
                         f"minimum of 1 is required.")
    if t.shape[1] == 0:
        raise ValueError(f"{name} has no columns: found array with 0 feature(s) (shape={tuple(t.shape)}) while a "
                         f"minimum of 1 is required.")
    if n_features is not None and t.shape[1] != n_features:  # scikit-learn's wording ("X has 3 features, but M …")
        raise ValueError(f"{name} has {t.shape[1]} features, but {model_name} is expecting {n_features} features "
                         f"as input (it was fitted with {n_features}). Pass inputs with the same columns as in fit.")
    return _as_finite(t, name, dtype, device)


def check_targets(
    y: ArrayLike,
    *,
    n_samples: int | None = None,
    name: str = "y",
    dtype: torch.dtype = DEFAULT_DTYPE,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Validate a target vector and return it as a 1-D tensor.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        A column vector (n_samples, 1) is accepted with a ``DataConversionWarning``, as in scikit-learn.
    n_samples : int, optional
        Required length (the number of rows of ``X``).

    Returns
    -------
    torch.Tensor of shape (n_samples,)
    """
    t = _to_numpy_or_tensor(y, name)
    if t.ndim == 2 and t.shape[1] == 1:
        warn_user(  # scikit-learn's wording and warning class, so its estimator checks recognise it
            f"A column-vector {name} was passed when a 1d array was expected. Please change the shape of {name} to "
            f"(n_samples,), for example using ravel().", DataConversionWarning)
        t = t[:, 0]
    if t.ndim != 1:
        hint = " Multi-output regression is not supported: fit one model per output." if t.ndim == 2 else ""
        raise ValueError(
            f"{name} must be 1-D of shape (n_samples,); got {t.ndim}-D with shape "
            f"{tuple(t.shape)}.{hint}"
        )
    if t.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 samples); at least one target is required.")
    if n_samples is not None and t.shape[0] != n_samples:
        raise ValueError(f"X and {name} have inconsistent numbers of samples: X has {n_samples} rows, {name} has "
                         f"{t.shape[0]} entries.")
    return _as_finite(t, name, dtype, device)


def check_X_y(
    X: ArrayLike,
    y: ArrayLike,
    *,
    dtype: torch.dtype = DEFAULT_DTYPE,
    device: torch.device | str = "cpu",
    min_samples: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a training pair; see :func:`check_inputs` and :func:`check_targets`.

    Returns
    -------
    X : torch.Tensor of shape (n_samples, n_features)
    y : torch.Tensor of shape (n_samples,)
    """
    Xt = check_inputs(X, dtype=dtype, device=device)
    yt = check_targets(y, n_samples=Xt.shape[0], dtype=dtype, device=device)
    if Xt.shape[0] < min_samples:
        raise ValueError(too_few_samples_message(min_samples, Xt.shape[0]))
    return Xt, yt


def too_few_samples_message(min_samples: int, n_samples: int) -> str:
    """The error for a training set smaller than a model needs (worded so scikit-learn's checks recognise it)."""
    return (f"At least {min_samples} training samples are required; got {n_samples} sample"
            f"{'' if n_samples == 1 else 's'}. Fit on more rows.")


def check_feature_names(estimator: Any, X: Any, *, reset: bool) -> None:
    """Record (``reset=True``, in fit) or compare (in predict) the column names of a DataFrame ``X``.

    Sets or checks ``feature_names_in_`` exactly as scikit-learn estimators do (through
    :func:`sklearn.utils.validation.validate_data` without converting ``X``), so a model fitted on a DataFrame
    warns or raises when predicting on one with other columns. Call it after :func:`check_inputs` has accepted
    ``X``: the number of columns is checked there, with the package's message.

    Parameters
    ----------
    estimator : BaseEstimator
    X : array-like of shape (n_samples, n_features)
    reset : bool
        True in ``fit`` (names are recorded), False afterwards (names are compared).
    """
    from sklearn.utils.validation import validate_data

    n_features = getattr(estimator, "n_features_in_", None)
    validate_data(estimator, X, reset=reset, skip_check_array=True)
    if reset:  # validate_data also sets n_features_in_; the models set it only once _fit has succeeded
        estimator.n_features_in_ = n_features


def check_positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    """Return ``float(value)`` if it is finite and positive (or zero if allowed), else raise."""
    v = float(value)
    ok = np.isfinite(v) and (v >= 0 if allow_zero else v > 0)
    if not ok:
        need = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a finite {need} number; got {value!r}.")
    return v


# ---------------------------------------------------------------------------------------------- metric inputs
#: the advice of every non-finite-value error about predictions and targets given to a metric
_METRIC_REMEDY = "Remove or impute those points before computing metrics."


def as_float64_array(a: ArrayLike, name: str) -> np.ndarray:
    """``a`` as a real float64 numpy array (not yet checked for emptiness or finiteness).

    Parameters
    ----------
    a : array-like of any shape
        A numpy array, torch tensor (any device and floating dtype), pandas object or nested list of numbers.
    name : str
        Name used in error messages.

    Returns
    -------
    numpy.ndarray of the same shape, float64

    Raises
    ------
    ValueError
        For complex, non-numeric or ragged data, or a callable (e.g. an uncalled ``mean`` method).
    """
    if isinstance(a, torch.Tensor):
        if a.is_complex():
            raise ValueError(f"{name} is complex; real-valued data are required.")
        return a.detach().to(device="cpu", dtype=torch.float64).numpy()
    if hasattr(a, "to_numpy") and not isinstance(a, np.ndarray):  # pandas objects
        a = _pandas_to_numpy(a)
    if callable(a):
        raise ValueError(
            f"{name} is a callable ({type(a).__name__}), not an array. If it came from an object "
            f"whose `mean`/`stddev` are methods, call them first and pass the resulting arrays."
        )
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as err:  # ragged nested lists etc.
        raise ValueError(f"{name} could not be converted to a numeric array: {err}") from err
    if arr.dtype.kind not in "biuf":
        kind = "complex" if arr.dtype.kind == "c" else f"dtype {arr.dtype}"
        raise ValueError(
            f"{name} has {kind}; real numeric data are required "
            f"(convert with np.asarray({name}, dtype=float))."
        )
    return arr.astype(np.float64, copy=False)


def check_values(a: ArrayLike, name: str) -> np.ndarray:
    """Predictions or targets given to a metric, converted by :func:`as_float64_array` (same arguments and
    result), and refused with a ``ValueError`` when they are empty or hold NaN or inf values."""
    arr = as_float64_array(a, name)
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one value is required.")
    check_finite(arr, name, remedy=_METRIC_REMEDY)
    return arr


def check_same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raise unless two arrays of per-point values have the same shape.

    Parameters
    ----------
    a, b : numpy.ndarray
    name_a, name_b : str
        Their names in the message.

    Raises
    ------
    ValueError
        Naming both shapes, with a hint to flatten when they hold the same number of values.
    """
    if a.shape != b.shape:
        hint = ""
        if a.size == b.size:
            hint = " Flatten both with .ravel() / .reshape(-1) if they hold the same points."
        raise ValueError(
            f"{name_a} has shape {a.shape} but {name_b} has shape {b.shape}; they must match "
            f"(one value per test point).{hint}"
        )


def check_level(level: float, name: str = "level") -> float:
    """A probability strictly between 0 and 1 (an interval's nominal coverage) as a float.

    Parameters
    ----------
    level : float
    name : str
        Name used in the message.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For a non-number, NaN, or a value outside (0, 1); a percentage such as 95 gets a "did you mean 0.95" hint.
    """
    try:
        v = float(level)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number in (0, 1); got {level!r}.") from err
    if not (0.0 < v < 1.0):  # also rejects NaN
        hint = f" Did you mean {v / 100:g}?" if 1.0 < v < 100.0 else ""
        raise ValueError(
            f"{name} must lie strictly between 0 and 1 (e.g. 0.95 for a 95% interval); "
            f"got {level!r}.{hint}"
        )
    return v


def to_numpy(t: torch.Tensor | np.ndarray | float) -> np.ndarray:
    """Detach a tensor to a numpy array (no-op for arrays)."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t)


def unique_record_indices(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Indices of the first occurrence of every distinct (x, y) record, in their original order.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)

    Returns
    -------
    torch.Tensor of shape (U,), dtype long
        ``U ≤ N``; rows that repeat an earlier row exactly (inputs and target) are left out.
    """
    records = torch.cat([X.reshape(X.shape[0], -1), y.reshape(-1, 1).to(X.dtype)], dim=1)
    _, inverse = torch.unique(records, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), X.shape[0], dtype=torch.long, device=X.device)
    first = first.scatter_reduce(0, inverse, torch.arange(X.shape[0], device=X.device), reduce="amin")
    return torch.sort(first).values
