"""``python -m llmpdb`` as a user runs it: exit statuses, -c commands, post-mortem, headless runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    def work(n):
        total = n * 2
        breakpoint()
        return total
    print("result", work(21), "argv", sys.argv[1:], "dynamo", os.environ.get("TORCHDYNAMO_DISABLE"))
    """
)


def run_llmpdb(args, stdin_text=None, env=None, timeout=60, **kwargs):
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    full_env.pop("PYTHONBREAKPOINT", None) if "PYTHONBREAKPOINT" not in (env or {}) else None
    return subprocess.run(
        [sys.executable, "-m", "llmpdb", *args],
        input=stdin_text,
        stdin=subprocess.DEVNULL if stdin_text is None else None,
        capture_output=True, text=True, env=full_env, timeout=timeout, **kwargs,
    )


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "work.py"
    path.write_text(SCRIPT)
    return path


def test_commands_from_stdin_reach_breakpoint_and_finish(script):
    result = run_llmpdb([str(script), "--flag", "x"], "c\np total + 1\nc\n")
    assert result.returncode == 0, result.stderr
    assert "(llmpdb) 43" in result.stdout
    assert "result 42 argv ['--flag', 'x'] dynamo None" in result.stdout
    assert result.stdout.rstrip().endswith("llmpdb: the program finished")


def test_dash_c_commands_run_at_the_first_stop(script):
    result = run_llmpdb(["-c", "p 6 * 7", "-c", "continue", str(script)], "p total\nc\n")
    assert result.returncode == 0, result.stderr
    assert "42\n" in result.stdout
    assert "(llmpdb) 42" in result.stdout  # the breakpoint() stop printed `total`


def test_no_compile_sets_dynamo_off(script):
    result = run_llmpdb(["--no-compile", "-c", "c", str(script)], "c\n")
    assert "dynamo 1" in result.stdout


def test_headless_run_never_waits_and_runs_the_tour(script):
    result = run_llmpdb([str(script)], env={"LLMPDB_TOUR": "p total"})
    assert result.returncode == 0, result.stderr
    assert "(llmpdb tour) p total\n42" in result.stdout
    assert "llmpdb: no more input (no terminal); continuing" in result.stdout
    assert "result 42" in result.stdout


def test_sys_exit_status_is_kept(tmp_path):
    path = tmp_path / "exits.py"
    path.write_text("import sys\nsys.exit(3)\n")
    result = run_llmpdb([str(path)], "c\n")
    assert result.returncode == 3
    assert "llmpdb: the program exited via sys.exit(3)" in result.stdout


def test_uncaught_exception_opens_post_mortem_in_the_failing_frame(tmp_path):
    path = tmp_path / "fails.py"
    path.write_text("def broken(depth):\n    local_value = depth + 1\n    raise ValueError('bad depth')\nbroken(4)\n")
    result = run_llmpdb([str(path)], "c\np local_value\nq\n")
    assert result.returncode == 1
    assert "ValueError: bad depth" in result.stderr
    assert "llmpdb: uncaught exception; post-mortem debugging" in result.stdout
    assert "(llmpdb) 5" in result.stdout
    entries = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("File ")]
    assert entries == [f'File "{path}", line 4, in <module>', f'File "{path}", line 3, in broken'], result.stderr


def test_module_target(tmp_path):
    package = tmp_path / "pkgdemo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text("value = 7\nprint('module ran', value)\n")
    result = run_llmpdb(["-m", "pkgdemo.run"], "c\n", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "module ran 7" in result.stdout


@pytest.mark.parametrize("args, code, text", [
    ([], 2, "usage: python -m llmpdb"),
    (["--bogus"], 2, "llmpdb: unrecognized arguments: --bogus"),
    (["--help"], 0, "-c CMD, --command CMD"),
    (["/no/such/file.py"], 1, "/no/such/file.py"),
    (["--rank", "one", "x.py"], 2, "llmpdb: argument --rank: needs a rank number (0, 1, ...), not 'one'"),
    (["--headless", "nope", "x.py"], 2, "llmpdb: argument --headless: invalid choice: 'nope'"),
])
def test_usage_errors(args, code, text):
    result = run_llmpdb(args)
    assert result.returncode == code
    assert text in result.stdout + result.stderr


def test_a_file_named_like_a_subcommand_changes_nothing_and_help_lists_every_form(tmp_path):
    """A file named attach, open or ranks in the folder used to turn the subcommand into a script run."""
    for name in ("attach", "open", "ranks"):
        (tmp_path / name).write_text("print('the script ran')\n")
    listed = run_llmpdb(["attach"], cwd=tmp_path)
    assert "the script ran" not in listed.stdout and listed.returncode in (0, 1), listed.stdout + listed.stderr
    script = run_llmpdb(["./attach"], "c\n", cwd=tmp_path)
    assert "the script ran" in script.stdout, script.stdout + script.stderr
    ranks = run_llmpdb(["ranks", "--bogus"], cwd=tmp_path)
    assert ranks.returncode == 2 and "usage: python -m llmpdb ranks --job" in ranks.stderr
    helped = run_llmpdb(["--help"], env={"COLUMNS": "80"})
    assert "python -m llmpdb ranks --job [RUN_ID]" in helped.stdout
    assert max(len(line) for line in helped.stdout.splitlines()) <= 80, helped.stdout


def test_version_names_the_base():
    result = run_llmpdb(["--version"])
    assert result.returncode == 0
    assert result.stdout.startswith("llmpdb 0.1.0 on pdb")


SPAWN_SCRIPT = textwrap.dedent(
    """
    import multiprocessing, os, sys

    def square(x):
        return x * x, __name__

    if __name__ == "__main__":
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            print("squares", pool.map(square, range(5)))
        print("main", __name__, os.path.basename(__file__), sys.argv[1:])
    """
)


@pytest.mark.parametrize("as_module", [False, True], ids=["script", "module"])
def test_multiprocessing_spawn_runs_as_under_plain_python(tmp_path, as_module):
    (tmp_path / "spawner.py").write_text(SPAWN_SCRIPT)
    target = ["-m", "spawner"] if as_module else [str(tmp_path / "spawner.py")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    plain = subprocess.run([sys.executable, *target, "x"], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0, plain.stderr
    result = run_llmpdb(["-c", "continue", *target, "x"], timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    program = [line for line in result.stdout.splitlines() if line.startswith(("squares", "main"))]
    assert program == plain.stdout.splitlines(), result.stdout
    assert program[0] == "squares [(0, '__mp_main__'), (1, '__mp_main__'), (4, '__mp_main__'), (9, '__mp_main__')," \
                         " (16, '__mp_main__')]"


SHUTDOWN_SCRIPT = textwrap.dedent(
    """
    import atexit

    class RunsAtShutdown:
        def __del__(self):
            sum([1, 2])  # Python code while the interpreter clears every module's globals

    def f(x):
        return x + 1

    keep = RunsAtShutdown()
    atexit.register(sum, [3])
    breakpoint()
    f(0)
    print("done")
    """
)


@pytest.mark.parametrize("fast", ["0", "1"])
@pytest.mark.parametrize("launcher", ["hook", "cli"])
def test_a_breakpoint_left_set_makes_no_noise_at_interpreter_shutdown(tmp_path, fast, launcher):
    path = tmp_path / "shutdown.py"
    path.write_text(SHUTDOWN_SCRIPT)
    env = {**os.environ, "NO_COLOR": "1", "LLMPDB_FAST_BREAKPOINTS": fast}
    if launcher == "hook":  # PYTHONBREAKPOINT=llmpdb.set_trace python shutdown.py: pdb's trace stays on to the end
        env["PYTHONBREAKPOINT"] = "llmpdb.set_trace"
        command, typed = [sys.executable, str(path)], "b f\nc\nc\n"
    else:
        env.pop("PYTHONBREAKPOINT", None)
        command, typed = [sys.executable, "-m", "llmpdb", str(path)], "b f\nc\nc\nc\n"
    result = subprocess.run(command, input=typed, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "f()\n-> return x + 1" in result.stdout  # the breakpoint fired
    assert "done\n" in result.stdout
    assert result.stderr == ""  # was: Exception ignored in ... bdb.py ... dispatch_call ... TypeError
