"""Stop signals around Lightning: Ctrl-C, SIGTERM and SIGHUP are caught wherever the run is
(before, between and inside ``fit`` and ``test``), given back to ``main`` as the stop they were,
and under DDP deferred to the ranks' agreement (``LastCheckpoint``) so that all save and stop at
the same step; a lost rank is one line naming the step to resume from."""

from __future__ import annotations

import re
import signal
from contextlib import contextmanager
from types import SimpleNamespace

from othello_learn.cli import STOP_SIGNALS, HangUp, Terminated, stop_signals_raise
from othello_learn.files import UserError, one_line


@contextmanager
def stops_around_lightning():
    """Lightning takes SIGTERM in ``fit`` and ``test`` only (it saves last.ckpt and stops at the
    next step); before and between them SIGTERM killed the process outright (no message, no
    exit 143) and a Ctrl-C that an import swallowed was lost (the run trained to its end). In the
    block SIGTERM and Ctrl-C raise (``StopOnce``) where Lightning is not listening; where it is,
    its handler calls this one, the handler it found, which leaves the stop to it. SIGHUP (a
    closed terminal, a dropped ssh session) is SIGTERM: Lightning's where it listens (else up to
    --checkpoint-minutes were lost), else raised as ``HangUp``; ``.hung_up`` remembers it.
    ``.stop.check()`` raises a swallowed stop (``interrupts_reraised`` calls it before fit and
    test). Signals ignored as the block begins (nohup's SIGHUP) stay ignored.

    While ``.defer`` is set (a DDP run's fit and test, ``interrupts_reraised``) a first stop is only
    noted in ``.pending`` (its signal's number): ``LastCheckpoint`` agrees on it with the other ranks
    after the step, and all save and stop there together; a stop raised at once would leave the
    others waiting in a collective the stopped rank never reaches. A second one stops at once."""
    said = SimpleNamespace(stop=None, hung_up=False, defer=False, pending=None)

    def noted(signum) -> bool:
        if said.defer and said.pending is None:
            said.pending = signum
            return True
        return False

    def handlers(stop):
        said.stop = stop

        def interrupt(signum, frame):
            if not noted(signum):
                stop(signum, frame)

        def term(signum, frame):
            if not noted(signum) and signal.getsignal(signal.SIGTERM) is term:  # else Lightning's called this one
                stop(signum, frame)

        def hang_up(signum, frame):
            said.hung_up = True
            if noted(signum):
                return
            sigterm = signal.getsignal(signal.SIGTERM)
            if sigterm is term or not callable(sigterm):
                stop(signum, frame)
            else:
                sigterm(signal.SIGTERM, frame)

        return {signal.SIGINT: interrupt, signal.SIGTERM: term, getattr(signal, "SIGHUP", None): hang_up}

    with stop_signals_raise({signal.SIGINT, *STOP_SIGNALS}, handlers):
        yield said


class SavedInterrupt(KeyboardInterrupt):
    """A stop once training had started: last.ckpt holds the progress, which ``main`` says.
    ``stop``: the stop it was (a KeyboardInterrupt for Ctrl-C, a ``Terminated`` for SIGTERM)."""

    def __init__(self, stop: KeyboardInterrupt):
        super().__init__()
        self.stop = stop


@contextmanager
def interrupts_reraised(saver, stops, distributed: bool = False):
    """Lightning turns Ctrl-C inside ``fit`` or ``test`` into sys.exit(1) after the callbacks'
    on_exception (LastCheckpoint saved), and SIGTERM into its SIGTERMException (a SystemExit)
    at the next step: give ``main`` the stop back, as it was raised (a ``Terminated`` as such,
    a ``HangUp`` where ``stops`` says SIGHUP was passed on as it), a ``SavedInterrupt`` where
    last.ckpt holds progress to resume from. A stop something swallowed is raised first.

    ``distributed`` (DDP): stops are deferred to the ranks' agreement (``stops_around_lightning``),
    one noted after the last agreement is raised as the block ends, and a lost process (another
    rank died, or the process group timed out) is one line naming the step to resume from."""
    stops.stop.check()
    stops.defer = distributed
    try:
        yield
    except RuntimeError as e:
        if not (distributed and _lost_process(e)):
            raise
        saved = f"last.ckpt holds step {saver.saved_step}" if saver.started else "no last.ckpt was saved yet"
        raise UserError(f"a training process was lost ({one_line(e)}); {saved}: rerun the same command to "
                        "resume") from None
    except SystemExit as e:
        from lightning.pytorch.utilities.exceptions import SIGTERMException  # loaded: this is inside fit or test

        interrupt = saver.interrupted_by
        if type(interrupt) is KeyboardInterrupt:  # Ctrl-C
            raise (SavedInterrupt(KeyboardInterrupt()) if saver.started else interrupt.with_traceback(None)) from None
        if isinstance(interrupt, KeyboardInterrupt):
            raise interrupt.with_traceback(None) from None
        if isinstance(e, SIGTERMException):
            stop = (KeyboardInterrupt() if stops.pending == signal.SIGINT else
                    HangUp() if stops.hung_up or stops.pending == getattr(signal, "SIGHUP", None) else Terminated())
            raise (SavedInterrupt(stop) if saver.started else stop) from None
        raise
    finally:
        stops.defer = False
    if stops.pending is not None:  # noted after the last step (in a validation or the test): raised now
        signum, stops.pending = stops.pending, None
        stop = {signal.SIGINT: KeyboardInterrupt, getattr(signal, "SIGHUP", None): HangUp}.get(signum, Terminated)()
        raise SavedInterrupt(stop) if saver.started else stop


def _lost_process(e: RuntimeError) -> bool:
    """Whether ``e`` is torch.distributed's: a peer gone (gloo's closed connection) or a collective
    timed out (the process group's timeout, NCCL's watchdog)."""
    import torch.distributed as dist

    return isinstance(e, getattr(dist, "DistError", ())) or bool(
        re.search(r"gloo|nccl|connection (closed|reset)|timed? ?out|peer", str(e), re.IGNORECASE))


def ranks_stop_together(trainer) -> None:
    """DDP: stops go through ``stops_around_lightning``'s deferral and ``LastCheckpoint``'s
    agreement, not Lightning's own SIGTERM handler, which broadcasts from inside the signal handler
    (a collective at whatever point each rank was, unmatched when a signal reaches one rank or two
    reach another). And the watch Lightning's launcher keeps on the ranks it starts, which SIGKILLs
    the launching process (rank 0) five seconds after another rank exits with an error, is left
    off: rank 0 learns of a lost rank from the process group (gloo at once, NCCL at --ddp-timeout)
    and ends with its own error line, and a stop's exit status is its own, not a kill's. Both are
    Lightning's private parts: where they are not there, its own behaviour stays."""
    from lightning.fabric.strategies.launchers import subprocess_script

    connector = getattr(trainer, "_signal_connector", None)
    if connector is not None and hasattr(connector, "register_signal_handlers"):
        connector.register_signal_handlers = lambda: None
    if hasattr(subprocess_script, "_launch_process_observer"):
        subprocess_script._launch_process_observer = lambda procs: None
