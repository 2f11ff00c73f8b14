"""The one place that knows where inputs, artifacts and outputs live, locally and on Kaggle.

On Kaggle (``KAGGLE_KERNEL_RUN_TYPE`` is set) attached datasets, models and competition files are
under the input root and outputs go to the working folder.  Kaggle mounts inputs in two layouts:
``/kaggle/input/<slug>/`` (older notebooks) and ``/kaggle/input/competitions/<slug>/``,
``/kaggle/input/datasets/<owner>/<slug>/``, ``/kaggle/input/models/<owner>/<model>/<framework>/
<variation>/<version>/``; the resolver finds artifacts by their ``params.json``, models by their
``config.json`` (or ``modules.json``) and name, files by name, at any depth up to :data:`MAX_DEPTH`,
in either layout, and names what it searched when something is missing.  Locally the folders come
from the config (``paths.*``), else ``./data``, ``./artifacts`` and the current folder; a run given
one artifacts folder loads through :meth:`Paths.local` (every artifact at ``<folder>/<name>``), so
a run loads through one resolver whichever way it was started (:func:`paths_for`).

``LEXRAG_KAGGLE_INPUT`` and ``LEXRAG_KAGGLE_WORKING`` move the two Kaggle roots (an emulated
Kaggle run in the tests).  No other module names a Kaggle path.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from lexrag.config import PathsConfig
from lexrag.errors import ArtifactError, ArtifactMissing, ConfigError, LexragError
from lexrag.artifacts import read_params_json, rebuild_hint
from lexrag.io.copies import choose_set
from lexrag.models.paths import find_model

__all__ = ["on_kaggle", "Paths", "resolve_paths", "paths_for", "kaggle_input", "kaggle_working", "MAX_DEPTH", "walk_dirs"]

log = logging.getLogger(__name__)

MAX_DEPTH = 7  # /kaggle/input/models/<owner>/<model>/<framework>/<variation>/<version>/<subfolder>

_SAID: set[str] = set()  # warnings this process has logged: a run walks the inputs several times, each said once


def _warn_once(msg: str, *args) -> None:
    """``log.warning(msg, *args)`` the first time this process says that line (it names the path it
    is about): the inputs are walked once per artifact looked for, and a stray file or a choice
    among copies is news only the first time."""
    text = msg % args if args else msg
    if text not in _SAID:
        _SAID.add(text)
        log.warning("%s", text)


def _root(variable: str, default: str) -> Path:
    """A Kaggle root, moved by ``variable`` where set; set but empty it is refused (an empty path
    would be the current folder, searched or written as if it were Kaggle's)."""
    value = os.environ.get(variable)
    if value is None:
        return Path(default)
    if not value.strip():
        from lexrag.errors import ConfigError

        raise ConfigError(f"{variable} is set but empty; unset it (Kaggle's {default}) or give a folder")
    return Path(value)


def kaggle_input() -> Path:
    root = _root("LEXRAG_KAGGLE_INPUT", "/kaggle/input")
    if root.exists() and not root.is_dir():  # searched, never written: the working folder is checked where it is written
        raise ConfigError(f"LEXRAG_KAGGLE_INPUT {root} is a file, not a folder; give the folder it stands for (Kaggle's "
                          "/kaggle/input)")
    return root


def kaggle_working() -> Path:
    return _root("LEXRAG_KAGGLE_WORKING", "/kaggle/working")


def on_kaggle() -> bool:
    return bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))


class InputNotFound(LexragError, FileNotFoundError):
    """A competition file, model folder or wheel folder that no attached input holds."""


def walk_dirs(root: Path, max_depth: int = MAX_DEPTH) -> Iterator[Path]:
    """Every folder under ``root`` down to ``max_depth`` levels, breadth first, sorted by name;
    folders holding model weights or data are listed but not descended into past what is needed."""
    level = [root] if root.is_dir() else []
    seen: set[tuple[int, int]] = set()  # every folder once: a link to "." or a loop of links cannot multiply the walk
    inside = os.path.realpath(root) + os.sep  # a link that leads out of the inputs is not followed
    for _ in range(max_depth + 1):
        nxt: list[Path] = []
        for d in level:
            try:
                st = os.stat(d)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            yield d
            try:
                subs = sorted(e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=True) and not e.name.startswith("."))
            except OSError:
                continue
            nxt.extend(Path(s) for s in subs if os.path.realpath(s).startswith(inside))
        level = nxt


@dataclass(frozen=True)
class Paths:
    input_dir: Path
    artifacts_dir: Path
    working_dir: Path
    kaggle: bool

    @classmethod
    def local(cls, folder: str | Path, cfg: PathsConfig | None = None) -> "Paths":
        """The resolver over one local artifacts folder (``--artifacts``, a notebook's
        ``artifacts_dir``): each artifact at ``folder/<name>``, models where their setting names
        them, the working folder from the config (else the current one)."""
        cfg = cfg or PathsConfig()
        return cls(input_dir=Path(cfg.input_dir or "data"), artifacts_dir=Path(folder),
                   working_dir=Path(cfg.working_dir or "."), kaggle=False)

    @property
    def output_dir(self) -> Path:
        """Where builds write: the working folder on Kaggle (inputs are read-only), else the
        artifacts folder."""
        return self.working_dir if self.kaggle else self.artifacts_dir

    def built(self, name: str) -> Path:
        """An artifact to build on: the one this session wrote (``output_dir/name``), else an
        attached one."""
        own = self.output_dir / name
        return own if (own / "params.json").is_file() else self.artifact(name)

    def _roots(self) -> list[Path]:
        roots = [self.artifacts_dir]
        if self.kaggle and self.input_dir.parent != self.artifacts_dir and self.input_dir != self.artifacts_dir:
            roots.append(self.input_dir)
        return roots

    def input_file(self, name: str) -> Path:
        """A competition file (``test.csv``): the input folder; on Kaggle also any input folder
        holding it (a competition folder first)."""
        direct = self.input_dir / name
        if not self.kaggle:
            return direct
        dirs = [d for root in self._roots() for d in walk_dirs(root, 4)]
        hits = [d / name for d in dirs if (d / name).is_file()]
        if direct.is_file():  # the input folder's own; another input holding one is named, not passed over in silence
            others = [h for h in hits if h.resolve() != direct.resolve()]
            if others:
                _warn_once("%s: using the input folder's %s; %d other inputs hold one too (%s): set paths.input_dir to "
                           "choose", direct, name, len(others), ", ".join(map(str, others[:5])))
            return direct
        if not hits:
            folders = [d / name for d in dirs if (d / name).is_dir()]
            if folders:  # the name is there, as a folder: say so rather than "not found"
                raise InputNotFound(f"{folders[0]} is a folder, not a file: {name} must be the competition's CSV file "
                                    "(attach the competition data, or give the file with --queries)")
            raise InputNotFound(f"{name} not found: searched {self.input_dir} and every folder under "
                                f"{', '.join(map(str, self._roots()))} (4 levels); attach the competition data")
        hits.sort(key=lambda p: ("competitions" not in p.parts, len(p.parts), str(p)))
        if len(hits) > 1:  # which one is the competition's cannot be known for sure: say which was taken
            _warn_once("%d inputs hold %s (%s); using %s (a competition folder first, then the shallowest); set "
                       "paths.input_dir to choose", len(hits), name, ", ".join(map(str, hits[:5])), hits[0])
        return hits[0]

    def find_artifacts(self, name: str) -> list[Path]:
        """Every folder whose ``params.json`` says it is artifact ``name``: ``<artifacts_dir>/<name>``,
        then (on Kaggle, or locally one level down) every folder under the artifacts folder."""
        return self._artifact_folders([name])[name]

    def _artifact_folders(self, names: list[str]) -> dict[str, list[Path]]:
        """:meth:`find_artifacts` for several names in one walk of the inputs."""
        out: dict[str, list[Path]] = {n: [] for n in names}
        depth = MAX_DEPTH - 2 if self.kaggle else 1
        inside = os.path.realpath(self.artifacts_dir) + os.sep
        for d in walk_dirs(self.artifacts_dir, depth):
            if (d / "params.json").is_file() and os.path.realpath(d / "params.json").startswith(inside):
                name = _artifact_name(d / "params.json")
                if name in out and d not in out[name]:
                    out[name].append(d)
        for name, found in out.items():
            direct = self.artifacts_dir / name
            if direct in found:
                found.remove(direct)
                found.insert(0, direct)
        return out

    def artifact(self, name: str) -> Path:
        """Folder of artifact ``name``: ``<artifacts_dir>/<name>``; on Kaggle any attached folder
        whose ``params.json`` says it is that artifact (in either layout)."""
        direct = self.artifacts_dir / name
        if (direct / "params.json").is_file() or not self.kaggle:
            return direct
        found = self.find_artifacts(name)
        if len(found) > 1:
            _warn_once("%d inputs hold artifact %r (%s); using %s", len(found), name, ", ".join(map(str, found)), found[0])
        if found:
            return found[0]
        read = [(d / "params.json", *_read(d / "params.json")) for d in walk_dirs(self.artifacts_dir, MAX_DEPTH - 2)
                if (d / "params.json").is_file()]
        have = sorted({doc.get("artifact") for _, doc, _ in read if isinstance(doc.get("artifact"), str)})
        dataset = f"lexrag-{name.replace('_', '-')}"
        searched = (f"artifact {name!r} not found: searched {self.artifacts_dir} ({MAX_DEPTH - 2} levels) for a "
                    f"params.json of artifact {name!r}; found {', '.join(have) or 'no lexrag artifacts'}")
        bad = [(p, why) for p, _, why in read if why]
        ours = [(p, why) for p, why in bad if p.parent.name == name or dataset in p.parts]
        if ours:  # the artifact's own folder, its params.json damaged: attaching it again would not help
            raise ArtifactError(f"{searched}; {ours[0][0]} cannot be read ({ours[0][1]}): that copy of {dataset} is "
                                f"damaged; {rebuild_hint(name)} (and upload it again)")
        if bad:  # a params.json that cannot be read may be this artifact's: both fixes, neither claimed
            raise ArtifactMissing(f"{searched}; {bad[0][0]} cannot be read ({bad[0][1]}): if that is the {dataset} "
                                  f"dataset's, it is damaged ({rebuild_hint(name)}); else attach the {dataset} dataset")
        raise ArtifactMissing(f"{searched}; attach the {dataset} dataset")

    def artifact_set(self, names: list[str], notes: list[str] | None = None) -> dict[str, Path]:
        """The folders of artifacts ``names`` (``corpus`` among them) chosen as one set: where
        several inputs hold an artifact, the set built over one corpus, as
        :func:`lexrag.io.copies.choose_set` chooses it.  Every copy left out is logged once with
        the reason, and each choice among copies is added to ``notes`` (for the run status).
        Names no input holds are left out of the result (:meth:`artifact` then names them)."""
        notes = notes if notes is not None else []
        found = self._artifact_folders(names) if self.kaggle else {n: [] for n in names}
        if not self.kaggle or all(len(v) <= 1 for v in found.values()):
            return {n: v[0] for n, v in found.items() if v}
        meta = {d: _params(d / "params.json") for v in found.values() for d in v}
        return choose_set(names, found, meta, notes, _warn_once)

    def model(self, name: str, setting: str = "model") -> Path:
        """A model folder: ``name`` holds candidates (``a | b``), each a path, a Kaggle Model
        handle, a folder name or a config.json identity, searched among the inputs on Kaggle
        (:func:`lexrag.models.paths.find_model`); ``setting`` names the config field in a miss."""
        return find_model(name, self._roots(), setting, search=self.kaggle)

    def wheels_dir(self) -> Path:
        """The folder holding the lexrag wheel among the inputs."""
        for d in walk_dirs(self.artifacts_dir, 4):
            if any(d.glob("lexrag-*.whl")):
                return d
        raise InputNotFound(f"no lexrag wheel under {self.artifacts_dir} (4 levels): attach the lexrag-wheels dataset")


def _read(params: Path) -> tuple[dict, str | None]:
    """A params.json among the inputs as a dict, read as loading reads it
    (:func:`lexrag.artifacts.read_params_json`), and why it cannot be read (None: it can); any
    stray file of that name (not JSON, nested too deep, a FIFO, not an object) reads as empty."""
    try:
        doc = read_params_json(params)
    except ArtifactError as e:
        return {}, str(e).split(": ", 1)[-1][:160]
    return (doc, None) if isinstance(doc, dict) else ({}, f"a JSON {type(doc).__name__}, not an object")


def _params(params: Path) -> dict:
    """:func:`_read`, with one log line naming a file that cannot be read."""
    doc, why = _read(params)
    if why:
        _warn_once("skipped %s (%s): not readable as a lexrag artifact's params.json (if it is one, that copy is "
                   "damaged: rebuild it)", params, why)
    return doc


def _artifact_name(params: Path) -> str | None:
    """The artifact a params.json says it is, or None for any other file of that name (an
    unrelated dataset's params.json whose "artifact" is a list, say)."""
    name = _params(params).get("artifact")
    return name if isinstance(name, str) else None


def resolve_paths(cfg: PathsConfig | None = None) -> Paths:
    cfg = cfg or PathsConfig()
    kaggle = on_kaggle()
    if kaggle:
        root = kaggle_input()
        input_dir = Path(cfg.input_dir) if cfg.input_dir else root / "competitions" / (cfg.competition or "")
        if not cfg.input_dir and not input_dir.is_dir() and (root / (cfg.competition or "")).is_dir():
            input_dir = root / (cfg.competition or "")
        artifacts = Path(cfg.artifacts_dir) if cfg.artifacts_dir else root
        working = Path(cfg.working_dir) if cfg.working_dir else kaggle_working()
    else:
        input_dir = Path(cfg.input_dir or "data")
        artifacts = Path(cfg.artifacts_dir or "artifacts")
        working = Path(cfg.working_dir or ".")
    return Paths(input_dir=input_dir, artifacts_dir=artifacts, working_dir=working, kaggle=kaggle)


def paths_for(artifacts_dir: str | Path | None, cfg: PathsConfig | None = None) -> Paths:
    """The resolver a run loads through: the given artifacts folder, else the config's (on Kaggle
    every attached input)."""
    return Paths.local(artifacts_dir, cfg) if artifacts_dir else resolve_paths(cfg)
