#!/usr/bin/env bash
# Regenerate every transcript shown in README.md, docs/commands.md and docs/tutorial.md from the real debugger.
#
# Usage:
#   docs/capture.sh                    # every transcript to stdout, each after a "==> NAME <==" line
#   docs/capture.sh NAME...            # only these transcripts (names: docs/capture.sh --list)
#   docs/capture.sh -o DIR [NAME...]   # write DIR/NAME.txt instead of printing
#   docs/capture.sh --check            # capture all, then check every block of the docs tagged
#                                      # <!-- capture: NAME --> against transcript NAME (exit 1 on drift)
#   docs/capture.sh --list             # the transcript names
#
# Sessions are fed through a pipe, so nothing is typed on a terminal: COLUMNS=100, NO_COLOR=1, and the
# program's own output is unbuffered so it lands where it happens. A pipe does not echo what is typed, so
# each command is written back after the `(llmpdb) ` prompt that read it. Paths are shortened: the
# site-packages prefix becomes `.../site-packages/`, the standard library's `.../lib/pythonX.Y/`, and the
# repository prefix is removed; the headless policy's timestamps read 2026-12-03T12:00:00Z. Everything else
# is the debugger's output, unedited. The docs quote runs of
# consecutive lines of these transcripts; `--check` verifies that every quoted run still appears as is,
# but for line numbers inside installed files (transformers, torch, the standard library; every file but
# the examples'): `modeling_llama.py:459`, `modeling_llama.py(241)` and `loss_utils.py:35` compare as
# `modeling_llama.py:N`... (and the table padding after them as two spaces), so a transformers release that
# only moves lines does not drift the docs. No typed command depends on such a line number: breakpoints
# inside transformers are set by function.
#
# Environment: PYTHON (default: python) runs the examples.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python}
NAMES=(infer-tour train-tour commands stepping help cli headless set-trace disable post-mortem)

# Run a command in a clean, fixed environment (no inherited llmpdb or breakpoint settings).
clean_env() {
    env -u LLMPDB_TOUR -u LLMPDB_DISABLE -u LLMPDB_BASE -u PYTHONBREAKPOINT -u TORCHDYNAMO_DISABLE \
        -u LLMPDB_HEADLESS -u LLMPDB_LISTEN -u LLMPDB_LOG -u LLMPDB_ATTACH_TIMEOUT -u CI -u LLMPDB_COLOR \
        LLMPDB_CONFIG=/nonexistent/llmpdb-config.toml \
        COLUMNS=100 NO_COLOR=1 PYTHONUNBUFFERED=1 EDITOR=vi \
        PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$@"
}

# Shorten paths and strip trailing blanks; with a commands file, write each command after its prompt.
postprocess() {
    "$PY" -c "$POSTPROCESS" "$REPO" "${1:-}"
}

POSTPROCESS=$(cat <<'PYEOF'
import re
import sys
import sysconfig

repo, commands_file = sys.argv[1], sys.argv[2]
text = sys.stdin.read()
if commands_file:
    with open(commands_file, encoding="utf-8") as handle:
        commands = handle.read().split("\n")[:-1]
    prompt, pieces, pos = "(llmpdb) ", [], 0
    for command in commands:
        at = text.find(prompt, pos)
        if at < 0:
            break
        pieces.append(text[pos:at + len(prompt)] + command + "\n")
        pos = at + len(prompt)
    text = "".join(pieces) + text[pos:]
paths = sysconfig.get_paths()
stdlib = paths["stdlib"].rstrip("/")
for prefix, short in ((paths["purelib"], ".../site-packages"), (paths["platlib"], ".../site-packages"),
                      (stdlib, ".../lib/" + stdlib.rsplit("/", 1)[-1]), (repo, None)):
    prefix = prefix.rstrip("/") + "/"
    text = text.replace(prefix, "" if short is None else short + "/")
text = re.sub(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b", "2026-12-03T12:00:00Z", text)
sys.stdout.write("\n".join(line.rstrip() for line in text.split("\n")))
PYEOF
)

# session DIR SHOWN_COMMAND -- ARGV... ; typed commands from the array CMDS. Runs ARGV in DIR.
session() {
    local dir=$1 shown=$2
    shift 3
    local commands
    commands=$(mktemp)
    printf '%s\n' "${CMDS[@]}" >"$commands"
    echo "\$ $shown"
    (cd "$dir" && clean_env "$@" <"$commands" 2>&1 || true) | postprocess "$commands"
    rm -f "$commands"
}

# shell DIR SHOWN_COMMAND -- ARGV... ; no input (not a terminal); shows the exit status when not 0.
shell() {
    local dir=$1 shown=$2 status=0
    shift 3
    echo "\$ $shown"
    local out
    out=$(cd "$dir" && clean_env "$@" </dev/null 2>&1) || status=$?
    printf '%s\n' "$out" | postprocess
    if [ "$status" != 0 ]; then echo "(exit status $status)"; fi
}

capture_infer_tour() {
    CMDS=(
        c                                        # -> stop 1, after the tokenizer
        "shapes inputs"
        "p inputs"
        c                                        # -> stop 2, at model(**inputs)
        shapes
        "where-forward model"
        "bm LlamaForCausalLM --once"
        c                                        # -> LlamaForCausalLM.forward
        stack-model
        shapes
        "bm layers.0.self_attn --once"
        c                                        # -> LlamaAttention.forward, layer 0, prefill
        "tbreak transformers/integrations/sdpa_attention.sdpa_attention_forward"  # by function, not line
        c                                        # -> the attention kernel: q/k/v after the projections
        shapes
        c                                        # -> stop 3, after the call
        "shapes outputs"
        kv
        "shapes outputs.logits --stats"
        "bm layers.0.self_attn --after 2 --once"
        c                                        # -> layer 0 attention, second decoding step of generate()
        shapes
        kv
        "kv --history"
        c
    )
    session "$REPO" "python -m llmpdb examples/infer.py" -- "$PY" -m llmpdb examples/infer.py
}

capture_train_tour() {
    local out_dir
    out_dir=$(mktemp -d)
    mkdir "$out_dir/out"
    CMDS=(
        "bm LlamaAttention --once"               # a class name can be armed before the model exists
        "b transformers/loss/loss_utils.fixed_cross_entropy"  # by function: called by ForCausalLMLoss
        b                                        # pdb's breakpoints, then the module breakpoints
        c                                        # -> layer 0 attention, step 0
        stack-model
        c                                        # -> fixed_cross_entropy
        up                                       # -> ForCausalLMLoss, after the label shift
        shapes
        "cl 1"
        c                                        # -> stop 1, before loss.backward()
        shapes
        "shapes --stats"
        "statediff snap before"
        c                                        # -> stop 2, before torch.save
        "statediff before"
        n
        "statediff model path"
        c
    )
    # Run from a fresh directory with OUT_DIR `out`, so the checkpoint path reads out/checkpoint.pt.
    session "$out_dir" "python -m llmpdb examples/train.py out" -- "$PY" -m llmpdb "$REPO/examples/train.py" out
    rm -rf "$out_dir"
}

capture_commands() {
    CMDS=(
        c
        c                                        # -> stop 2, at model(**inputs)
        root-model
        stack-model
        "shapes nosuch"
        "bm layers.*.mlp"
        "bm LlamaAttention if hidden_states.shape[1] > 1 --once"
        "bm nosuch"
        b
        c                                        # -> layer 0 attention, prefill
        model
        "sm --all"
        wf
        "wf self.q_proj --edit"
        kv
        "clear-module 9"
        "clear-module 1"
        bm
        c                                        # -> stop 3
        "kv 0 --stats"
        "statediff snap"
        "statediff model model.state_dict()"
        "statediff --list"
        c
    )
    session "$REPO" "python -m llmpdb examples/infer.py" -- "$PY" -m llmpdb examples/infer.py
}

capture_stepping() {
    CMDS=(
        c
        c                                        # -> stop 2, at model(**inputs)
        s                                        # -> LlamaForCausalLM.forward, plumbing stepped through
        "p type(self).__name__"
        sf                                       # -> the next module forward: LlamaModel
        sf                                       # -> model.embed_tokens
        c                                        # -> stop 3, after the call
        n
        n                                        # -> the generate() line
        step-all                                 # -> torch's no_grad decorator around generate()
        c
    )
    session "$REPO" "python -m llmpdb examples/infer.py" -- "$PY" -m llmpdb examples/infer.py
}

capture_help() {
    CMDS=(help "help shapes" "help stack-model" "help model" "help break-module" "help clear-module"
          "help where-forward" "help kv" "help statediff" "help break" "help EOF" q)
    session "$REPO" "python -m llmpdb examples/infer.py" -- "$PY" -m llmpdb examples/infer.py
}

capture_cli() {
    shell "$REPO" "python -m llmpdb --help" -- "$PY" -m llmpdb --help
    shell "$REPO" "python -m llmpdb --version" -- "$PY" -m llmpdb --version
    shell "$REPO" "LLMPDB_BASE=stdlib python -m llmpdb --version" -- env LLMPDB_BASE=stdlib "$PY" -m llmpdb --version
}

capture_headless() {
    shell "$REPO" "LLMPDB_TOUR='shapes inputs;kv' python -m llmpdb examples/infer.py </dev/null" -- \
        env "LLMPDB_TOUR=shapes inputs;kv" "$PY" -m llmpdb examples/infer.py
}

capture_set_trace() {
    CMDS=("shapes inputs" c where c c)
    session "$REPO" "PYTHONBREAKPOINT=llmpdb.set_trace python examples/infer.py" -- \
        env PYTHONBREAKPOINT=llmpdb.set_trace "$PY" examples/infer.py
}

capture_disable() {
    shell "$REPO" "PYTHONBREAKPOINT=0 python examples/infer.py" -- env PYTHONBREAKPOINT=0 "$PY" examples/infer.py
    shell "$REPO" "LLMPDB_DISABLE=1 python -m llmpdb -c continue examples/infer.py" -- \
        env LLMPDB_DISABLE=1 "$PY" -m llmpdb -c continue examples/infer.py
}

capture_post_mortem() {
    shell "$REPO" "LLMPDB_REPORT=/tmp/llmpdb-crash.txt python -m llmpdb -c continue examples/train.py /nonexistent </dev/null" -- \
        env LLMPDB_TOUR= LLMPDB_REPORT=/tmp/llmpdb-crash.txt "$PY" -m llmpdb -c continue examples/train.py /nonexistent
}

capture() {  # capture NAME: the transcript on stdout
    case "$1" in
        infer-tour) capture_infer_tour ;;
        train-tour) capture_train_tour ;;
        commands) capture_commands ;;
        stepping) capture_stepping ;;
        help) capture_help ;;
        cli) capture_cli ;;
        headless) capture_headless ;;
        set-trace) capture_set_trace ;;
        disable) capture_disable ;;
        post-mortem) capture_post_mortem ;;
        *) echo "capture.sh: unknown transcript '$1' (known: ${NAMES[*]})" >&2; return 2 ;;
    esac
}

check_docs() {  # check_docs DIR: every tagged block of docs/*.md against DIR/NAME.txt
    "$PY" - "$1" "$REPO/README.md" "$REPO/docs/commands.md" "$REPO/docs/tutorial.md" <<'PYEOF'
import os
import re
import sys

folder, docs = sys.argv[1], sys.argv[2:]
tag = re.compile(r"<!-- capture: ([\w-]+) -->\s*\n```[^\n]*\n(.*?)\n```", re.S)
# Every file named with a line number (`name.py:N`, `name.py(N)`, a path or the stack-model table's bare
# basename) is an installed one (transformers, torch, the standard library) unless it is an example's.
numbered = re.compile(r"([\w.-]+\.py)[(:]\d")
examples = set(os.listdir(os.path.join(os.path.dirname(docs[0]), "examples")))


def normalise(line, names):
    """Line numbers inside installed files become N; table padding after them (2+ blanks) two blanks."""
    if not names:
        return line
    pattern = r"\b(" + "|".join(map(re.escape, sorted(names))) + r")(\(|:)\d+(\)?)( {2,})?"
    return re.sub(pattern, lambda m: f"{m.group(1)}{m.group(2)}N{m.group(3)}" + ("  " if m.group(4) else ""),
                  line).rstrip()
problems = blocks = 0
for doc in docs:
    with open(doc, encoding="utf-8") as handle:
        source = handle.read()
    for match in tag.finditer(source):
        name, block = match.group(1), match.group(2)
        blocks += 1
        where = f"{os.path.basename(doc)}:{source.count(chr(10), 0, match.start()) + 1}"
        path = os.path.join(folder, name + ".txt")
        if not os.path.exists(path):
            print(f"{where}: no transcript named {name!r}")
            problems += 1
            continue
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        names = set(numbered.findall(text)) - examples
        lines = [normalise(line.rstrip(), names) for line in text.split("\n")]
        wanted = [normalise(line.rstrip(), names) for line in block.split("\n")]
        starts = [i for i, line in enumerate(lines) if line == wanted[0]]
        if not any(lines[i:i + len(wanted)] == wanted for i in starts):
            # Report the first line that breaks the best partial match.
            best = max((next((k for k in range(len(wanted)) if lines[i + k:i + k + 1] != wanted[k:k + 1]),
                              len(wanted)) for i in starts), default=0)
            print(f"{where}: [{name}] block differs from the transcript at its line {best + 1}: "
                  f"{wanted[best]!r}")
            problems += 1
print(f"checked {blocks} blocks: {problems} out of date")
sys.exit(1 if problems or not blocks else 0)
PYEOF
}

main() {
    local out_dir="" check=0
    case "${1:-}" in
        --list) printf '%s\n' "${NAMES[@]}"; return 0 ;;
        --check) check=1; shift ;;
        -o) out_dir=${2:?-o needs a folder}; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; return 0 ;;
    esac
    local names=("$@")
    if [ ${#names[@]} = 0 ]; then names=("${NAMES[@]}"); fi
    if [ $check = 1 ]; then
        out_dir=$(mktemp -d)
        names=("${NAMES[@]}")
    fi
    if [ -n "$out_dir" ]; then mkdir -p "$out_dir"; fi
    local name
    for name in "${names[@]}"; do
        case " ${NAMES[*]} " in
            *" $name "*) ;;
            *) echo "capture.sh: unknown transcript '$name' (known: ${NAMES[*]})" >&2; return 2 ;;
        esac
    done
    if [ -n "$out_dir" ]; then
        # Two captures at a time (each is one or more whole debugger runs; --check took a minute on two
        # cores one by one). Every session runs in its own process with its own temporary files.
        local pids=() status=0 pid
        for name in "${names[@]}"; do
            capture "$name" >"$out_dir/$name.txt" &
            pids+=("$!")
            if [ ${#pids[@]} -ge 2 ]; then
                wait "${pids[0]}" || status=$?
                pids=("${pids[@]:1}")
            fi
        done
        for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
        if [ $status != 0 ]; then return $status; fi
    else
        for name in "${names[@]}"; do
            echo "==> $name <=="
            capture "$name"
        done
    fi
    if [ $check = 1 ]; then
        local status=0
        check_docs "$out_dir" || status=$?
        rm -rf "$out_dir"
        return $status
    fi
}

main "$@"
