# %% [markdown]
# # lexrag — inference
# "Save & Run All": writes a fallback `submission.csv` first (standard library only), installs
# lexrag offline from the attached wheels, loads whatever artifacts and models are attached,
# answers `test.csv` and replaces the file only with a validated one. Any failure on the way
# leaves the best file so far: the fallback, or the answer without the stage that failed.

# %% tags=["parameters"]
config_path = "kaggle"  # YAML config file or a preset name (kaggle, lexical); None: the defaults
overrides = {}  # {"section.field": value}
queries = None  # queries CSV; None: test.csv from the competition input
artifacts_dir = None  # folder with corpus/, bm25/, ...; None: the resolver (attached datasets on Kaggle)
out_path = None  # None: submission.csv in the working folder
wheels_dir = None  # folder of wheels for the offline install; None: search the inputs
competition = "llm-agentic-legal-information-retrieval"  # its test.csv is preferred over any other among the inputs

# %%
# Standard library only: start the clock, find test.csv, write a fallback submission at once.
import csv
import glob
import os
import sys
import time
from pathlib import Path

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a question longer than the csv module's default field limit is read

STARTED_AT = time.time()
KAGGLE = bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))
for _var in ("LEXRAG_KAGGLE_INPUT", "LEXRAG_KAGGLE_WORKING"):  # an empty value would be the current folder
    if os.environ.get(_var) is not None and not os.environ[_var].strip():
        raise SystemExit(f"error: {_var} is set but empty; unset it (Kaggle's own folder) or give a folder")
if not KAGGLE and (os.environ.get("LEXRAG_KAGGLE_INPUT") or os.environ.get("LEXRAG_KAGGLE_WORKING")):
    raise SystemExit("error: LEXRAG_KAGGLE_INPUT and LEXRAG_KAGGLE_WORKING move Kaggle's folders, which are used only on "
                     "Kaggle (KAGGLE_KERNEL_RUN_TYPE set): to emulate a Kaggle run set KAGGLE_KERNEL_RUN_TYPE=Batch too, "
                     "or unset them for a local run; nothing was written")
INPUT = Path(os.environ.get("LEXRAG_KAGGLE_INPUT", "/kaggle/input"))
for _var in ("LEXRAG_KAGGLE_INPUT", "LEXRAG_KAGGLE_WORKING"):
    if os.path.exists(os.environ.get(_var, "")) and not os.path.isdir(os.environ[_var]):
        raise SystemExit(f"error: {_var} {os.environ[_var]} is a file, not a folder; give the folder it stands for")
WORKING = Path(os.environ.get("LEXRAG_KAGGLE_WORKING", "/kaggle/working")) if KAGGLE else Path(".")


def find(name, under=None):  # either input layout: /kaggle/input/<slug>/ or /kaggle/input/competitions/<slug>/
    root = os.path.realpath(INPUT)  # a link out of the inputs is not followed
    # a bounded depth, not "**": links among the inputs (a -> ..) would send a recursive search round for ever
    found = [p for d in range(7) for p in glob.glob(os.path.join(glob.escape(str(under or INPUT)), *["*"] * d, name))]
    hits = [p for p in found if os.path.realpath(p).startswith(root + os.sep) or under is not None]
    return sorted(hits, key=lambda p: (competition not in p, "competitions" not in p, p.count(os.sep), p))


for _name in ("config_path", "queries", "artifacts_dir", "out_path", "wheels_dir"):  # -y 'queries: 3' is no path
    _value = globals()[_name]
    if _value is not None and not isinstance(_value, (str, os.PathLike)):
        raise SystemExit(f"error: parameter {_name}: expected a path (a string), got {type(_value).__name__} "
                         f"{repr(_value)[:60]} (papermill: -p {_name} PATH); nothing was written")
    if isinstance(_value, str) and not _value.strip():  # an empty shell variable: never the default
        raise SystemExit(f"error: parameter {_name} is empty; leave it out (None) for the default, or give a path; "
                         "nothing was written")
test_csv = Path(queries) if queries else next((Path(p) for p in find("test.csv")), None)
submission = Path(out_path) if out_path else WORKING / "submission.csv"
if queries and not test_csv.is_file():  # a path the user gave: name it, do not look elsewhere
    _what = ("is a folder" if test_csv.is_dir() else "is a FIFO, socket or device, not a file" if os.path.exists(test_csv)
             else "file not found")
    raise SystemExit(f"error: queries {test_csv}: {_what}; nothing was written")
if submission.is_dir():
    raise SystemExit(f"error: out_path {submission} is a folder; give a file name such as {submission / 'submission.csv'}")
if submission.is_symlink() or (os.path.lexists(submission) and not submission.is_file()):  # checked before any write
    raise SystemExit(f"error: out_path {submission} is a link, a FIFO or a device, which the fallback would write through "
                     "or block on; give the path of a plain file")
_up = submission.parent  # the nearest folder above it that exists must be a folder, not a file
while not os.path.lexists(_up) and _up != _up.parent:
    _up = _up.parent
if not _up.is_dir():
    raise SystemExit(f"error: {submission}: {_up} is a file, not a folder"
                     + ("" if out_path else " (the working folder: LEXRAG_KAGGLE_WORKING where emulated)")
                     + "; give a path in a folder; nothing was written")
for _name, _input in (("the queries file", test_csv), ("config_path", config_path)):
    if _input is not None and Path(_input).is_file() and submission.resolve() == Path(_input).resolve():
        raise SystemExit(f"error: out_path {submission} is {_name}: writing it would overwrite the input")
_where = submission.resolve().parent
if KAGGLE and (_where == INPUT.resolve() or INPUT.resolve() in _where.parents):
    raise SystemExit(f"error: {submission} would lie among the inputs ({INPUT}); write it to the working folder")
if any((d / "params.json").is_file() for d in (_where, *_where.parents)):
    raise SystemExit(f"error: {submission} would lie inside an artifact folder (it has a params.json), which a rebuild "
                     "replaces; write it to the working folder")
query_ids = []
if test_csv is not None and test_csv.is_file() and not os.access(test_csv, os.R_OK):
    raise SystemExit(f"error: {test_csv}: cannot be read (permission denied); give this user read access to it or "
                     "another queries file; nothing was written")
if test_csv is not None and test_csv.is_file() and b"\x00" in open(test_csv, "rb").read(4096):
    print(f"{test_csv} is not UTF-8 text (UTF-16? it holds NUL bytes): no fallback written; lexrag names the problem below")
elif test_csv is not None and test_csv.is_file():
    with open(test_csv, newline="", encoding="utf-8-sig", errors="replace") as f:  # a BOM is tolerated
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        col = header.index("query_id") if "query_id" in header else 0
        query_ids = [row[col] for row in reader if len(row) > col and row[col].strip()  # as written: lexrag matches ids exactly
                     and [c.strip().lstrip("\ufeff") for c in row] != header]  # a header repeated by joined files
    try:
        submission.parent.mkdir(parents=True, exist_ok=True)
        answered = False  # an earlier answer (a row with citations) is kept; an earlier fallback is replaced
        if submission.is_file():
            with open(submission, newline="", encoding="utf-8", errors="replace") as f:
                answered = any(len(r) > 1 and r[1].strip() for r in list(csv.reader(f))[1:])
        if answered:  # so a second failed run cannot push the answer out of .prev with its own fallback
            if os.path.lexists(f"{submission}.prev") and not os.path.isfile(f"{submission}.prev"):
                raise SystemExit(f"error: {submission}.prev is not a file (a folder or a link): the earlier answer in "
                                 f"{submission} would be moved there; move it away; nothing was written")
            os.replace(submission, f"{submission}.prev")
            print(f"the earlier {submission} is kept as {submission}.prev")
        with open(submission, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([["query_id", "predicted_citations"], *[[q, ""] for q in query_ids]])
    except OSError as e:  # a read-only or full folder: one line, before any work
        raise SystemExit(f"error: {submission}: cannot be written ({e.strerror or e})"
                         + ("" if out_path else " (the working folder: LEXRAG_KAGGLE_WORKING where emulated)")
                         + "; choose a writable folder for out_path") from None
    print(f"fallback {submission}: {len(query_ids)} queries from {test_csv}")
elif test_csv is not None:
    print(f"{test_csv} is not a regular file (a folder, FIFO or device): no fallback written")
else:
    print("test.csv not found among the inputs yet")

# %%
# Offline install (lexrag is not importable before it): the installer ships in the wheels dataset.
import importlib.util
import subprocess
import sys

INSTALLED = importlib.util.find_spec("lexrag") is not None
FAILED = None  # why the run could not answer; the last cell says so first
if not INSTALLED:
    installer = find("lexrag_install.py", wheels_dir)
    if installer:
        args = [sys.executable, installer[0], "--input", str(INPUT)] + (["--wheels", str(wheels_dir)] if wheels_dir else [])
        r = subprocess.run(args, capture_output=True, text=True)
        print(r.stdout + r.stderr)
        INSTALLED = r.returncode == 0
        importlib.invalidate_caches()
        if not INSTALLED:
            FAILED = "the offline install of lexrag failed (see its output above)"
    else:
        FAILED = "lexrag is not installed and no lexrag_install.py is among the inputs: attach the lexrag-wheels dataset"
        print(FAILED)

# %%
import json
import logging
import traceback

summary = {}
if INSTALLED:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", force=True)
    try:
        from lexrag.kaggle.notebook import run_submission

        summary = run_submission(config_path, overrides, test_csv if test_csv and test_csv.is_file() else None,
                                 artifacts_dir, submission, STARTED_AT)
        print(json.dumps({k: v for k, v in summary.items() if k != "status_table"}, indent=1, default=str))
    except Exception as e:
        from lexrag.errors import disk_error

        if any(c.__name__ == "LexragError" for c in type(e).__mro__):  # a user error: one line names it
            FAILED = str(e)
        elif isinstance(e, OSError) and disk_error(e):  # a full or read-only disk: one line naming the file
            FAILED = disk_error(e, f"a file under {submission.parent} (submission.csv) or the LLM cache folder")
        else:
            traceback.print_exc()
            FAILED = f"{type(e).__name__}: {e}".splitlines()[0]
        print(f"error: {FAILED}")

# %%
# The run's status first (OK / DEGRADED / FAILED and a row per stage the config asks for), then
# checks, with the standard library only, that the file that stays is complete and well formed.
if FAILED or not summary:
    print(f"FAILED: {FAILED or 'the run did not finish'}\n" + (
        "the fallback file (every query id, no citations) is what this notebook leaves to submit" if submission.is_file()
        else f"no {submission} could be written: no readable test.csv among the inputs (attach the competition data)"))
else:
    print(summary["status_table"])
assert submission.is_file(), f"no {submission} was written: no test.csv among the inputs (attach the competition data)"
with open(submission, newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f))
assert rows and rows[0] == ["query_id", "predicted_citations"], f"{submission}: bad header {rows[:1]}"
comparable = query_ids and not any("\ufffd" in q for q in query_ids)  # ids that were not UTF-8 are re-decoded by lexrag
assert not comparable or [r[0] for r in rows[1:]] == query_ids, f"{submission}: the query ids differ from {test_csv}"
assert all(len(r) == 2 for r in rows), f"{submission}: a row without two fields"
print(f"{'FAILED' if FAILED or not summary else summary['status']} {submission}: {len(rows) - 1} rows, "
      f"{sum(1 for r in rows[1:] if r[1])} with citations, {time.time() - STARTED_AT:.0f}s since the first cell")
