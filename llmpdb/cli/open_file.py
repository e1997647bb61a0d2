"""``python -m llmpdb open FILE`` — a prompt on a saved ``snapshot`` or ``dump``, in a process without the model.

Usage::

    python -m llmpdb open llmpdb-snapshot-4242-1.safetensors
    (llmpdb) shapes                 the saved tensors, by the paths they had (outputs.logits ...)
    (llmpdb) stack-model            the module stack saved at the stop (a record: the frames are not live)
    (llmpdb) kv                     the saved KV cache metadata
    (llmpdb) p outputs.logits[0, -1].argmax()

The file is read by ``files.safetensors_file`` (header validated by ``inspect.checkpoint_guard`` before
any data is read; the records in ``__metadata__`` are JSON, rebuilt by ``inspect.saved_records`` into
known record classes only): nothing in it is executed or unpickled. Tensors land on the CPU. The prompt
is an llmpdb debugger stopped in a small generated function ``saved_stop`` whose locals are the saved
top-level names, nested back from their paths (``inspect.tensor_paths.nest_paths``). ``c`` or ``q`` ends.
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
from ..inspect.saved_records import records_from_json
from ..inspect.tensor_paths import nest_paths
from ..render.kv import render_cache, render_layer
from ..render.modules import render_model_stack
from ..units import human_bytes, plural

__all__ = ["open_main", "SavedStop", "load_saved", "OPEN_USAGE"]

OPEN_USAGE = "usage: python -m llmpdb open FILE   (a file written by `snapshot` or `dump`)"


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
    doc: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        loc = self.location
        if not loc:
            return "?"
        rank = f" r{loc['rank']}" if loc.get("rank") is not None else ""
        return f"{loc.get('file', '?')}:{loc.get('line', '?')} {loc.get('function', '?')}(){rank} at {loc.get('time', '?')}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def load_saved(path: str) -> SavedStop:
    """Usage: ``load_saved("x.safetensors")``; ``CheckpointError`` (one line) for a bad file or bad records."""
    tensors, metadata = read_safetensors(path)
    name = os.path.basename(path)
    saved = SavedStop(path, tensors)
    raw = metadata.get("llmpdb")
    if raw is None:
        return saved
    doc = load_json(raw.encode("utf-8"), name, "llmpdb record")
    if not isinstance(doc, dict) or not str(doc.get("format", "")).startswith("llmpdb-snapshot-"):
        raise CheckpointError(f"{name}: refused: its llmpdb record is not a snapshot document")
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
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{name}: refused: its llmpdb record is damaged ({exc})") from None
    return saved


def _opened_class():
    from ..debugger.core import Pdb

    class OpenedPdb(Pdb):
        """The debugger of ``python -m llmpdb open``: stack-model and kv show the saved records."""

        saved: SavedStop

        def _headless_policy(self):  # a prompt on a file: no listener, no attach wait
            return None

        def _saved_note(self) -> str:
            loc = self.saved.location
            at = f"{os.path.basename(str(loc.get('file', '?')))}:{loc.get('line', '?')} {loc.get('time', '?')}"
            return f"(saved in {os.path.basename(self.saved.path)} at {at}: a record, not live frames)"

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
                raise CommandError(f"{os.path.basename(self.saved.path)} holds no module stack "
                                   f"(a {self.saved.kind}: only `snapshot` saves one)")
            style = self.out_style()
            if self.saved.header:
                self.message(self.saved.header)
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
                raise CommandError(f"{os.path.basename(self.saved.path)} holds no KV cache metadata")
            path = str(self.saved.kv.get("path") or "")
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


def _namespace(saved: SavedStop) -> tuple[dict[str, Any], list[str]]:
    tree = nest_paths(_with_aliases(saved))
    names = [n for n in tree if n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_llmpdb")]
    others = {k: v for k, v in tree.items() if k not in names}
    if others:
        tree = {n: tree[n] for n in names}
        tree["saved_other"] = others
        names.append("saved_other")
    return tree, names


def _run_prompt(saved: SavedStop, debugger) -> None:
    namespace, names = _namespace(saved)
    filename = f"<llmpdb open {os.path.basename(saved.path)}>"
    source = (f"# {saved.kind} {os.path.basename(saved.path)}: {saved.where}\n"
              f"def saved_stop({', '.join(names)}):\n"
              "    _llmpdb_enter(_llmpdb_frame())  # the saved names are this function's locals\n"
              "    return None\n")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)

    def enter(frame):
        debugger.reset()
        debugger.botframe = frame
        debugger.interaction(frame, None)

    scope = {"__name__": "llmpdb_saved", "__builtins__": builtins, "_llmpdb_enter": enter,
             "_llmpdb_frame": sys._getframe, "torch": sys.modules["torch"]}  # read_safetensors imported it
    exec(compile(source, filename, "exec"), scope)  # our own generated source: no text from the file
    scope["saved_stop"](**namespace)


def open_main(argv: list[str]) -> int:
    """Usage: ``open_main(["x.safetensors"])``; the exit status (1 for a file refused, 2 for bad usage)."""
    if not argv or argv[0] in ("-h", "--help") or len(argv) > 1:
        print(OPEN_USAGE, file=sys.stdout if argv[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    path = argv[0]
    try:
        saved = load_saved(path)
    except CheckpointError as exc:
        print(f"llmpdb open: {exc}", file=sys.stderr)
        return 1
    total = sum(int(t.numel()) * int(t.element_size()) for t in saved.tensors.values())
    what = "a snapshot of " + saved.where if saved.kind == "snapshot" else f"a {saved.kind}"
    if saved.kind == "dump":
        what = f"a dump of {saved.doc.get('expr', '?')} at {saved.where}"
    print(f"llmpdb open: {path}: {what}; {plural(len(saved.tensors), 'tensor')} ({human_bytes(total)}) on the "
          "CPU. shapes, p EXPR" + (", stack-model, kv" if saved.stack or saved.kv_report else "") +
          "; c or q ends")
    debugger = _opened_class()(headless_tour=[])
    debugger.saved = saved
    _run_prompt(saved, debugger)
    return 0
