"""The ``dump`` and ``snapshot`` commands: tensors (and a stop's records) to a ``.safetensors`` file.

Usage (at the prompt)::

    dump outputs                         every tensor in outputs -> ./llmpdb-dump-<pid>-<n>.safetensors
    dump outputs /tmp/out.safetensors    ... to that file; names are access paths (outputs.logits)
    dump model --max-mib 4096 --yes      a limit other than 1024 MiB; --yes writes without asking
    snapshot [PATH]                      the frame's tensors + module stack + KV metadata + location

The tensors are found by the walk of ``shapes`` (``inspect.tensor_paths``), written by
``files.safetensors_file`` (CPU contiguous copies, atomic, mode 0600). Above the limit the command asks;
with nobody to answer (a headless stop, end of input) it refuses with one line. A snapshot's records are
one JSON document in the file's ``__metadata__`` (key ``llmpdb``): no pickle. ``python -m llmpdb open FILE``
reads either kind back. ``LLMPDB_DUMP_MAX_MIB`` sets the default limit.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from ..session import SESSION
from ..units import human_bytes, plural
from ._command import CommandError, command, parse_args
from .navigation import _path_header, _tree_names, user_root

if TYPE_CHECKING:  # annotations only: the modules are imported at first use
    from ..inspect.tensor_paths import TensorCollection

__all__ = ["DumpCommands", "DEFAULT_MAX_MIB", "default_path", "split_dump_args", "path_word"]

DEFAULT_MAX_MIB = 1024.0
_OPTIONS_HINT = "--max-mib N, --yes"


def _max_mib(text: str) -> float:
    value = float(text)
    if not 0 < value <= 10**9:
        raise ValueError("a number of MiB > 0 and at most 1000000000")
    return value


def _default_limit() -> float:
    text = os.environ.get("LLMPDB_DUMP_MAX_MIB", "").strip()
    try:
        return _max_mib(text) if text else DEFAULT_MAX_MIB
    except ValueError:
        return DEFAULT_MAX_MIB


def default_path(kind: str) -> str:
    """Usage: ``default_path("snapshot")`` -> ``"llmpdb-snapshot-4242-1.safetensors"`` (a name not yet used)."""
    counter = SESSION.memory(f"{kind}-file-counter", lambda: [0])
    while True:
        counter[0] += 1
        name = f"llmpdb-{kind}-{os.getpid()}-{counter[0]}.safetensors"
        if not os.path.lexists(name):
            return name


def _compiles(text: str) -> bool:
    try:
        compile(text, "<dump>", "eval")
        return True
    except (SyntaxError, ValueError):
        return False


def _looks_like_path(word: str) -> bool:
    return word.endswith(".safetensors") or word.startswith(("/", "./", "../", "~"))


def _quoted(word: str) -> str | None:
    """The text of a quoted word (``'/tmp/my dir/x.safetensors'``), None for a word that is not one string."""
    if len(word) < 2 or word[0] not in "'\"" or word[-1] != word[0]:
        return None
    try:
        value = ast.literal_eval(word)
    except (SyntaxError, ValueError):
        return None
    return value if isinstance(value, str) else None


def path_word(word: str) -> str:
    """Usage: ``path_word("'~/a b.safetensors'")`` -> ``"/root/a b.safetensors"``: quotes removed, ``~`` expanded."""
    text = _quoted(word)
    return os.path.expanduser(word if text is None else text)


def split_dump_args(rest: str, words: list[str]) -> tuple[str, str | None]:
    """Usage: ``split_dump_args("outputs out.safetensors", words)`` -> ``("outputs", "out.safetensors")``.

    The last of several words is PATH when the text before it compiles and it looks like a path (ends in
    ``.safetensors``, starts with ``/``, ``./``, ``../`` or ``~``; quoted, for a path with spaces) or the
    whole text does not compile."""
    usage = "(usage: dump EXPR [PATH] [--max-mib N] [--yes])"
    if not rest:
        raise CommandError(f"an expression is required {usage}")
    if len(words) < 2:
        return rest, None
    expr = rest[: len(rest) - len(words[-1])].rstrip()
    last = words[-1]
    if _compiles(expr) and (_looks_like_path(_quoted(last) or last) or not _compiles(rest)):
        return expr, path_word(last)
    if not _compiles(rest):
        raise CommandError(f"invalid expression {rest!r} {usage}")
    return rest, None


class DumpCommands:
    """Command mixin: ``dump``, ``snapshot``."""

    @command
    def do_dump(self, arg):
        """dump EXPR [PATH] [--max-mib N] [--yes]
        Save every tensor inside EXPR to a .safetensors file, for offline analysis. Each is named by
        its access path (outputs.logits, outputs.cache.layers[0].keys) and found like `shapes` finds them (dicts,
        lists, tuples, ModelOutput, BatchEncoding, KV caches, small objects; a module's parameters and
        buffers), without calling properties; written as CPU contiguous copies (views and non-contiguous
        tensors copied, bf16 kept), atomically, mode 0600. A tensor reached twice is written once.
        Meta, fake, sparse, nested, quantized and DTensor tensors are left out, each named.
        PATH defaults to ./llmpdb-dump-<pid>-<n>.safetensors (quote one with spaces); a symlink, FIFO
        or folder is refused.
        --max-mib N   ask before writing more than N MiB (default 1024, LLMPDB_DUMP_MAX_MIB); with
                      nobody to ask (a headless stop) refuse instead.
        --yes         write without asking.
        Load it with safetensors.torch.load_file(PATH) or `python -m llmpdb open PATH`.
        Example: dump outputs /tmp/outputs.safetensors"""
        from ..inspect.frame_snapshot import FORMAT, location_record
        from ..inspect.tensor_paths import collect_tensors

        args = parse_args(arg, self.do_dump, flags={"--yes"}, options={"--max-mib": _max_mib})
        expr, path = split_dump_args(args.rest, args.words)
        value = self.eval_in_frame(expr)
        found = collect_tensors(value, expr)
        doc = {"format": FORMAT, "kind": "dump", "expr": expr, "location": location_record(self.current_frame())}
        self._dump_write("dump", found, path, doc, args)

    @command
    def do_snapshot(self, arg):
        """snapshot [PATH] [--max-mib N] [--yes]
        Save this stop to ONE .safetensors file: every tensor `shapes` finds in the frame (named by
        path), and in its __metadata__ a JSON document with the module stack (`stack-model`), the KV
        cache metadata (`kv`), the location (file:line, function, rank, UTC time) and the path header.
        No pickle. Size limit and asking as `dump` (--max-mib, --yes). PATH defaults to
        ./llmpdb-snapshot-<pid>-<n>.safetensors. Open it in any process, without the model or a GPU:
        `python -m llmpdb open FILE` (shapes, stack-model, kv and p work there). Headless:
        `python -m llmpdb --headless log --snapshot` (LLMPDB_SNAPSHOT=1) writes one per logged stop.
        Example: snapshot /tmp/stop.safetensors"""
        from ..inspect.frame_snapshot import snapshot_document
        from ..inspect.modules import model_stack
        from ..inspect.tensor_paths import collect_frame_tensors

        args = parse_args(arg, self.do_snapshot, flags={"--yes"}, options={"--max-mib": _max_mib})
        if len(args.words) > 1:
            raise CommandError("one PATH at most (usage: snapshot [PATH] [--max-mib N] [--yes])")
        frame = self.current_frame()
        if frame is None:
            raise CommandError("no frame (the program is not stopped)")
        locals_ = self.frame_locals()
        found = collect_frame_tensors(locals_)
        stack, index = self.stack_frames(), self.current_index()
        header = root_names = None
        try:
            header = _path_header(stack, index, None)
            root_names = _tree_names(stack, index, model_stack(stack[: index + 1], user_root()))
        except Exception as exc:  # the header is a nicety: the snapshot is written without it
            self.message(f"snapshot: path header not saved ({type(exc).__name__}: {exc})")
        doc = snapshot_document(frame, stack, index, locals_, root=user_root(), header=header,
                                root_names=root_names)
        self._dump_write("snapshot", found, path_word(args.words[0]) if args.words else None, doc, args)

    # ---- shared -------------------------------------------------------------------------------------
    def _dump_write(self, kind: str, found: TensorCollection, path: str | None, doc: dict, args) -> None:
        import json

        from ..files.atomic import FileTargetError, check_target
        from ..files.safetensors_file import refusal, tensor_nbytes, write_safetensors
        from ..render.progress import Progress

        items, refused = [], []
        for name, t in found.items:
            why = refusal(t)
            if why:
                refused.append(f"{name} ({why})")
            else:
                items.append((name, t))
        if not items and kind == "dump":
            detail = f": {'; '.join(refused)}" if refused else ""
            raise CommandError(f"nothing to write: no tensor with data in {doc.get('expr')}{detail}")
        path = path or default_path(kind)
        try:
            check_target(path)
        except FileTargetError as exc:
            raise CommandError(str(exc)) from None
        total = sum(tensor_nbytes(t) for _, t in items)
        limit = args.value("--max-mib", _default_limit())
        if total > limit * 2**20 and not args.flag("--yes"):
            question = (f"{kind}: {plural(len(items), 'tensor')}, {human_bytes(total)}: more than the "
                        f"{limit:g} MiB limit; write {path}? [y/N] ")
            answer = self._dump_ask(question)
            if answer is None:
                raise CommandError(f"refused: {human_bytes(total)} is over the {limit:g} MiB limit and nobody "
                                   f"can confirm here (--yes or --max-mib N writes it)")
            if answer.strip().lower() not in ("y", "yes"):
                self.message(f"{kind}: nothing written")
                return
        doc["aliases"] = found.aliases
        doc["refused"] = refused
        doc["left_out"] = found.walk.left_out + found.walk.unsearched
        doc["walk_notes"] = found.walk.notes[:50]
        try:
            with Progress(f"{kind}: writing", total, unit="bytes", enabled=self.out_is_terminal()) as bar:
                size = write_safetensors(path, items, {"llmpdb": json.dumps(doc, ensure_ascii=False)},
                                         progress=bar.update)
        except (OSError, ValueError, RuntimeError) as exc:  # disk full, a bad target, a device copy that failed
            raise CommandError(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
        shown = os.path.abspath(path)
        self.message(f"{kind}: wrote {plural(len(items), 'tensor')} ({human_bytes(size)}) to {shown}")
        for line in refused:
            self.message(f"  left out: {line}")
        if doc["left_out"]:
            self.message(f"  {doc['left_out']} containers or tensors past the walk's limits were not searched")
        self.message(f"  load: safetensors.torch.load_file({shown!r}) or `python -m llmpdb open {shown}`")

    def _dump_ask(self, question: str) -> str | None:
        """The answer typed, or None when nobody can answer (a headless stop, end of input)."""
        if self.nobody_can_answer():
            return None  # the log policy: its input is empty by design
        try:
            if self.use_rawinput:
                return input(question)
            self.stdout.write(question)
            self.stdout.flush()
            line = self.stdin.readline()
        except EOFError:
            return None
        return line.rstrip("\n") if line else None
