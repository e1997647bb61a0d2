"""Ranks of a distributed job: which rank this process is, and one prompt for the whole job.

Usage: ``rank_suffix()`` -> ``" r1"`` under a distributed launcher (``RANK`` set, or an initialised default
process group), else ``""``. ``DistributedMixin`` goes in front of the debugger's bases: at a stop in a job
of two or more ranks, only the interactive rank (``LLMPDB_RANK``, default 0) reads the terminal; every other
rank waits at the same stop through the c10d store (``llmpdb.ranks.wait``) and resumes when it continues.
``quit`` (or Ctrl-D) on the prompting rank ends every rank with exit status 3. A stop the interactive rank
does not reach within ``LLMPDB_RANK_GRACE`` seconds (default 5) is prompted by the rank that made it, in
turn: at most one rank holds the terminal (a store lock). Under ``python -m llmpdb`` only the interactive
rank stops at the script's first line; the others run on to their first breakpoint. Never imports torch:
the process group is read only when the debuggee loaded ``torch.distributed``, and the store is reached
only under a launcher (``WORLD_SIZE`` of 2 or more) or an initialised group.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys

from .commands import RankCommands
from .dump import start_watcher
from .launcher import launcher_pid, stop_restarts
from .terminal import message_on_terminal, prompt_terminal, stderr_is_discarded
from .wait import PROMPT, QUIT, RESUME, StepWatchdog, wait_at_stop, wait_for_terminal
from .store import RankJob, StoreUnavailable, connect_store
from ..identity import current_rank, initialised_dist, interactive_rank, rank_suffix, world_size  # noqa: F401 (rank_suffix: the old home)
from ..session import SESSION

__all__ = ["current_rank", "rank_suffix", "world_size", "interactive_rank", "rank_job", "DistributedMixin",
           "QUIT_STATUS", "share_if_discarded"]

QUIT_STATUS = 3  # the exit status of every rank after `quit` on the prompting rank
_JOB: RankJob | None = None
_NO_STORE: str | None = None  # why no store could be reached (said once)
_GAVE_UP = False  # no store will ever be reachable: stop trying
_PROMPTING: list = []  # the debugger whose prompt is open: a recursive one (`debug CODE`) leaves the job alone


def rank_job() -> RankJob | None:
    """Usage: ``rank_job()``; this rank's view of a job of 2+ ranks, or None (single process, no store)."""
    global _JOB, _NO_STORE
    if _JOB is not None:
        return _JOB
    rank, world = current_rank(), world_size()
    if rank is None or world is None or world < 2 or _GAVE_UP:
        return None
    try:
        store, via = connect_store()
    except StoreUnavailable as exc:
        _NO_STORE = str(exc)  # said once at a stop; tried again at the next stop until the group exists
        _give_up_if_final()
        return None
    _JOB = RankJob(store, rank, world, interactive_rank(), via,
                   launcher_pid=os.getppid() if via.startswith("torchrun") else 0)
    SESSION.relay = share_if_discarded
    atexit.register(_JOB.at_exit)
    return _JOB


def share_if_discarded(line: str) -> None:
    """Usage: ``share_if_discarded(log_line)`` after writing it to standard error: when that is discarded
    (``--local-ranks-filter``) in a job, the visible ranks print it for this one (``rank_wait.relay_notices``)."""
    job = _JOB
    if job is None or not stderr_is_discarded():
        return
    try:
        job.notify(line)
    except Exception:  # the store may be gone: the line stays where it was written
        pass


def _give_up_if_final() -> None:
    """Stop trying once no store can appear any more: under torchrun, or after init_process_group."""
    global _GAVE_UP
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    _GAVE_UP = agent or initialised_dist() is not None


def store_gone_reason(job: RankJob, exc: BaseException) -> str:
    """Usage: ``store_gone_reason(job, exc)``; why the job's store failed, in words, for one line."""
    if job.launcher_gone():
        return f"torchrun (pid {job.launcher_pid}) is gone, and the job's store with it"
    return f"the job's store is gone (torchrun ended?): {type(exc).__name__}"


def _stop_identity(frame, tb) -> tuple[str, str, str]:
    """(location, stop id, where): ``__main__:52``, ``__main__:52#2`` (this rank's 2nd hit), a display."""
    if frame is None and tb is not None:
        while tb.tb_next is not None:
            tb = tb.tb_next
        frame = tb.tb_frame
    if frame is None:
        return "?", "?#1", "?"
    code, line = frame.f_code, frame.f_lineno
    module = frame.f_globals.get("__name__") if type(frame.f_globals) is dict else None
    location = f"{module if isinstance(module, str) else code.co_filename}:{line}"
    if tb is not None:
        location = "post-mortem@" + location
    hits = SESSION.memory("rank-hits", dict)
    hits[location] = hits.get(location, 0) + 1
    return location, f"{location}#{hits[location]}", _where(frame)


def _where(frame) -> str:
    """``examples/ddp_train.py:52 (main)``: where ``frame`` is, for `ranks` and messages."""
    code = frame.f_code
    path = code.co_filename
    try:
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else path
    except ValueError:
        pass
    return f"{path}:{frame.f_lineno} ({code.co_name})"


def _linger_for_waiting_ranks(job: RankJob, most: float = 3.0) -> None:
    """After a quit announced in a job without torchrun's agent (the default group's store, which rank 0's
    process hosts): wait, at most ``most`` seconds, until no rank still waits or queues at a stop, so that
    each sees the quit (and ends) before the store goes away with this process."""
    import time

    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        if not any(record is not None and record.state in ("waiting", "queued")
                   for rank, record in job.records().items() if rank != job.rank):
            return
        time.sleep(0.05)


def _under_torchrun() -> bool:
    """A worker of a live torchrun agent: SIGINT there comes from the agent shutting the job down."""
    return bool(os.environ.get("TORCHELASTIC_RUN_ID")) and launcher_pid() is not None


def _exception_name() -> str:
    exc = sys.exc_info()[1]
    return type(exc).__name__ if exc is not None else "an exception"


class DistributedMixin(RankCommands):
    """One prompt for the whole job (see the module doc); a no-op outside a job of 2+ ranks."""

    _rank_origin: str | None = None  # the stop this rank's prompt began at; kept while the user steps
    _rank_where = ""  # where that stop is, for messages
    _rank_handover: int | None = None  # `rank K` was typed: hand the terminal to rank K
    _rank_watchdog: StepWatchdog | None = None  # running while a step is under way (see StepWatchdog)
    _rank_warned = False
    _rank_interrupts = 0  # Ctrl-C in a row at this prompt

    def _rank_job(self) -> RankJob | None:
        fresh = _JOB is None
        job = rank_job()
        if job is not None and fresh:  # the first stop in this job: register it, answer `ranks --job`
            from .jobs import register_job

            register_job(job.world)
            start_watcher(job, self._rank_dump_debugger)
        if job is None and _NO_STORE is not None and not self._rank_warned:
            self._rank_warned = True
            self.message(f"llmpdb{rank_suffix()}: {_NO_STORE}; this rank stops on its own")
        return job

    def _rank_wait(self, job: RankJob, stop: str) -> tuple[str, str]:
        """``wait_at_stop``; a store that fails while this rank waits (the rank or launcher hosting it ended,
        e.g. rank 0 quit in a job started without torchrun) ends this rank: nobody is left to continue it."""
        try:
            return wait_at_stop(job, stop, say=self._rank_say)
        except Exception as exc:
            self._rank_end_store_gone(job, exc)
            raise  # not reached: _rank_end_store_gone exits

    def _rank_end_store_gone(self, job: RankJob, exc: BaseException) -> None:
        """The store failed at a stop of a rank that does not hold the terminal: nobody is left to continue it,
        and a prompt of its own would read the keyboard with the prompting rank (#23). One line, then end."""
        message_on_terminal(self, f"llmpdb r{job.rank}: {store_gone_reason(job, exc)}; rank {job.rank} does not "
                                  f"open a prompt of its own and ends too (exit status {QUIT_STATUS})")
        self._flush_streams()
        os._exit(QUIT_STATUS)

    def _rank_say_store_gone(self, job: RankJob, exc: BaseException) -> None:
        """The prompting rank: say once that the store is gone; it keeps the job's one prompt."""
        if job.gone_said:
            return
        job.gone_said = True
        self.message(f"llmpdb r{job.rank}: {store_gone_reason(job, exc)}; rank {job.rank} keeps the prompt and "
                     "stops on its own (the other ranks end at their next stop)")

    def _rank_say(self, line: str) -> None:
        message_on_terminal(self, line)
        self._flush_streams()

    def _rank_dump_debugger(self, out):
        """A debugger of this class on ``out``, for the watcher thread's `stack-model` and `shapes`."""
        return type(self)(stdout=out, nosigint=True, readrc=False, headless_tour=[], color=False, width=100)

    def stop_ranks(self, stop, proceed):
        """Stop stage ``ranks`` (``debugger/pipeline.py``): in a job of 2+ ranks, one prompt for the job."""
        frame, tb = stop.frame, stop.tb_or_exc
        job = self._rank_job()
        if job is None or (_PROMPTING and _PROMPTING[-1] is not self):  # `debug CODE`: inside our prompt
            return proceed()
        if self._rank_watchdog is not None:  # a step ended at a stop: it was not stuck in a collective
            self._rank_watchdog.cancel()
            self._rank_watchdog = None
        if self._rank_origin is not None and frame is not None:  # a step (n/s/until) stopped: `ranks` shows the new line
            try:
                job.publish("prompt", _where(frame), self._rank_origin)
            except Exception:  # the store is gone: the prompt still opens
                pass
        failure = tb if isinstance(tb, BaseException) else sys.exc_info()[1]
        if tb is not None and isinstance(failure, KeyboardInterrupt) and _under_torchrun():
            self._rank_end_on_sigint(job)  # a rank without llmpdb's handler: the same SIGINT from torchrun
        try:
            if self._rank_origin is None and not self._rank_enter(job, frame, tb):
                self.initial_stop = False
                job.publish("running")
                self.set_continue()
                return None
        except Exception as exc:  # the store failed (the launcher is gone?)
            if not job.is_interactive and tb is None:
                self._rank_end_store_gone(job, exc)  # never a second prompt on the terminal
            self._rank_say_store_gone(job, exc)  # the interactive rank (or a post-mortem) stops like plain pdb
            result = proceed()
            if self.quitting:  # `q` there: end this rank as `q` does in a job, not with BdbQuit's traceback
                message_on_terminal(self, f"llmpdb r{job.rank}: quit on rank {job.rank}; the job's store is gone, "
                                          f"so the other ranks are not told (exit status {QUIT_STATUS})")
                self._flush_streams()
                os._exit(QUIT_STATUS)
            return result
        again = True
        while again:  # again: the terminal came back to this rank at the same stop (after `rank K`)
            _PROMPTING.append(self)
            try:
                with prompt_terminal(self):  # torchrun may hide this rank's output: use the terminal
                    result = proceed()
            finally:
                _PROMPTING.pop()
                again = self._rank_after_prompt_safely(job)
        return result

    def _rank_after_prompt_safely(self, job: RankJob) -> bool:
        try:
            return self._rank_after_prompt(job)
        except Exception as exc:  # never raise into the program from the debugger's own bookkeeping
            self._rank_say_store_gone(job, exc)
            return False

    def sigint_handler(self, signum, frame):
        """Under torchrun a running worker gets SIGINT only from the agent, which forwards the terminal's Ctrl-C
        to every rank while it shuts the job down (and SIGKILLs what is left 30 s later): a prompt opened now
        would be killed underneath the user, so this rank ends at once, saying so in one line."""
        job = _JOB
        if job is None or self.allow_kbdint or not _under_torchrun():
            return super().sigint_handler(signum, frame)
        self._rank_end_on_sigint(job)

    def _rank_end_on_sigint(self, job: RankJob) -> None:
        message_on_terminal(self, f"llmpdb r{job.rank}: Ctrl-C: torchrun ends the job (it signals every rank and "
                                  f"kills them 30 s later); rank {job.rank} ends now (exit status 130)")
        self._flush_streams()
        os._exit(130)

    def precmd(self, line):
        self._rank_interrupts = 0  # a command was typed: Ctrl-C counts from zero again
        return super().precmd(line)

    def _cmdloop(self):
        """pdb's loop (a Ctrl-C at the prompt cancels the line), except that in a job Ctrl-C twice in a row
        ends every rank, as `quit` does: torchrun starts each rank in a session of its own, so the
        terminal's Ctrl-C reaches only the rank reading it."""
        job = _JOB
        if job is None or not hasattr(super(), "_cmdloop"):
            return super()._cmdloop()
        self._rank_interrupts = 0
        while True:
            try:
                self.allow_kbdint = True
                self.cmdloop()
                self.allow_kbdint = False
                return None
            except KeyboardInterrupt:
                self._rank_interrupts += 1
                if self._rank_interrupts >= 2:
                    self._rank_end(job, f"Ctrl-C twice on rank {job.rank}: every rank of the job ends", announce=True)
                self.message("--KeyboardInterrupt-- (Ctrl-C again ends every rank of the job, as `q` does)")

    def _rank_enter(self, job: RankJob, frame, tb) -> bool:
        """Decide this stop: True to prompt here (this rank then holds the terminal), False to run on."""
        location, stop, where = _stop_identity(frame, tb)
        policy = job.policy()
        job.interactive = policy["interactive"]  # `rank K` moves the prompt for every later stop
        if tb is None:
            if self.initial_stop and not job.is_interactive:
                self.rcLines = []  # -c commands belong to the first stop, which only the interactive rank makes
                return False
            if int(stop.rsplit("#", 1)[1]) <= int(policy["skip"].get(location, 0)):
                return False
            if not job.is_interactive and policy["mode"] == "off":
                return False
        if job.is_interactive and tb is None:
            joined = self._rank_join_if_prompted(job, stop, where)
            if joined is not None:
                return joined
        if job.is_interactive or tb is not None:  # a post-mortem queues at once: no other rank will come here
            if tb is not None:
                where = f"post-mortem of {_exception_name()} at {where}"
            job.publish("queued", where, stop)
            outcome, reason = wait_for_terminal(job)
            if tb is not None and not job.is_interactive and outcome == PROMPT:
                message_on_terminal(self, f"llmpdb r{job.rank}: rank {job.rank} failed: {where}; it takes the "
                                          "terminal (`ranks` shows the others)")
        else:
            job.publish("waiting", where, stop)
            outcome, reason = self._rank_wait(job, stop)
            if outcome == RESUME:
                return False
            if outcome == PROMPT:
                message_on_terminal(self, f"llmpdb r{job.rank}: {reason}")
        if outcome == QUIT:
            self._rank_end(job, f"{reason}; rank {job.rank} ends too", announce=False)
        job.publish("prompt", where, stop)
        self._rank_origin, self._rank_where = stop, where
        return True

    def _rank_join_if_prompted(self, job: RankJob, stop: str, where: str) -> bool | None:
        """The interactive rank arrives late at a stop the job already prompted for (another rank took the
        terminal after the grace): one prompt per stop, so it joins that stop, or runs on when it was already
        released. None when nobody prompted here: the caller queues for the terminal as usual."""
        if job.released(stop):
            message_on_terminal(self, f"llmpdb r{job.rank}: the job already stopped at {where} (another rank "
                                      f"prompted there); rank {job.rank} runs on")
            return False
        owner = job.terminal_owner()
        holder = job.record(owner) if owner is not None and owner != job.rank else None
        if holder is None or holder.stop != stop or holder.state not in ("prompt", "queued"):
            return None
        job.publish("waiting", where, stop)
        message_on_terminal(self, f"llmpdb r{job.rank}: rank {owner} is prompting at this stop for the job; "
                                  f"rank {job.rank} waits here and continues with the others")
        outcome, reason = self._rank_wait(job, stop)
        if outcome == QUIT:
            self._rank_end(job, f"{reason}; rank {job.rank} ends too", announce=False)
        if outcome == PROMPT:  # handed the terminal (`rank K`), or the prompting rank ended
            message_on_terminal(self, f"llmpdb r{job.rank}: {reason}")
            job.publish("prompt", where, stop)
            self._rank_origin, self._rank_where = stop, where
            return True
        job.publish("running")
        return False

    def _rank_after_prompt(self, job: RankJob) -> bool:
        """After the command loop: quit, hand over (True: the terminal came back here), step, or continue."""
        if self.quitting:
            self._rank_end(job, f"quit on rank {job.rank}: every rank of the job ends", announce=True)
        if self._rank_handover is not None:
            return self._rank_wait_after_handover(job)
        if getattr(self, "stoplineno", -1) != -1:  # next/step/until/return: the stop goes on, keep the terminal
            if self._rank_origin is not None:
                say = functools.partial(message_on_terminal, self)
                self._rank_watchdog = StepWatchdog(job, self._rank_origin, self._rank_where, say).start()
            return False
        stop, self._rank_origin = self._rank_origin, None
        if stop is not None:
            job.release(stop)
        job.unlock_terminal()
        job.publish("running")
        return False

    def _rank_wait_after_handover(self, job: RankJob) -> bool:
        """``rank K`` ended the command loop: give rank K the terminal, wait at this stop like any rank."""
        rank, self._rank_handover = self._rank_handover, None
        stop, where = self._rank_origin, self._rank_where
        job.hand_over(rank)
        job.publish("waiting", where, stop)
        job.unlock_terminal()
        outcome, reason = self._rank_wait(job, stop)
        if outcome == QUIT:
            self._rank_end(job, f"{reason}; rank {job.rank} ends too", announce=False)
        if outcome == PROMPT:
            message_on_terminal(self, f"llmpdb r{job.rank}: {reason}")
            job.publish("prompt", where, stop)
            return True
        self._rank_origin = None
        job.publish("running")
        self.set_continue()
        return False

    def _rank_end(self, job: RankJob, reason: str, *, announce: bool) -> None:
        """End this rank now, after telling the others (``announce``): os._exit, so nothing can hang."""
        try:
            if announce:
                job.announce_quit(f"quit on rank {job.rank}")
            job.publish("quit")
            if announce and not job.via.startswith("torchrun"):
                _linger_for_waiting_ranks(job)  # this process may host the store (no torchrun): let them see it
        except Exception as exc:  # the store may be gone: end anyway
            self.message(f"llmpdb r{job.rank}: cannot tell the other ranks: {type(exc).__name__}: {exc}")
        message_on_terminal(self, f"llmpdb r{job.rank}: {reason} (exit status {QUIT_STATUS})")
        self._flush_streams()

        def say(line: str) -> None:
            message_on_terminal(self, line)
            self._flush_streams()

        stop_restarts(job, say)
        os._exit(QUIT_STATUS)

    def _flush_streams(self) -> None:
        for stream in (self.stdout, sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
