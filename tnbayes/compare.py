"""``tnbayes compare``: models × datasets × splits → a table of accuracy, calibration and time.

Each (model, dataset, split) run fits a fresh model on the split's training data, computes the
predictive distribution of the test targets and scores it with :func:`tnbayes.metrics.evaluate`.
The summary gives mean ± standard error over splits. Models are looked up by name in the model
registry (:func:`tnbayes.register_model` plugs in new ones); an estimator instance is also accepted
and cloned per run from its ``get_params()``; a factory ``f(run) -> estimator`` builds one per run
from the run's split and the models fitted before it in the same split (per-split seeds, settings
shared between models).

What benchmarks need beside the default protocol is a keyword each: ``load`` (their own splits),
``predictive=False`` (models fitted without a posterior), ``columns`` (their own metrics per run) and
``on_split`` (write or print as each split finishes). Part of the evaluation layer, beside
:mod:`tnbayes.metrics`; no axis of its own.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from tnbayes import datasets as _datasets
from tnbayes import metrics
from tnbayes._warnings import warn_user
from tnbayes.models.registry import make_model

__all__ = ["compare", "ComparisonResult", "RunContext", "parse_splits", "SUMMARY_METRICS"]

#: metrics summarised in the comparison table (all per-point means over the test set)
SUMMARY_METRICS = ("rmse", "nlpd", "coverage_95", "crps", "fit_seconds", "predict_seconds")


def parse_splits(spec: str | int | Sequence[int] | None, n_splits: int | None,
                 default_random_splits: int = 5) -> list[int]:
    """Turn a split specification into a list of split indices.

    Parameters
    ----------
    spec : str, int, sequence of int or None
        ``None``/``"all"``: every fixed split (``default_random_splits`` random ones when the dataset
        has none); ``"0:5"``: a range; ``"0,3,7"``: a list; an int: that one split.
    n_splits : int or None
        Number of fixed splits of the dataset (None when it has none).

    Returns
    -------
    list of int
    """
    if spec is None or spec == "all":
        return list(range(n_splits if n_splits else default_random_splits))
    if isinstance(spec, int):
        indices = [spec]
    elif isinstance(spec, str):
        spec = spec.strip()
        if ":" in spec:
            start, stop = spec.split(":", 1)
            stop_i = int(stop) if stop else (n_splits or default_random_splits)
            indices = list(range(int(start or 0), stop_i))
        else:
            indices = [int(s) for s in spec.split(",") if s.strip()]
    else:
        indices = [int(s) for s in spec]
    if not indices:
        raise ValueError(f"split specification {spec!r} selects no split.")
    if n_splits is not None:
        bad = [i for i in indices if not 0 <= i < n_splits]
        if bad:
            raise ValueError(f"splits {bad} are out of range: this dataset has {n_splits} fixed splits "
                             f"(0..{n_splits - 1}).")
    return indices


@dataclass
class RunContext:
    """One (dataset, split, model) run of :func:`compare`, as model factories and ``columns`` see it.

    Attributes
    ----------
    dataset : str
        Dataset name as given to :func:`compare`.
    split : int
        Split index.
    label : str
        Label of the model of this run.
    data : object
        The split: ``X_train`` (n, D), ``y_train`` (n,), ``X_test`` (m, D), ``y_test`` (m,) and whatever
        else the loader provides (e.g. a validation part).
    fitted : dict of str -> estimator
        The models fitted before this one on the same split, by label, in the order of ``models``
        (failed runs are absent).
    """

    dataset: str
    split: int
    label: str
    data: Any
    fitted: dict[str, Any]


@dataclass
class ComparisonResult:
    """Per-run rows and their summary.

    Attributes
    ----------
    rows : list of dict
        One per (dataset, model, split): every metric of :func:`tnbayes.metrics.evaluate` plus
        ``fit_seconds`` and ``predict_seconds``.
    calibration : dict
        ``(dataset, model) -> (nominal, observed)`` reliability curve pooled over splits.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    calibration: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def summary(self, metric_names: Sequence[str] = SUMMARY_METRICS) -> list[dict[str, Any]]:
        """Mean and standard error over splits per (dataset, model).

        Returns
        -------
        list of dict
            Keys ``dataset``, ``model``, ``n_splits`` and ``<metric>_mean`` / ``<metric>_se`` (NaN for
            a single split). Runs that failed (``error`` rows) are left out.
        """
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in self.rows:
            if "error" in row:
                continue
            groups.setdefault((row["dataset"], row["model"]), []).append(row)
        out = []
        for (dataset, model), rows in groups.items():
            entry: dict[str, Any] = {"dataset": dataset, "model": model, "n_splits": len(rows)}
            for name in metric_names:
                values = np.array([r[name] for r in rows if name in r], dtype=float)
                if values.size == 0:
                    continue
                entry[f"{name}_mean"] = float(values.mean())
                entry[f"{name}_se"] = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
            out.append(entry)
        return out

    def to_markdown(self, metric_names: Sequence[str] = SUMMARY_METRICS) -> str:
        """The summary as a Markdown table (mean ± standard error over splits)."""
        summary = self.summary(metric_names)
        header = ["dataset", "model", "splits", *metric_names]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for entry in summary:
            cells = [entry["dataset"], entry["model"], str(entry["n_splits"])]
            for name in metric_names:
                if f"{name}_mean" not in entry:
                    cells.append("–")
                    continue
                se = entry[f"{name}_se"]
                cells.append(_fmt(entry[f"{name}_mean"]) + ("" if math.isnan(se) else f" ± {_fmt(se)}"))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def write(self, out_dir: str | os.PathLike, prefix: str = "") -> dict[str, str]:
        """Write ``runs.csv``, ``summary.csv``, ``summary.json`` and ``summary.md`` into ``out_dir``.

        Parameters
        ----------
        out_dir : path
            Folder, created when missing.
        prefix : str
            Put before every file name (``"yacht_"`` → ``yacht_runs.csv`` …), so several results can
            share a folder.

        Returns
        -------
        dict of kind -> path
        """
        os.makedirs(out_dir, exist_ok=True)
        paths = {k: os.path.join(out_dir, prefix + f) for k, f in
                 [("runs", "runs.csv"), ("summary_csv", "summary.csv"), ("summary_json", "summary.json"),
                  ("summary_md", "summary.md")]}
        _write_csv(paths["runs"], self.rows)
        summary = self.summary()
        _write_csv(paths["summary_csv"], summary)
        with open(paths["summary_json"], "w") as fh:
            json.dump({"summary": summary, "runs": self.rows}, fh, indent=2)
        with open(paths["summary_md"], "w") as fh:
            fh.write(self.to_markdown() + "\n")
        return paths


def _fmt(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = abs(value)
    if magnitude >= 1000 or magnitude < 1e-3:
        return f"{value:.3g}"
    return f"{value:.4f}" if magnitude < 1 else f"{value:.3f}"


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def _is_factory(spec: Any) -> bool:
    """A plain callable (not an estimator class or instance): called per run with its :class:`RunContext`."""
    return callable(spec) and not hasattr(spec, "fit")


def _model_factory(spec: Any, kwargs: dict[str, Any]) -> Callable[[RunContext], Any]:
    """``run -> unfitted estimator`` for a registered name, an estimator instance (cloned) or a factory."""
    if isinstance(spec, str):
        make_model(spec, **kwargs)  # fail fast on unknown names / bad arguments
        return lambda run: make_model(spec, **kwargs)
    if hasattr(spec, "get_params") and hasattr(spec, "fit"):
        params = {**spec.get_params(), **kwargs}
        return lambda run: type(spec)(**params)
    if _is_factory(spec):
        return spec
    raise TypeError(f"models must be registered names, estimator instances or factories run -> estimator; "
                    f"got {spec!r}.")


def _labelled_models(models: Any) -> list[tuple[str, Any]]:
    """(label, spec) pairs with unique labels: dict keys, names, or class names numbered on repeats."""
    if isinstance(models, dict):
        return [(str(k), v) for k, v in models.items()]
    if isinstance(models, str) or hasattr(models, "fit") or _is_factory(models):
        models = [models]
    pairs, seen = [], {}
    for spec in models:
        if isinstance(spec, str):
            base = spec
        elif _is_factory(spec):
            base = getattr(spec, "__name__", type(spec).__name__)
        else:
            base = type(spec).__name__
        seen[base] = seen.get(base, 0) + 1
        pairs.append((base if seen[base] == 1 else f"{base}#{seen[base]}", spec))
    return pairs


def _load_registered(dataset: str, split: int) -> Any:
    return _datasets.load(dataset, split=split)


def compare(
    models: Iterable[Any],
    datasets: Iterable[str],
    splits: str | int | Sequence[int] | None = None,
    *,
    model_kwargs: dict[str, dict[str, Any]] | None = None,
    out_dir: str | os.PathLike | None = None,
    figures: bool = True,
    progress: bool = True,
    on_error: str = "raise",
    load: Callable[[str, int], Any] | None = None,
    predictive: bool = True,
    columns: Callable[[RunContext, Any, Any], dict[str, Any]] | None = None,
    on_split: Callable[[str, int, list[dict[str, Any]]], None] | None = None,
) -> ComparisonResult:
    """Fit and score models on datasets over splits.

    Every split is loaded once; its models are fitted in the order given, each on the split's
    training rows, and scored on its test rows.

    Parameters
    ----------
    models : str, estimator, factory, iterable of them, or dict of label -> one of them
        Registered model names (see :func:`tnbayes.list_models`), unfitted estimators (cloned per
        run) or factories: plain callables ``f(run) -> unfitted estimator`` called once per run with
        its :class:`RunContext` (per-split seeds; settings taken from a model fitted earlier in the
        split, ``run.fitted[label]``). Repeated names are numbered (``HilbertGP#2``); a dict sets
        the labels.
    datasets : str or iterable of str
        Dataset names (see :func:`tnbayes.datasets.list_datasets`), or any names ``load`` knows.
    splits : str, int, sequence of int, optional
        See :func:`parse_splits`; default every fixed split. With ``load`` the splits are the
        loader's: pass them explicitly (the default is then splits 0..4).
    model_kwargs : dict of model name -> dict, optional
        Extra constructor arguments per model name.
    out_dir : path, optional
        When given, tables (see :meth:`ComparisonResult.write`) and figures are written there.
    figures : bool
        Write a calibration figure per dataset and, for 1-D data, a predictive-band figure of split 0.
    progress : bool
        Show a tqdm progress bar.
    on_error : {"raise", "record"}
        ``"record"`` keeps going when one fit or prediction fails: the run is stored with an
        ``error`` message (and left out of the summary) and a warning is issued.
    load : callable (dataset, split) -> data, optional
        Loads one split instead of ``tnbayes.datasets.load(dataset, split=split)``: any object with
        ``X_train`` (n, D), ``y_train`` (n,), ``X_test`` (m, D) and ``y_test`` (m,) — e.g. a
        benchmark's own random splits.
    predictive : bool
        Compute ``posterior(X_test)`` and the metrics of :func:`tnbayes.metrics.evaluate` (and the
        calibration curves). False for models fitted without a posterior: rows then hold only
        ``fit_seconds`` and what ``columns`` adds.
    columns : callable (run, fitted model, posterior or None) -> dict, optional
        Extra columns of each run's row (a benchmark's own metrics), computed after scoring and not
        timed.
    on_split : callable (dataset, split, rows) -> None, optional
        Called when every model of a split has run, with that split's rows (to print or to save a
        long run as it goes).

    Returns
    -------
    ComparisonResult
    """
    model_kwargs = {k.lower(): v for k, v in (model_kwargs or {}).items()}
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record'; got {on_error!r}.")
    labelled = _labelled_models(models)
    names = {spec.lower() for _, spec in labelled if isinstance(spec, str)}
    unused = set(model_kwargs) - names
    if unused:
        raise ValueError(f"model_kwargs given for {sorted(unused)}, which are not among the models {sorted(names)}.")
    factories = [(label, _model_factory(spec, model_kwargs.get(spec.lower(), {}) if isinstance(spec, str) else {}))
                 for label, spec in labelled]
    dataset_names = [datasets] if isinstance(datasets, str) else list(datasets)
    if not factories or not dataset_names:
        raise ValueError("compare needs at least one model and one dataset.")
    load_split = load or _load_registered
    plan = []
    for name in dataset_names:
        # a custom loader defines its own splits; only the registry's fixed splits bound the indices
        n_splits = _datasets.info(name).get("n_splits") if load is None else None
        plan.extend((name, s) for s in parse_splits(splits, n_splits))
    result = ComparisonResult()
    pooled: dict[tuple[str, str], tuple[list[np.ndarray], list[Any]]] = {}
    band_data: dict[str, list[tuple[str, Any, Any]]] = {}

    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan) * len(factories), disable=not progress, desc="compare")
    for dataset, split in plan:
        data = load_split(dataset, split)
        if data.y_test is None:
            raise ValueError(f"dataset {dataset!r} has no test targets, so it cannot be scored.")
        fitted: dict[str, Any] = {}
        split_rows: list[dict[str, Any]] = []
        for label, factory in factories:
            bar.set_postfix_str(f"{dataset} split {split} {label}")
            run = RunContext(dataset=dataset, split=split, label=label, data=data, fitted=fitted)
            row: dict[str, Any] = {"dataset": dataset, "model": label, "split": split,
                                   "n_train": len(data.y_train), "n_test": len(data.y_test)}
            post = None
            try:
                model = factory(run)
                t0 = time.perf_counter()
                model.fit(data.X_train, data.y_train)
                t1 = time.perf_counter()
                if predictive:
                    post = model.posterior(data.X_test)
                    t2 = time.perf_counter()
                    row.update(metrics.evaluate(post, data.y_test, y_train=data.y_train))
                extra = columns(run, model, post) if columns is not None else {}
            except Exception as err:  # noqa: BLE001 - reported per run when on_error="record"
                if on_error == "raise":
                    raise
                warn_user(f"compare: {label} on {dataset} split {split} failed: {err}", RuntimeWarning)
                row["error"] = f"{type(err).__name__}: {err}"
                result.rows.append(row)
                split_rows.append(row)
                bar.update()
                continue
            row["fit_seconds"] = t1 - t0
            if predictive:
                row["predict_seconds"] = t2 - t1
            row.update(extra)
            result.rows.append(row)
            split_rows.append(row)
            fitted[label] = model
            if post is not None:
                ys, posts = pooled.setdefault((dataset, label), ([], []))
                ys.append(np.asarray(data.y_test, dtype=float))
                posts.append(post)
                if figures and out_dir is not None and split == plan[0][1] and data.X_train.shape[1] == 1:
                    band_data.setdefault(dataset, []).append((label, model, data))
            bar.update()
        if on_split is not None:
            on_split(dataset, split, split_rows)
    bar.close()
    for key, (ys, posts) in pooled.items():
        mean = np.concatenate([p.mean.detach().cpu().numpy() for p in posts])
        std = np.concatenate([p.stddev.detach().cpu().numpy() for p in posts])
        result.calibration[key] = metrics.calibration_curve(np.concatenate(ys), mean, std)
    if out_dir is not None:
        result.write(out_dir)
        if figures:
            _write_figures(result, band_data, out_dir)
    return result


def _write_figures(result: ComparisonResult, band_data: dict[str, list[tuple[str, Any, Any]]],
                   out_dir: str | os.PathLike) -> None:
    from tnbayes.plotting import plot_calibration, plot_predictive_band, save_figure

    for dataset in sorted({d for d, _ in result.calibration}):
        curves = {m: c for (d, m), c in result.calibration.items() if d == dataset}
        ax = plot_calibration(curves, title=f"{dataset}: calibration (pooled over splits)")
        save_figure(ax, os.path.join(out_dir, f"calibration_{_safe(dataset)}.png"))
    for dataset, entries in band_data.items():
        for label, model, data in entries:
            lo = min(data.X_train.min(), data.X_test.min())
            hi = max(data.X_train.max(), data.X_test.max())
            grid = np.linspace(lo, hi, 400).reshape(-1, 1)
            ax = plot_predictive_band(grid, model.posterior(grid), x_train=data.X_train, y_train=data.y_train,
                                      x_test=data.X_test, y_test=data.y_test, levels=(0.68, 0.95), label=label)
            ax.set_title(f"{dataset}: {label} predictive bands")
            save_figure(ax, os.path.join(out_dir, f"bands_{_safe(dataset)}_{_safe(label)}.png"))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
