"""``python -m llmpdb open FILE`` — a prompt on a saved ``snapshot`` or ``dump``, in a process without the model.

Usage::

    python -m llmpdb open llmpdb-snapshot-4242-1.safetensors
    python -m llmpdb open --yes big.safetensors      (no question above the size limit; or --max-mib N)
    (llmpdb) shapes                 the saved tensors, by the paths they had (outputs.logits ...)
    (llmpdb) stack-model            the module stack saved at the stop (a record: the frames are not live)
    (llmpdb) kv                     the saved KV cache metadata
    (llmpdb) p outputs.logits[0, -1].argmax()

The file is read by ``files.safetensors_file`` (header validated by ``inspect.checkpoint_guard`` before
any data is read; the records in ``__metadata__`` are JSON, rebuilt by ``inspect.saved_records`` into
known record classes only): nothing in it is executed or unpickled, and nothing read from it (nor its
name) ever becomes source text: the prompt is an llmpdb debugger stopped in a frame of one constant
template, whose variables are the saved top-level names (objects in its namespace, nested back from their
paths by ``inspect.tensor_paths.nest_paths``; a path with a dunder or reserved part is refused in one
line). Text from the file is shown with control characters escaped. The tensors are mapped on the CPU,
not read: a tensor's pages come from disk when it is used. Above ``--max-mib`` (default 1024,
``LLMPDB_OPEN_MAX_MIB``) of tensors ``open`` asks first; with nobody to answer it refuses in one line.
``c`` or ``q`` ends.
"""

from __future__ import annotations

import builtins
import keyword
import linecache
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ..commands._command import CommandError, command, parse_args
from ..commands.kv import parse_kv_args
from ..files.safetensors_file import CheckpointError, read_safetensors
from ..inspect.checkpoint_guard import load_json
from ..inspect.gc_paused import gc_paused
from ..inspect.saved_records import MAX_DEPTH, records_from_json
from ..inspect.tensor_paths import nest_paths
from ..render.kv import render_cache, render_layer
from ..render.modules import render_model_stack
from ..units import human_bytes, plural

__all__ = ["open_main", "SavedStop", "load_saved", "OPEN_USAGE"]

OPEN_USAGE = ("usage: python -m llmpdb open [--yes] [--max-mib N] FILE   (a file written by `snapshot` or "
              "`dump`; --yes: no question above the size limit)")
DEFAULT_MAX_MIB = 1024.0
_TEMPLATE = "# a prompt on a saved file: its names are this frame's variables\n_llmpdb_enter(_llmpdb_frame())\n"
_CODE = compile(_TEMPLATE, "<llmpdb open>", "exec")  # the only code that runs: nothing from the file in it
_MAX_SHOWN = 200


def shown(value: Any, limit: int = _MAX_SHOWN) -> str:
    """Usage: ``shown(text)``; one line of text from a file: control characters escaped, long text cut."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass
class SavedStop:
    """What a file holds: the tensors by path, and the records of a snapshot (empty for a dump)."""

    path: str
    tensors: dict[str, Any]
    kind: str = "file"
    location: dict = field(default_factory=dict)
    header: str | None = None
    stack: tuple = ()
    current: int = 0
    root_names: dict = field(default_factory=dict)
    kv: dict | None = None
    kv_report: Any = None
    dims: Any = None           # a DimNamer of the sizes `shapes` named at the stop (heads, kv_heads, ...)
    doc: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        loc = self.location
        if not loc:
            return "?"
        rank = f" r{shown(loc['rank'], 20)}" if loc.get("rank") is not None else ""
        return (f"{shown(loc.get('file', '?'))}:{shown(loc.get('line', '?'), 20)} {shown(loc.get('function', '?'))}()"
                f"{rank} at {shown(loc.get('time', '?'), 40)}")


def _printable(value: Any, depth: int = 0) -> Any:
    """The document with every string's control characters escaped (records are shown, never obeyed);
    ``ValueError`` past ``MAX_DEPTH`` levels."""
    if depth > MAX_DEPTH:
        raise ValueError(f"records nested more than {MAX_DEPTH} deep")
    if isinstance(value, str):
        return value if value.isprintable() else shown(value, 4096)
    if isinstance(value, list):
        return [_printable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_printable(k, depth + 1): _printable(v, depth + 1) for k, v in value.items()}
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _saved_dims(record: Any) -> Any:
    """The snapshot's ``dims`` record as a DimNamer (names of word characters, sizes plain ints), else None."""
    from ..inspect.dims import DimNamer
    if not isinstance(record, dict) or not isinstance(record.get("sizes"), list):
        return None
    sizes = tuple((n, v) for n, v in (p for p in record["sizes"][:64] if isinstance(p, list) and len(p) == 2)
                  if isinstance(n, str) and n.isidentifier() and len(n) <= 40
                  and type(v) is int and 0 < v < 2 ** 62)
    if not sizes:
        return None
    source = shown(_text(record.get("source")) or "", 200)
    kv_name = record.get("kv_name") if record.get("kv_name") in ("", "kv_heads", "heads") else ""
    return DimNamer(sizes, f"{source} (saved at the stop)" if source else "the sizes saved at the stop", None,
                    frozenset(), kv_name)


def load_saved(path: str, approve=None) -> SavedStop:
    """Usage: ``load_saved("x.safetensors")``; ``CheckpointError`` (one line) for a bad file or bad records.
    The tensors are mapped (``read_safetensors(mapped=True)``); ``approve`` is passed on to it."""
    tensors, metadata = read_safetensors(path, mapped=True, approve=approve)
    name = shown(os.path.basename(path))
    saved = SavedStop(path, tensors)
    raw = metadata.get("llmpdb")
    if raw is None:
        return saved
    doc = load_json(raw.encode("utf-8"), name, "llmpdb record")
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith("llmpdb-snapshot-"):
        raise CheckpointError(f"{name}: refused: its llmpdb record is not a snapshot document")
    aliases = doc.get("aliases")  # paths: matched to the header's names, shown only through shown()
    try:
        doc = _printable({k: v for k, v in doc.items() if k != "aliases"})
    except ValueError as exc:
        raise CheckpointError(f"{name}: refused: its llmpdb record is damaged ({exc})") from None
    doc["aliases"] = aliases
    saved.doc = doc
    saved.kind = _text(doc.get("kind")) or "file"
    saved.location = doc.get("location") if isinstance(doc.get("location"), dict) else {}
    saved.header = _text(doc.get("header"))
    try:
        saved.stack = records_from_json(doc.get("stack") or [])
        saved.current = int(doc.get("current") or 0)
        names = records_from_json(doc.get("root_names") or {"dict": []})
        saved.root_names = names if isinstance(names, dict) else {}
        kv = doc.get("kv")
        if isinstance(kv, dict):
            saved.kv = kv
            saved.kv_report = records_from_json(kv.get("report"))
        saved.dims = _saved_dims(doc.get("dims"))
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise CheckpointError(f"{name}: refused: its llmpdb record is damaged ({shown(exc, 120)})") from None
    return saved


def _opened_class():
    from ..debugger.core import Pdb

    class OpenedPdb(Pdb):
        """The debugger of ``python -m llmpdb open``: stack-model and kv show the saved records."""

        saved: SavedStop

        def _headless_policy(self):  # a prompt on a file: no listener, no attach wait
            return None

        def shapes_namer(self, locals_, frame):
            """The dimension names saved at the stop (the live frame's config is not here)."""
            return self.saved.dims if self.saved.dims is not None else super().shapes_namer(locals_, frame)

        def _saved_note(self) -> str:
            loc = self.saved.location
            at = (f"{shown(os.path.basename(str(loc.get('file', '?'))))}:{shown(loc.get('line', '?'), 20)} "
                  f"{shown(loc.get('time', '?'), 40)}")
            return f"(saved in {shown(os.path.basename(self.saved.path))} at {at}: a record, not live frames)"

        @command
        def do_stack_model(self, arg):
            """stack-model [--all]
            In `python -m llmpdb open`: the module stack saved by `snapshot` at its stop (qualified
            names, classes, file:line, first tensor argument), with the path header it had; a record,
            so `frame N`/`up` do not reach its frames. --all shows the plumbing frames too. Alias: sm.
            Example: stack-model --all"""
            args = parse_args(arg, self.do_stack_model, flags={"--all"})
            if args.words:
                raise CommandError(f"unknown argument {args.words[0]!r} (usage: stack-model [--all])")
            if not self.saved.stack:
                raise CommandError(f"{shown(os.path.basename(self.saved.path))} holds no module stack "
                                   f"(a {self.saved.kind}: only `snapshot` saves one)")
            style = self.out_style()
            if self.saved.header:
                self.message(shown(self.saved.header, 400))
            self.message(render_model_stack(self.saved.stack, current=self.saved.current,
                                            show_all=args.flag("--all"), width=self.out_width(), style=style,
                                            root_names=self.saved.root_names))
            self.message(style.dim(self._saved_note()))

        do_sm = do_stack_model

        @command
        def do_kv(self, arg):
            """kv [LAYER]
            In `python -m llmpdb open`: the KV cache metadata saved by `snapshot` (summary, memory line,
            one row per layer); LAYER (N, -1, self:N / cross:N) shows one layer's tensors. The saved
            tensors themselves are in `shapes`.
            Example: kv 0"""
            args = parse_kv_args(arg)
            if args.expr or args.stats or args.history:
                raise CommandError("a saved file answers `kv` and `kv LAYER` only (the values: `shapes --stats`)")
            report = self.saved.kv_report
            if report is None:
                raise CommandError(f"{shown(os.path.basename(self.saved.path))} holds no KV cache metadata")
            path = shown(self.saved.kv.get("path") or "")
            style, width = self.out_style(), self.out_width()
            if args.layer is None:
                self.message(render_cache(report, width=width, style=style, path=path))
            else:
                part = args.part or report.parts[0]
                count = len(report.part_layers(part))
                layer = report.layer(args.layer + count if args.layer < 0 else args.layer, part)
                if layer is None:
                    raise CommandError(f"no layer {args.layer} in {path} ({count} layers)")
                self.message(render_layer(report, layer, width=width, style=style))
            self.message(style.dim(self._saved_note()))

    for names in _NOTHING_RUNS:
        refuse = _nothing_runs(names[0])
        for name in names:
            setattr(OpenedPdb, f"do_{name}", refuse)
    return OpenedPdb


_NOTHING_RUNS = (("next", "n"), ("step", "s"), ("until", "unt"), ("return", "r"), ("jump", "j"),
                 ("run", "restart"), ("step_all",), ("step_forward", "sf"))


def _nothing_runs(name: str):
    def refuse(self, arg):
        self.error(f"{name.replace('_', '-')}: nothing runs here: this prompt is on a saved file (shapes, p EXPR "
                   "read its tensors; c or q ends)")

    refuse.__doc__ = (f"{name.replace('_', '-')}\n        In `python -m llmpdb open`: refused with one line (no "
                      "program runs on a saved file).\n        Example: c")
    return refuse


def _with_aliases(saved: SavedStop) -> dict[str, Any]:
    """The saved tensors plus the other paths of each (tied weights): the same CPU tensor under both."""
    flat = dict(saved.tensors)
    aliases = saved.doc.get("aliases")
    for alias, first in (aliases.items() if isinstance(aliases, dict) else ()):
        if isinstance(alias, str) and isinstance(first, str) and first in flat and alias not in flat:
            flat[alias] = flat[first]
    return flat


def _namespace(saved: SavedStop, refused: list[str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The prompt's variables (top-level saved names; others, by their text, in ``saved_other``); paths
    ``nest_paths`` refuses (dunder or reserved parts) are appended to ``refused``. Linear in the paths."""
    with gc_paused():  # one object a path: the collector's walks are most of the time on 200,000 paths
        tree = nest_paths(_with_aliases(saved), refused=refused)
    names = [n for n in tree if n.isidentifier() and not keyword.iskeyword(n) and not n.startswith(("_llmpdb", "__"))]
    kept = set(names)
    others = {k: v for k, v in tree.items() if k not in kept}
    if others:
        tree = {n: tree[n] for n in names}
        tree["saved_other"] = others
        names.append("saved_other")
    return tree, names


def _refused_line(saved: SavedStop, refused: list[str]) -> str:
    some = ", ".join(repr(shown(p, 60)) for p in refused[:3]) + (", …" if len(refused) > 3 else "")
    return (f"llmpdb open: {shown(os.path.basename(saved.path))}: refused {plural(len(refused), 'path')} with a "
            f"dunder or reserved part, an unhashable key or too many parts ({some}): left out")


def _run_prompt(saved: SavedStop, debugger) -> None:
    refused: list[str] = []
    namespace, _ = _namespace(saved, refused)
    if refused:
        print(_refused_line(saved, refused))
    shown_line = f"# {shown(saved.kind, 40)} {shown(os.path.basename(saved.path))}: {saved.where}\n"
    display = [shown_line, _TEMPLATE.splitlines(True)[1]]  # what `l` shows: text, never compiled
    linecache.cache[_CODE.co_filename] = (sum(map(len, display)), None, display, _CODE.co_filename)

    def enter(frame):
        debugger.reset()
        debugger.botframe = frame
        debugger.interaction(frame, None)

    scope = {"__name__": "llmpdb_saved", "__builtins__": builtins, "torch": sys.modules["torch"]}
    scope.update(namespace)  # the saved objects, as data: names filtered (no dunder, no _llmpdb)
    scope.update(_llmpdb_enter=enter, _llmpdb_frame=sys._getframe)
    exec(_CODE, scope)  # a constant template compiled at import: no text from the file


def _limit_from_env() -> float:
    text = os.environ.get("LLMPDB_OPEN_MAX_MIB", "").strip()
    try:
        value = float(text) if text else DEFAULT_MAX_MIB
    except ValueError:
        return DEFAULT_MAX_MIB
    return value if 0 < value <= 10**9 else DEFAULT_MAX_MIB


def _parse_argv(argv: list[str]) -> tuple[str, bool, float] | None:
    """``(path, yes, max_mib)``; None for bad usage."""
    yes, limit, paths = False, _limit_from_env(), []
    words = list(argv)
    while words:
        word = words.pop(0)
        if word == "--yes":
            yes = True
        elif word == "--max-mib" or word.startswith("--max-mib="):
            text = word.partition("=")[2] if "=" in word else (words.pop(0) if words else "")
            try:
                limit = float(text)
            except ValueError:
                return None
            if not 0 < limit <= 10**9:
                return None
        elif word == "--":
            paths += words
            break
        elif word.startswith("--"):
            return None
        else:
            paths.append(word)
    return (paths[0], yes, limit) if len(paths) == 1 else None


def _approver(path: str, yes: bool, limit_mib: float):
    """``approve(total, stat)`` for ``read_safetensors``: above the limit, ask on a terminal, else refuse."""
    name = shown(os.path.basename(path) or path)

    def approve(total: int, st: os.stat_result) -> None:
        if yes or total <= limit_mib * 2**20:
            return
        on_disk = getattr(st, "st_blocks", None)
        sparse = (f" (a sparse file: {human_bytes(on_disk * 512)} on disk)"
                  if on_disk is not None and on_disk * 512 < total // 2 else "")
        what = f"{human_bytes(total)} of tensors{sparse} is over the {limit_mib:g} MiB limit"
        if sys.stdin.isatty() and sys.stdout.isatty():
            try:
                print(f"llmpdb open: {name}: {what}; mapped, they are read from disk as they are used. Open it? "
                      "[y/N] ", end="", flush=True)
                answer = sys.stdin.readline(64)
            except (OSError, ValueError, KeyboardInterrupt, EOFError):
                answer = ""
            if answer.strip().lower() in ("y", "yes"):
                return
            raise CheckpointError(f"{name}: not opened")
        raise CheckpointError(f"{name}: refused: {what} and nobody can confirm here (--yes or --max-mib N "
                              "opens it)")

    return approve


def open_main(argv: list[str]) -> int:
    """Usage: ``open_main(["x.safetensors"])``; the exit status (1 for a file refused, 2 for bad usage)."""
    if argv[:1] in (["-h"], ["--help"]):
        print(OPEN_USAGE)
        return 0
    parsed = _parse_argv(argv)
    if parsed is None:
        print(OPEN_USAGE, file=sys.stderr)
        return 2
    path, yes, limit = parsed
    try:
        saved = load_saved(path, _approver(path, yes, limit))
    except CheckpointError as exc:
        print(f"llmpdb open: {shown(exc, 400)}", file=sys.stderr)
        return 1
    total = sum(int(t.numel()) * int(t.element_size()) for t in saved.tensors.values())
    what = "a snapshot of " + saved.where if saved.kind == "snapshot" else f"a {shown(saved.kind, 40)}"
    if saved.kind == "dump":
        what = f"a dump of {shown(saved.doc.get('expr', '?'))} at {saved.where}"
    print(f"llmpdb open: {shown(path)}: {what}; {plural(len(saved.tensors), 'tensor')} ({human_bytes(total)}) on the "
          "CPU. shapes, p EXPR" + (", stack-model, kv" if saved.stack or saved.kv_report else "") +
          "; c or q ends")
    debugger = _opened_class()(headless_tour=[])
    debugger.saved = saved
    _run_prompt(saved, debugger)
    return 0
