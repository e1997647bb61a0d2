"""``statediff``: a model against a checkpoint, and what changed between two stops.

Usage (at the llmpdb prompt)::

    statediff model ckpt/                  # model vs a checkpoint (metadata only)
    statediff model other_model            # vs a second module or state dict
    statediff snap before                  # fingerprint the model in this frame
    statediff before                       # later: what changed since
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from ..session import SESSION
from ..units import human_bytes, plural
from ._command import CommandError, command, parse_args

if TYPE_CHECKING:  # annotations only: the module is imported at first use
    from ..inspect.snapshot import Snapshot

__all__ = ["StatediffCommands", "snapshots", "snapshot_limits"]

_FLAGS = {"--all", "--unsafe-trusted", "--exact", "--list", "--drop"}
_NAME = re.compile(r"[A-Za-z_][\w-]*$")
LIMIT_ENV, MIB_ENV = "LLMPDB_SNAPSHOT_LIMIT", "LLMPDB_SNAPSHOT_MIB"
DEFAULT_LIMIT, DEFAULT_MIB = 16, 4096


def snapshots() -> dict[str, Snapshot]:
    """The snapshots of this process, oldest first (``SESSION.memory("statediff-snapshots", dict)``)."""
    return SESSION.memory("statediff-snapshots", dict)


def _env_number(name: str, default: int, notes: list[str]) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if text.isascii() and text.isdigit() and len(text) <= 9 and int(text) > 0:
        return int(text)
    notes.append(f"{name}={text!r} is not a positive whole number; using {default}")
    return default


def snapshot_limits() -> tuple[int, int, list[str]]:
    """Usage: ``count, max_bytes, notes = snapshot_limits()``; from LLMPDB_SNAPSHOT_LIMIT / LLMPDB_SNAPSHOT_MIB."""
    notes: list[str] = []
    count = _env_number(LIMIT_ENV, DEFAULT_LIMIT, notes)
    return count, _env_number(MIB_ENV, DEFAULT_MIB, notes) * 2**20, notes


def _parse(arg: str) -> tuple[list[str], set[str]]:
    args = parse_args(arg, flags=_FLAGS, hint=f"options: {', '.join(sorted(_FLAGS))}")
    return args.words, {name for name in _FLAGS if args.flag(name)}


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    return token


class StatediffCommands:
    """Mixin: ``statediff`` (checkpoint diff, snapshots)."""

    @command
    def do_statediff(self, arg):
        """statediff MODEL CHECKPOINT | MODEL EXPR2 | snap [NAME] [MODEL] [--exact] | [NAME [NAME2]] [--all]
        Compare a model with a checkpoint, or with a snapshot taken at an earlier stop.

        statediff MODEL CHECKPOINT    MODEL: an expression (module or state dict). CHECKPOINT: a path to a
                                      .safetensors file, a sharded folder or its *.index.json, or a
                                      .bin/.pt/.pth file (weights may be nested under model_state_dict,
                                      state_dict, model or module). Reports matches, missing, unexpected,
                                      shape and dtype differences, a prefix that explains them (strip
                                      `module.`), tied weights. Reads metadata only; a pickle needing
                                      arbitrary globals is refused unless --unsafe-trusted (runs its code).
        statediff MODEL EXPR2         the same against a second expression: a module, a state dict, or a
                                      string holding a path. A second argument that names an existing
                                      file or folder is a path; otherwise it is evaluated.
                                      Arguments split at spaces outside brackets and quotes.
        statediff snap [NAME] [MODEL] fingerprint every parameter, buffer and .grad of MODEL (default: the
                                      one model among the frame's locals, else `model`) at this stop.
                                      NAME defaults to stopN. With one argument: a local that is a module
                                      is MODEL, anything else is NAME. --exact keeps copies on the device
                                      (refused when memory is short): exact changes instead of estimates.
                                      At most 16 snapshots (LLMPDB_SNAPSHOT_LIMIT) keeping 4096 MiB
                                      (LLMPDB_SNAPSHOT_MIB) are kept: the oldest are dropped, named.
        statediff [NAME]              what changed since snapshot NAME (default: the last one) in the very
                                      object snapped (never re-evaluated): relative L2 change, unchanged
                                      tensors and why (frozen, grad None, zero step), tensors that became
                                      NaN/Inf, grads.
        statediff NAME1 NAME2         compare two snapshots.
        statediff --list | --drop NAME...   list snapshots / forget some (frees --exact copies).
        --all lists every tensor instead of folding modules and layers.
        Example: statediff model checkpoints/step-100/"""
        from ..inspect.checkpoint import CheckpointError
        from ..inspect.snapshot import SnapshotError, compare_snapshots, diff_with_model
        from ..inspect.statediff import statediff
        from ..render.progress import Progress
        from ..render.statediff import render_snapdiff, render_snapshot_list, render_statediff
        positional, flags = _parse(arg)
        width, style = self.out_width(), self.out_style()
        full = "--all" in flags
        store = snapshots()
        if "--list" in flags:
            self.message(render_snapshot_list(list(store.values())))
            return
        if "--drop" in flags:
            existing = f"snapshots: {', '.join(store) or 'none'}"
            if not positional:
                raise CommandError(f"--drop needs a snapshot name ({existing})")
            unknown = [name for name in positional if name not in store]
            if unknown:
                raise CommandError(f"no snapshot named {', '.join(unknown)} ({existing}); nothing dropped")
            names = list(dict.fromkeys(positional))
            for name in names:
                del store[name]
            self.message(f"dropped {'snapshot' if len(names) == 1 else 'snapshots'} {', '.join(names)}")
            return
        if positional and positional[0] == "snap":
            self._statediff_snap(positional[1:], "--exact" in flags)
            return
        if "--exact" in flags:
            raise CommandError("--exact applies to `statediff snap`")
        if len(positional) <= 1:
            snap = self._statediff_snapshot(positional[0] if positional else None)
            model = self._statediff_model_of(snap)
            try:
                diff = diff_with_model(snap, model, stop=SESSION.stop)
            except SnapshotError as exc:
                raise CommandError(str(exc)) from None
            self.message(render_snapdiff(diff, width=width, full=full, style=style))
            return
        if len(positional) == 2 and positional[0] in store and positional[1] in store:
            diff = compare_snapshots(store[positional[0]], store[positional[1]])
            self.message(render_snapdiff(diff, width=width, full=full, style=style))
            return
        if len(positional) == 2 and (positional[0] in store) != (positional[1] in store):
            other = positional[1] if positional[0] in store else positional[0]
            if self._statediff_unbound(other):
                raise CommandError(f"no snapshot named {other} (snapshots: {', '.join(store)})")
        if len(positional) != 2:
            raise CommandError("usage: statediff MODEL CHECKPOINT | snap [NAME] [MODEL] | [NAME] (see help statediff)")
        model = self.eval_in_frame(positional[0])
        other, label = self._statediff_other(positional[1])
        try:
            with Progress("statediff: reading shards", enabled=self.out_is_terminal()) as bar:
                diff = statediff(model, other, unsafe_trusted="--unsafe-trusted" in flags,
                                 model_label=positional[0], other_label=label, progress=bar.update)
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        self.message(render_statediff(diff, width=width, full=full, style=style))

    # ---- helpers (prefixed: the debugger mixes many command families into one class) ---------------
    def _statediff_other(self, token: str) -> tuple[Any, str]:
        from ..inspect.kinds import is_module
        text = _unquote(token)
        path = os.path.expanduser(text)
        if os.path.exists(path):
            return path, text
        try:
            value = self.eval_in_frame(token)
        except CommandError as exc:
            raise CommandError(f"{text}: no such file or folder, and not an expression ({exc})") from None
        if issubclass(type(value), (str, os.PathLike)):  # by type: isinstance reads a hostile __class__
            return os.fspath(value), os.fspath(value)
        if is_module(value) or issubclass(type(value), Mapping):
            return value, token
        raise CommandError(f"{token} is a {type(value).__name__}: expected a path, a module or a state dict")

    def _statediff_find_model(self) -> tuple[Any, str]:
        from ..inspect.modules import models_in
        tops = models_in(self.frame_locals())
        if len(tops) == 1:
            return tops[0][1], tops[0][0]
        for name, value in tops:
            if name == "model":
                return value, name
        if not tops:
            raise CommandError("no module among this frame's locals: statediff snap [NAME] MODEL")
        names = ", ".join(n for n, _ in tops)
        raise CommandError(f"several models here ({names}): statediff snap [NAME] MODEL")

    def _statediff_snap(self, args: list[str], exact: bool) -> None:
        from ..inspect.kinds import is_module
        from ..inspect.snapshot import SnapshotError, take_snapshot, trim_snapshots
        from ..render.statediff import render_snapshot
        store = snapshots()
        name = expr = None
        if len(args) > 2:
            raise CommandError("usage: statediff snap [NAME] [MODEL] [--exact]")
        if len(args) == 2:
            name, expr = args
        elif len(args) == 1:
            if _NAME.match(args[0]) and args[0] not in self.frame_locals() and args[0] not in self.frame_globals():
                name = args[0]
            else:
                expr = args[0]
        if expr is not None:
            model = self.eval_in_frame(expr)
            if not is_module(model):
                if len(args) == 1 and _NAME.match(args[0]):
                    name, expr = args[0], None
                else:
                    raise CommandError(f"{expr} is a {type(model).__name__}, not a module")
        if expr is None:
            model, expr = self._statediff_find_model()
        if name is None:
            name = base = f"stop{SESSION.stop}"
            counter = 2
            while name in store:
                name, counter = f"{base}-{counter}", counter + 1
        if not _NAME.match(name) or name == "snap":
            raise CommandError(f"bad snapshot name {name!r}: letters, digits, _ and -, not `snap`")
        try:
            snap = take_snapshot(model, name=name, exact=exact, stop=SESSION.stop, expr=expr)
        except SnapshotError as exc:
            raise CommandError(str(exc)) from None
        except Exception as exc:  # the model's own code (an overridden named_parameters) raised
            raise CommandError(f"{expr}: reading its tensors raised {type(exc).__name__}: {exc}") from None
        store.pop(name, None)
        store[name] = snap
        self.message(render_snapshot(snap))
        limit, max_bytes, notes = snapshot_limits()
        for note in notes:
            self.message(f"note: {note}")
        dropped = trim_snapshots(store, limit=limit, max_bytes=max_bytes)
        if dropped:
            kept = f"{len(store)} kept, at most {limit} ({LIMIT_ENV}) and {human_bytes(max_bytes)} ({MIB_ENV})"
            self.message(f"dropped the oldest {plural(len(dropped), 'snapshot')}: "
                         f"{', '.join(s.name for s in dropped)} ({kept})")

    def _statediff_unbound(self, token: str) -> bool:
        """A bare name that is no local, global or builtin, nor a path: meant as a snapshot's name."""
        import builtins

        return bool(_NAME.match(token)) and not any(
            token in space for space in (self.frame_locals(), self.frame_globals(), vars(builtins))
        ) and not os.path.exists(os.path.expanduser(token))

    def _statediff_snapshot(self, name: str | None) -> Snapshot:
        store = snapshots()
        if not store:
            raise CommandError("no snapshot yet: `statediff snap [NAME] [MODEL]` at an earlier stop")
        if name is None:
            return list(store.values())[-1]
        if name not in store:
            raise CommandError(
                f"no snapshot named {name} (snapshots: {', '.join(store)}); "
                "to compare with a checkpoint: statediff MODEL CHECKPOINT"
            )
        return store[name]

    def _statediff_model_of(self, snap: Snapshot) -> Any:
        """The very object snapped (a weak reference): an expression is never evaluated again."""
        model = snap.model()
        if model is not None:
            return model
        raise CommandError(f"the {snap.label} snapped as {snap.name} ({snap.expr}) no longer exists; statediff "
                           f"compares the object snapped and does not evaluate `{snap.expr}` again")
