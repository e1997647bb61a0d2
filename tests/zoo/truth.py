"""Reading llmpdb's printed tables back, and the truth they are checked against.

Usage::

    rows = shapes_rows(text)               # {path: (shape, [dim names])}, abbreviations expanded
    wrong = misnamed(names, ["batch", "seq"])   # the names that are neither `?` nor the truth
    too_wide(text)                         # lines over 80 columns (pdb's own location lines excepted)
"""

from __future__ import annotations

import re

from .zoo_run import WIDTH

ROW = re.compile(r"^(\S+)\s+(\([0-9, ]*\))\s+\S+\s+.*?\s(\S+)$")
SYNONYMS = {
    "seq": {"seq", "q_seq", "k_seq", "kv_seq", "tgt_seq", "src_seq"},
    "hidden": {"hidden"},
    "intermediate": {"intermediate", "ffn", "ssm_inner"},
    "latent": {"kv_lora_rank"},                          # DeepSeek's MLA cache: keys hold the latent,
    "rope_key": {"qk_rope_head_dim", "head_dim"},        # values the rotary key (its config's head_dim)
    "conv_kernel": {"conv_kernel", "d_conv"},
    "ssm_state": {"ssm_state", "state_size", "d_state"},
}


def abbreviations(text: str) -> dict[str, str]:
    found = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("dims abbreviated:"):
            for more in lines[i + 1:]:
                if not more.startswith("  "):
                    break
                line += " " + more.strip()
            for pair in line.split(":", 1)[1].split(","):
                short, _, full = pair.strip().partition(" ")
                found[short] = full
    return found


def shapes_rows(text: str) -> dict[str, tuple[str, list[str]]]:
    """The rows of a `shapes` table: path -> (shape, dim names)."""
    short = abbreviations(text)
    rows = {}
    for line in text.splitlines():
        match = ROW.match(line)
        dims = re.split(r"\s{2,}", line)[-1]
        if match and ("·" in dims or re.fullmatch(r"[a-z_?]+", dims)):
            names = [short.get(n.strip(), n.strip()) for n in dims.split("·")]
            rows[match.group(1)] = (match.group(2), names)
    return rows


def misnamed(names: list[str], truth: list[str | None]) -> list[str]:
    """The names neither `?`, a literal size, nor the truth (``None``: only `?` or a size is right)."""
    wrong = []
    for name, role in zip(names, truth):
        if name == "?" or name.isdigit():
            continue
        if role is None or name not in SYNONYMS.get(role, {role}):
            wrong.append(f"{name} (truth {role or '?'})")
    if len(names) != len(truth):
        wrong.append(f"{len(names)} names for {len(truth)} dims")
    return wrong


def too_wide(text: str) -> list[str]:
    """Lines wider than the session's width; pdb's location (`[N] > file(line)`) and source (`-> ...`)
    lines are the file's and the user's text, left out."""
    return [line for line in text.splitlines()
            if len(line) > WIDTH and not re.match(r"^(\[ *\d+\] )?> |^-> ", line)]
