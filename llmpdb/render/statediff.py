"""``StateDiff`` and ``SnapDiff`` records to text.

Usage::

    render_statediff(statediff(model, "ckpt/"), width=100)
    render_snapdiff(diff_with_model(snap, model), width=100)

Long lists are folded: a module whose tensors all share one status becomes ``model.layers.0.* (9)``, and
names that differ in one layer index become ``model.layers.{0..31}.mlp.up_proj.weight``; each section
shows at most ``limit`` lines, then how many more (``--all`` lists every tensor, unfolded).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..inspect.safe import short_dtype
from ..inspect.snapshot import Change, SnapDiff, Snapshot
from ..inspect.statediff import StateDiff, group_names
from .style import Style
from .table import ellipsize, render_table
from ..units import format_shape, mib, plural

__all__ = ["fold_names", "render_statediff", "render_snapdiff", "render_snapshot", "render_snapshot_list"]

_LEAF = "\0"


def fold_names(universe: Sequence[str], status: Callable[[str], Hashable]) -> list[tuple[str, list[str], Hashable]]:
    """Usage: ``fold_names(all_names, status)`` -> ``[("model.layers.0.*", [...9 names], "frozen"), ...]``.

    A module (name prefix) with two or more tensors that all share one ``status`` becomes one ``prefix.*``
    entry; other tensors stay single. Entries keep the order of ``universe``.
    """
    tree: dict[str, Any] = {}
    for name in universe:
        node = tree
        for part in name.split("."):
            node = node.setdefault(part, {})
        node[_LEAF] = name

    def leaves(node: dict[str, Any]) -> list[str]:
        found = [node[_LEAF]] if _LEAF in node else []
        for part, child in node.items():
            if part != _LEAF:
                found.extend(leaves(child))
        return found

    out: list[tuple[str, list[str], Hashable]] = []

    def walk(node: dict[str, Any], path: list[str]) -> None:
        for part, child in node.items():
            if part == _LEAF:
                continue
            full = path + [part]
            below = leaves(child)
            keys = {status(n) for n in below}
            if len(below) >= 2 and len(keys) == 1 and _LEAF not in child:
                out.append((".".join(full) + ".*", below, keys.pop()))
                continue
            if _LEAF in child:
                out.append((child[_LEAF], [child[_LEAF]], status(child[_LEAF])))
            walk(child, full)

    walk(tree, [])
    order = {n: i for i, n in enumerate(universe)}
    out.sort(key=lambda e: order[e[1][0]])
    return out


def _entries(names: Sequence[str], universe: Sequence[str], status: Callable[[str], Hashable], key: Hashable,
             full: bool, payload: Callable[[str], Hashable] | None = None) -> list[tuple[str, list[str]]]:
    """Folded then layer-grouped ``(label, members)`` for the ``names`` whose ``status`` is ``key``."""
    if full:
        return [(n, [n]) for n in names]
    wanted = set(names)
    folded = [(label, members) for label, members, k in fold_names(universe, status) if k == key]
    folded = [(label, [m for m in members if m in wanted]) for label, members in folded]
    members_of = {label: members for label, members in folded}
    out = []
    for group in group_names([label for label, _ in folded],
                             (lambda label: payload(members_of[label][0])) if payload else None):
        members = [m for label in group.members for m in members_of[label]]
        label = group.pattern
        if label.endswith(".*") or len(group.members) > 1:
            label += f" ({len(members)})"
        out.append((label, members))
    return out


def _section(title: str, rows: list[list[str]], width: int, limit: int | None, style: Style,
             headers: Sequence[str] | None = None, right: Sequence[int] = ()) -> list[str]:
    lines = [style.header(line) for line in textwrap.wrap(title, width, subsequent_indent="  ")]
    if not rows:
        return lines
    shown = rows if limit is None or len(rows) <= limit else rows[:limit]
    table = render_table(list(headers) if headers else [""] * len(rows[0]), shown, width=width - 2,
                         shrink=(0,), right=right, style=style).split("\n")
    lines.extend("  " + line for line in (table if headers else table[1:]))
    if len(shown) < len(rows):
        lines.append(style.dim(f"  … {len(rows) - len(shown)} more lines (--all lists every tensor)"))
    return lines


def _meta_text(meta) -> tuple[str, str]:
    return format_shape(meta.shape), short_dtype(meta.dtype)


def render_statediff(d: StateDiff, *, width: int = 100, limit: int | None = 20, full: bool = False,
                     style: Style | None = None) -> str:
    """Usage: ``render_statediff(d, width=100)``; ``full=True`` lists every tensor (no folding, no limit)."""
    style = style or Style()
    limit = None if full else limit
    files = f"{plural(d.other_files, 'file')}, " if d.other_files else ""
    under = f", under `{d.nested_under}`" if d.nested_under else ""
    tail = f" ({d.other_kind}, {files}{d.other_count} tensors{under})"
    start = f"statediff {d.model_label} ↔ "
    label = ellipsize(d.other_label, max(12, width - len(start) - len(tail)))
    if len(start) + len(label) + len(tail) <= width:
        lines = [start + style.path(label) + tail]
    else:  # the counts go to a line of their own rather than past the width
        label = ellipsize(d.other_label, max(12, width - len(start)))
        lines = [start + style.path(label), "  " + tail.strip()]
    if d.prefix:
        p = d.prefix
        lines.append(f"{p.describe()} → {p.after}/{p.total} match ({p.before}/{p.total} as saved)")
    tied = f"; {len(d.tied)} tied, stored once" if d.tied else ""
    verdict = f"{d.matched}/{d.model_count} model tensors match in name, shape and dtype{tied}"
    verdict = "\n  ".join(textwrap.wrap(verdict, width - 2))
    lines.append(verdict if d.ok else style.warn(verdict))
    for name, alias in d.tied:
        lines.append(style.dim(f"  tied: {name} = {alias}"))
    side = "checkpoint" if d.other_files else "other"
    missing = set(d.missing)
    if d.missing:
        rows = [[label] for label, _ in _entries(d.missing, d.model_names, lambda n: n in missing, True, full)]
        lines += _section(f"missing: {len(d.missing)} in the model, not in the {side}", rows, width, limit, style)
    if d.unexpected:
        metas = dict(d.unexpected)
        names = [n for n, _ in d.unexpected]
        rows = []
        for label, members in _entries(names, d.other_names, lambda n: n in metas, True, full,
                                       payload=lambda n: metas[n]):
            same = {metas[m] for m in members}
            rows.append([label, *(_meta_text(metas[members[0]]) if len(same) == 1 else ("", ""))])
        lines += _section(f"unexpected: {len(d.unexpected)} in the {side}, not in the model", rows, width,
                          limit, style)
    for title, items, text in (("shape mismatches", d.shape_mismatches, lambda m: format_shape(m.shape)),
                               ("dtype differences", d.dtype_mismatches, lambda m: short_dtype(m.dtype))):
        if not items:
            continue
        by_name = {m.name: m for m in items}
        pairs = {n: (text(m.model), text(m.other)) for n, m in by_name.items()}
        groups = [(n, [n]) for n in by_name] if full else [
            (g.pattern + (f" ({len(g.members)})" if len(g.members) > 1 else ""), list(g.members))
            for g in group_names(list(by_name), lambda n: pairs[n])]
        rows = [[label, *pairs[members[0]]] for label, members in groups]
        lines += _section(f"{title}: {len(items)}", rows, width, limit, style, headers=("name", "model", side))
    for note in d.notes:
        lines.extend(style.dim(line) for line in textwrap.wrap(f"note: {note}", width, subsequent_indent="  "))
    return "\n".join(lines)


def _rel(c: Change) -> str:
    if c.rel_l2 is None:
        return f"from 0, L2 {c.abs_l2:.1e}" if c.abs_l2 else "changed"
    return ("≥" if c.how == "lower bound" else "") + f"{c.rel_l2:.1e}"


def _rel_range(changes: list[Change]) -> str:
    if len(changes) == 1:
        return _rel(changes[0])
    rels = [c.rel_l2 for c in changes if c.rel_l2 is not None and c.how != "lower bound"]
    if len(rels) != len(changes):
        return ", ".join(sorted({_rel(c) for c in changes}))[:40]
    low, high = min(rels), max(rels)
    return f"{low:.1e}" if f"{low:.1e}" == f"{high:.1e}" else f"{low:.1e}…{high:.1e}"


def render_snapdiff(d: SnapDiff, *, width: int = 100, limit: int | None = 20, full: bool = False,
                    style: Style | None = None) -> str:
    """Usage: ``render_snapdiff(diff, width=100)``; ``full=True`` lists every tensor (no folding, no limit)."""
    style = style or Style()
    limit = None if full else limit
    after = f"now (stop {d.after_stop})" if d.after == "now" else f"{d.after} (stop {d.after_stop})"
    became = [n for n in d.nonfinite if n.became]
    lines = [f"statediff {d.before} (stop {d.before_stop}) → {after}: {d.label}, {d.total} tensors: "
             f"{len(d.changed)} changed, {len(d.unchanged)} unchanged, {len(became)} became NaN/Inf"]
    status: dict[str, Hashable] = {c.name: "changed" for c in d.changed}
    status.update({u.name: u.reason for u in d.unchanged})
    universe = [n for n in status]
    order = {n: i for i, n in enumerate(d.order or universe)}
    universe.sort(key=lambda n: order.get(n, len(order)))
    if d.changed:
        by_name = {c.name: c for c in d.changed}
        how = "" if d.how == "exact" else ", estimated from strided samples; --exact for exact values"
        rows = [[label, _rel_range([by_name[m] for m in members])]
                for label, members in _entries(list(by_name), universe, status.__getitem__, "changed", full)]
        lines += _section(f"changed: {len(d.changed)} (relative L2 change{how})", rows, width, limit, style)
    if d.unchanged:
        rows = []
        reasons = list(dict.fromkeys(u.reason for u in d.unchanged))
        for reason in reasons:
            names = [u.name for u in d.unchanged if u.reason == reason]
            rows += [[label, reason] for label, _ in _entries(names, universe, status.__getitem__, reason, full)]
        lines += _section(f"unchanged: {len(d.unchanged)}", rows, width, limit, style)
    if d.nonfinite:
        rows = [[style.bad(n.name), f"nan {n.nan}", f"inf {n.inf}", "became" if n.became else "already before"]
                for n in d.nonfinite]
        lines += _section(f"NaN/Inf: {len(d.nonfinite)} ({len(became)} became non-finite)", rows, width, limit, style)
    for title, names in (("new tensors", d.added), ("gone tensors", d.removed),
                         ("shape or dtype changed", d.reshaped)):
        if names:
            lines += _section(f"{title}: {len(names)}", [[g.pattern] for g in group_names(names)], width, limit, style)
    if d.skipped:
        lines.append(style.dim(f"not compared: {len(d.skipped)} ({d.skipped[0][1]}: {d.skipped[0][0]}…)"))
    if d.grads:
        lines.append("grads: " + ", ".join(f"{v} {k}" for k, v in d.grads.items()))
    return "\n".join(lines)


def _summary(snap: Snapshot) -> str:
    what = f"exact copies ({mib(snap.copied_bytes)})" if snap.mode == "exact" else "fingerprints"
    of = f"{snap.expr} ({snap.label})" if snap.expr else snap.label
    return f"{snap.name} of {of} at stop {snap.stop}: {len(snap.tensors)} tensors, {len(snap.grads)} grads, {what}"


def render_snapshot(snap: Snapshot) -> str:
    """Usage: ``render_snapshot(snap)`` -> ``"snapshot a of model (LlamaForCausalLM) at stop 1: 23 tensors, ..."``."""
    skipped = [t.skipped for t in snap.tensors.values() if t.skipped]
    extra = f"; {len(skipped)} without values ({skipped[0]})" if skipped else ""
    return f"snapshot {_summary(snap)}{extra}"


def render_snapshot_list(snaps: Sequence[Snapshot]) -> str:
    """Usage: ``render_snapshot_list(list(store.values()))``; one line per snapshot, the last (default) marked."""
    if not snaps:
        return "no snapshots (statediff snap [NAME] [MODEL])"
    return "\n".join(("* " if i == len(snaps) - 1 else "  ") + _summary(s) for i, s in enumerate(snaps))
