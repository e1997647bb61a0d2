"""The ``tokens`` command: input ids decoded token by token with the tokenizer in sight.

Usage (at the prompt)::

    tokens                       the input_ids (or inputs) in the frame, with the tokenizer found by type
    tokens batch --row 1         one row of a batch
    tokens ids --tokenizer tok   name the tokenizer when several are in sight
"""

from __future__ import annotations

from ._command import CommandError, command, parse_args, whole_number

__all__ = ["TokensCommands"]

ROW_LIMIT = 4


_row = whole_number(0, 10**9)


class TokensCommands:
    """Command mixin: ``tokens``."""

    def _tokens_tokenizer(self, expr: str | None):
        from ..inspect.tokens import find_tokenizers, is_tokenizer
        if expr:
            tokenizer = self.eval_in_frame(expr)
            if not is_tokenizer(tokenizer):
                raise CommandError(f"{expr} is a {type(tokenizer).__name__}, not a transformers tokenizer")
            return tokenizer
        found = find_tokenizers(self.frame_locals(), self.frame_globals())
        if not found:
            raise CommandError("no tokenizer in the frame or its globals (a PreTrainedTokenizerBase); "
                               "give one: tokens EXPR --tokenizer TOK")
        if len(found) > 1:
            names = ", ".join(f"{n} ({type(t).__name__})" for n, t in found)
            raise CommandError(f"several tokenizers in sight: {names}; pick one with --tokenizer NAME")
        return found[0][1]

    @command
    def do_tokens(self, arg):
        """tokens [EXPR] [--row N] [--tokenizer TOK]
        input_ids decoded token by token: position, id, token, its text, and a note (pad / special / a
        pad id that is attended). Per row: length, attended positions, padding and its side; the
        tokenizer's padding_side, pad id and special tokens; a warning when the length equals the
        tokenizer's model_max_length (probably truncated). EXPR: a BatchEncoding or dict with input_ids
        (its attention_mask is used), a tensor of ids or a list; default: input_ids, else a dict-like
        holding input_ids, in the frame. The tokenizer is found in the frame or its globals by its type.
        Example: tokens inputs["input_ids"] --row 1"""
        from ..inspect.tokens import find_inputs, split_inputs, token_report
        from ..render.tokens import render_tokens
        args = parse_args(arg, self.do_tokens, options={"--row": _row, "--tokenizer": str})
        tokenizer = self._tokens_tokenizer(args.value("--tokenizer"))
        if args.rest:
            value = self.eval_in_frame(args.rest)
        else:
            found = find_inputs(self.frame_locals())
            if found is None:
                raise CommandError("no input_ids in the frame (nor a dict-like holding them): tokens EXPR")
            value = found[1]
        try:
            ids, mask = split_inputs(value)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        row = args.value("--row")
        if row is not None and row >= len(ids):
            raise CommandError(f"--row {row}: the batch has {len(ids)} rows")
        rows = [row] if row is not None else list(range(min(len(ids), ROW_LIMIT)))
        report = token_report(tokenizer, ids, mask, rows=rows)
        self.message(render_tokens(report, width=self.out_width(), style=self.out_style()))
        if row is None and len(ids) > ROW_LIMIT:
            self.message(f"({len(ids) - ROW_LIMIT} more rows of {len(ids)}: tokens --row N)")
