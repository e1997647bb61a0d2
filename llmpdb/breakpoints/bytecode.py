"""Breakpoint hooks compiled into a code object (Python 3.11 only).

Usage::

    new_code = instrument(code, frozenset({42}), hook)   # None when the code cannot be instrumented

Before every instruction where ``sys.settrace`` would report a line event for one of ``lines``, the new
code calls ``hook()`` (``PUSH_NULL; LOAD_CONST hook; PRECALL 0; CALL 0; POP_TOP``, with no source
location). The hook may install a trace function; because its instructions have no line number, the
interpreter then reports a genuine line event for the breakpoint line, so pdb stops inside a real trace
callback (``jump``, ``step`` and ``next`` work as usual).

Line events in 3.11 fire on an instruction whose line differs from the previously executed instruction's
(the first instruction after ``RESUME`` always), or that is reached by a backward jump (except to ``SEND``).
Each way into a breakpoint line (falling through, each jump, each range of an exception handler) is
classified; a hook is placed inline when falling through fires, else in a block at the end of the code
(``hook; JUMP_BACKWARD``) that only the firing jumps and handler ranges enter. Jumps, the exception table
and the location table are re-assembled; ``co_stacksize`` grows by 2.
"""

from __future__ import annotations

import dis
import opcode
import sys
from types import CodeType
from typing import Any

__all__ = ["instrument", "rebuild", "may_reach", "first_line", "GuardFlag", "SUPPORTED"]

SUPPORTED = sys.version_info[:2] == (3, 11)

_OP = opcode.opmap
_CACHES = getattr(opcode, "_inline_cache_entries", [0] * 256)
_EXT = _OP["EXTENDED_ARG"]
_JREL = frozenset(dis.hasjrel)
_NAME = opcode.opname
_FORWARD_OF = {}
_BACKWARD_OF = {}
if SUPPORTED:
    for _name in ("JUMP", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE"):
        _fwd = _OP[_name.replace("JUMP", "JUMP_FORWARD", 1) if _name != "JUMP" else "JUMP_FORWARD"]
        _bwd = _OP[_name.replace("JUMP", "JUMP_BACKWARD", 1) if _name != "JUMP" else "JUMP_BACKWARD"]
        _FORWARD_OF[_fwd] = _FORWARD_OF[_bwd] = _fwd
        _BACKWARD_OF[_fwd] = _BACKWARD_OF[_bwd] = _bwd
    _FORWARD_OF[_OP["JUMP_BACKWARD_NO_INTERRUPT"]] = _OP["JUMP_FORWARD"]
    _BACKWARD_OF[_OP["JUMP_BACKWARD_NO_INTERRUPT"]] = _OP["JUMP_BACKWARD_NO_INTERRUPT"]
    _SEND = _OP["SEND"]
    _NO_FALLTHROUGH = frozenset(_OP[n] for n in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                                                "RETURN_VALUE", "RAISE_VARARGS", "RERAISE"))


class GuardFlag(list):
    """A guard's flag: empty while its line is unarmed, ``[True]`` when armed. A list (the interpreter tests
    its truth in C, at the cost of a plain list), hashed and compared by identity, so that a code object
    holding flags in its constants stays hashable: ``hash(code)`` hashes ``co_consts``, and ``linecache``,
    ``functools`` caches, torch and llmpdb's own lookups key dicts by code objects."""

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__


class _Ins:
    __slots__ = ("op", "arg", "pos", "old_start", "old_off", "target", "start", "off", "ext")

    def __init__(self, op: int, arg: int, pos, old_start: int = -1, old_off: int = -1):
        self.op, self.arg, self.pos = op, arg, pos
        self.old_start, self.old_off = old_start, old_off
        self.target: _Ins | None = None
        self.start = self.off = 0
        self.ext = 0

    @property
    def line(self):
        return self.pos[0] if self.pos is not None else None

    def end(self) -> int:
        return self.off + 2 + 2 * _CACHES[self.op]


def _decode(code: CodeType) -> tuple[list[_Ins], dict[int, int]]:
    raw = code.co_code
    positions = list(code.co_positions())
    instrs: list[_Ins] = []
    index_at: dict[int, int] = {}
    i, ext, prefix = 0, 0, None
    while i < len(raw):
        op, arg = raw[i], raw[i + 1]
        if prefix is None:
            prefix = i
        if op == _EXT:
            ext = (ext | arg) << 8
            i += 2
            continue
        ins = _Ins(op, arg | ext, positions[i // 2], prefix, i)
        index_at[prefix] = index_at[i] = len(instrs)
        instrs.append(ins)
        ext, prefix = 0, None
        i += 2 + 2 * _CACHES[op]
    for ins in instrs:
        if ins.op in _JREL:
            sign = -1 if "BACKWARD" in _NAME[ins.op] else 1
            ins.target = instrs[index_at[ins.old_off + 2 + sign * ins.arg * 2]]
    return instrs, index_at


def _hook_block(hook_index: int, guard_index: int | None = None, after: _Ins | None = None) -> list[_Ins]:
    block = [_Ins(_OP["PUSH_NULL"], 0, None), _Ins(_OP["LOAD_CONST"], hook_index, None),
             _Ins(_OP["PRECALL"], 0, None), _Ins(_OP["CALL"], 0, None), _Ins(_OP["POP_TOP"], 0, None)]
    if guard_index is None:
        return block
    skip = _Ins(_OP["POP_JUMP_FORWARD_IF_FALSE"], 0, None)  # an empty flag list: the line is not armed
    skip.target = after
    return [_Ins(_OP["LOAD_CONST"], guard_index, None), skip] + block


def _ext_count(arg: int) -> int:
    count = 0
    while arg > 0xFF:
        arg >>= 8
        count += 1
    return count


def _layout(order: list[_Ins]) -> bool:
    for ins in order:
        ins.ext = _ext_count(ins.arg) if ins.target is None else ins.ext
    while True:
        offset = 0
        for ins in order:
            ins.start = offset
            ins.off = offset + 2 * ins.ext
            offset = ins.end()
        changed = False
        for ins in order:
            if ins.target is None:
                continue
            delta = (ins.target.start - (ins.off + 2)) // 2
            if delta >= 0:
                if ins.op not in _FORWARD_OF and "BACKWARD" in _NAME[ins.op]:
                    return False
                ins.op = _FORWARD_OF.get(ins.op, ins.op)
                ins.arg = delta
            else:
                if ins.op not in _BACKWARD_OF:
                    return False  # FOR_ITER, SEND, JUMP_IF_*_OR_POP only jump forward
                ins.op = _BACKWARD_OF[ins.op]
                ins.arg = -delta
            need = _ext_count(ins.arg)
            if need > ins.ext:
                ins.ext = need
                changed = True
        if not changed:
            return True


def _varint_be(value: int, first: bool) -> bytes:
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(c | 64 for c in chunks[:-1]) + bytes([chunks[-1]])
    if first:
        out[0] |= 128
    return bytes(out)


def _varint_le(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint_le(((-value) << 1) | 1 if value < 0 else value << 1)


def _linetable(units: list, firstlineno: int) -> bytes:
    out = bytearray()
    line = firstlineno
    i = 0
    while i < len(units):
        pos = units[i]
        length = 1
        while i + length < len(units) and length < 8 and units[i + length] == pos:
            length += 1
        i += length
        start_line, end_line, col, end_col = pos if pos is not None else (None, None, None, None)
        if start_line is None:
            out.append(0x80 | (15 << 3) | (length - 1))
        elif col is None or end_col is None or end_line is None or end_line < start_line:
            out.append(0x80 | (13 << 3) | (length - 1))
            out += _svarint(start_line - line)
            line = start_line
        else:
            out.append(0x80 | (14 << 3) | (length - 1))
            out += _svarint(start_line - line) + _varint_le(end_line - start_line)
            out += _varint_le(col + 1) + _varint_le(end_col + 1)
            line = start_line
    return bytes(out)


def _assemble(code: CodeType, instrs: list[_Ins], order: list[_Ins], handlers: list, consts: tuple,
              stack_extra: int) -> CodeType | None:
    if not _layout(order):
        return None
    raw = bytearray()
    units = []
    for ins in order:
        for shift in range(ins.ext, 0, -1):
            raw += bytes([_EXT, (ins.arg >> (8 * shift)) & 0xFF])
        raw += bytes([ins.op, ins.arg & 0xFF]) + bytes(2 * _CACHES[ins.op])
        units.extend([ins.pos] * (ins.ext + 1 + _CACHES[ins.op]))
    table = bytearray()
    for covered, target, depth, lasti in handlers:
        size = (covered[-1].end() - covered[0].start) // 2
        table += _varint_be(covered[0].start // 2, True) + _varint_be(size, False)
        table += _varint_be(target.start // 2, False) + _varint_be((depth << 1) | int(lasti), False)
    return code.replace(co_code=bytes(raw), co_consts=consts, co_linetable=_linetable(units, code.co_firstlineno),
                        co_exceptiontable=bytes(table), co_stacksize=code.co_stacksize + stack_extra)


def _handler_groups(code: CodeType, instrs: list[_Ins], index_at: dict[int, int], dest) -> list:
    """Exception table entries as (covered instructions, target, depth, lasti), split where ``dest`` differs."""
    groups = []
    for entry in dis._parse_exception_table(code):
        covered = [ins for ins in instrs if entry.start <= ins.old_start and ins.old_off < entry.end]
        if not covered:
            continue
        target = instrs[index_at[entry.target]]
        run = [covered[0]]
        run_dest = dest(target, covered[0])
        for ins in covered[1:]:
            this = dest(target, ins)
            if this is run_dest:
                run.append(ins)
            else:
                groups.append((run, run_dest, entry.depth, entry.lasti))
                run, run_dest = [ins], this
        groups.append((run, run_dest, entry.depth, entry.lasti))
    return groups


def rebuild(code: CodeType) -> CodeType | None:
    """Usage: ``rebuild(code)``; decode and re-assemble without hooks (a self-check of the assembler)."""
    return instrument(code, frozenset(), None, force=True)


def instrument(code: CodeType, lines: frozenset[int], hook: Any, force: bool = False,
               guards: dict[int, list] | None = None) -> CodeType | None:
    """A copy of ``code`` calling ``hook()`` right before each line event of ``lines``; ``code`` itself when
    no such event can happen; None when the code cannot be re-assembled (Python version, unusual jumps).

    With ``guards`` (line -> a ``GuardFlag``, for every line of ``lines``), each hook first tests its line's
    list (``LOAD_CONST flag; POP_JUMP_FORWARD_IF_FALSE``): an empty list skips the call, so lines are armed
    and disarmed later by filling and emptying the lists, without compiling again."""
    if not SUPPORTED:
        return None
    instrs, index_at = _decode(code)
    first = next((i for i, ins in enumerate(instrs) if ins.op == _OP["RESUME"]), None)
    if first is None:
        return None
    if any(type(flag) is not GuardFlag for flag in (guards or {}).values()):
        raise TypeError("guards must be GuardFlag objects (a code object's constants must stay hashable)")
    hook_index = len(code.co_consts)
    consts = code.co_consts + ((hook,) if hook is not None else ())
    guard_at: dict[int, int] = {}
    for line in sorted(guards or ()):
        guard_at[line] = len(consts)
        consts += (guards[line],)
    sources: dict[int, list[_Ins]] = {}
    for ins in instrs:
        if ins.target is not None:
            sources.setdefault(id(ins.target), []).append(ins)
    entries = dis._parse_exception_table(code)
    handler_targets = {entry.target for entry in entries}
    hooked: dict[int, _Ins] = {}  # id(instruction) -> first instruction of its hook block
    inline_blocks: dict[int, list[_Ins]] = {}
    blocks: list[_Ins] = []
    for idx in range(first + 1, len(instrs)):
        ins = instrs[idx]
        if ins.line is None or ins.line not in lines or ins.op == _OP["RESUME"]:
            continue
        prev = instrs[idx - 1]
        # the instruction after the first RESUME always reports its line (the previous line counts as -1)
        falls = prev.op not in _NO_FALLTHROUGH and (prev.line != ins.line or idx == first + 1)
        fires = falls or any(j.line != ins.line or (j.old_off >= ins.old_off and ins.op != _SEND)
                             for j in sources.get(id(ins), ()))
        fires = fires or ins.old_start in handler_targets or ins.old_off in handler_targets
        if not fires:
            continue
        block = _hook_block(hook_index, guard_at.get(ins.line), ins)
        hooked[id(ins)] = block[0]
        if falls:
            inline_blocks[id(ins)] = block
        else:  # only jumps and handlers can fire: a block at the end that jumps back
            jump_back = _Ins(_OP["JUMP_BACKWARD"], 0, None)
            jump_back.target = ins
            blocks.extend(block + [jump_back])
    if not hooked and not force:
        return code  # no line event of these lines can fire here: nothing to hook

    def entry_point(target: _Ins, source: _Ins) -> _Ins:
        """Where a jump or handler from ``source`` to ``target`` lands: the hook when a line event fires."""
        hook_start = hooked.get(id(target))
        if hook_start is None:
            return target
        backward = target.old_off < source.old_off and target.op != _SEND  # 3.11 skips 'yield from' loops
        return hook_start if (source.line != target.line or backward) else target

    for ins in instrs:
        if ins.target is not None:
            ins.target = entry_point(ins.target, ins)
    order: list[_Ins] = []
    for ins in instrs:
        order.extend(inline_blocks.get(id(ins), ()))
        order.append(ins)
    order.extend(blocks)
    handlers = _handler_groups(code, instrs, index_at, entry_point)
    return _assemble(code, instrs, order, handlers, consts, 2 if hooked else 0)


def _containing(instrs: list[_Ins], offset: int):
    """Index of the instruction whose units (prefix, opcode, caches) include ``offset`` (f_lasti may point
    into the inline caches of a CALL)."""
    for idx, ins in enumerate(instrs):
        if ins.old_start <= offset < ins.old_off + 2 + 2 * _CACHES[ins.op]:
            return idx
    return None


def may_reach(code: CodeType, lasti: int, lines: frozenset[int], all_lines: bool, consts: frozenset[int]) -> bool:
    """Usage: ``may_reach(frame.f_code, frame.f_lasti, lines, False, {3})``; whether a frame running ``code``
    at ``lasti`` can still execute an instruction of ``lines`` (any instruction if ``all_lines``) or load one
    of the constants numbered ``consts`` (nested code it could still turn into a function). Follows falling
    through, jumps and exception handlers; True when unsure."""
    if not SUPPORTED:
        return True
    instrs, index_at = _decode(code)
    start = _containing(instrs, lasti)
    if start is None:
        return True
    handlers = [(e.start, e.end, index_at.get(e.target)) for e in dis._parse_exception_table(code)]
    load_const = _OP["LOAD_CONST"]
    seen = {start}
    todo = [start]
    while todo:
        idx = todo.pop()
        ins = instrs[idx]
        if all_lines or (ins.line is not None and ins.line in lines) or (ins.op == load_const and ins.arg in consts):
            return True
        nexts = []
        if ins.op not in _NO_FALLTHROUGH and idx + 1 < len(instrs):
            nexts.append(idx + 1)
        if ins.target is not None:
            nexts.append(index_at[ins.target.old_off])
        for begin, end, target in handlers:
            if begin <= ins.old_off < end:
                if target is None:
                    return True
                nexts.append(target)
        for nxt in nexts:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def first_line(code: CodeType):
    """Usage: ``first_line(func.__code__)``; the line of the first instruction after ``RESUME`` (pdb's
    first executable line of a function), or None."""
    seen_resume = False
    for ins in dis.get_instructions(code):
        if seen_resume and ins.positions is not None and ins.positions.lineno is not None:
            return ins.positions.lineno
        if ins.opname == "RESUME":
            seen_resume = True
    return None
