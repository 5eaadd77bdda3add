"""Plugin result codes and the Status value.

Port of k8s.io/kube-scheduler/framework/interface.go (Code, Status). A Status is immutable; the
runtime stamps the plugin name on statuses returned by plugins so reasons can be traced back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path


class Code(IntEnum):
    """Upstream framework.Code, same order and meaning."""

    SUCCESS = 0
    #: An internal error: the pod is requeued with backoff, the message is not a scheduling verdict.
    ERROR = 1
    #: The pod does not fit now but may after the cluster changes (preemption may help).
    UNSCHEDULABLE = 2
    #: The pod does not fit and preemption on this node cannot help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    #: A Permit plugin asks the pod to wait before binding.
    WAIT = 4
    #: PreFilter/PreScore/Bind: the plugin does not apply to this pod; its later points are skipped.
    SKIP = 5
    #: Used by queueing: the pod waits for something external (not a scheduling failure).
    PENDING = 6


_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


# The predicates below run several times per plugin call: module constants spare the enum
# class attribute lookup (~70 ns each, ~2 % of a scheduling cycle).
_SUCCESS_CODE = Code.SUCCESS
_ERROR_CODE = Code.ERROR
_SKIP_CODE = Code.SKIP
_WAIT_CODE = Code.WAIT
_REJECTED_CODES = frozenset((Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))


def code_name(code: Code) -> str:
    return _CODE_NAMES[code]


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one plugin call: a code, human reasons and the plugin that produced it."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    #: The exception behind an Error raised by a plugin (``from_exception``), for tracebacks.
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    # -- constructors -------------------------------------------------------------------------
    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE, reasons, plugin)

    @staticmethod
    def unresolvable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @staticmethod
    def error(message: str, plugin: str = "") -> Status:
        return Status(Code.ERROR, (message,), plugin)

    @staticmethod
    def from_exception(exc: BaseException, plugin: str = "") -> Status:
        """An Error for an exception a plugin raised (upstream ``AsStatus(err)``): its type, message
        and where it was raised (the innermost frame), e.g. ``KeyError: 'r1x' (rackcap.py:42 in
        filter)``; the exception itself is kept for ``--debug`` tracebacks."""
        where = ""
        tb = exc.__traceback__
        if tb is not None:
            while tb.tb_next is not None:
                tb = tb.tb_next
            code = tb.tb_frame.f_code
            where = f" ({Path(code.co_filename).name}:{tb.tb_lineno} in {code.co_name})"
        text = str(exc)
        message = f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"
        return Status(Code.ERROR, (message,), plugin, exc)

    @staticmethod
    def skip(plugin: str = "") -> Status:
        # Statuses are immutable: every plugin's PreFilter/PreScore Skip can share one (a pod
        # that skips six plugins made six objects per cycle).
        return _SKIP if not plugin else Status(Code.SKIP, (), plugin)

    @staticmethod
    def wait(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.WAIT, reasons, plugin)

    # -- predicates (upstream names) ----------------------------------------------------------
    @property
    def is_success(self) -> bool:
        return self.code == _SUCCESS_CODE

    @property
    def is_skip(self) -> bool:
        return self.code == _SKIP_CODE

    @property
    def is_wait(self) -> bool:
        return self.code == _WAIT_CODE

    @property
    def is_rejected(self) -> bool:
        """Unschedulable or UnschedulableAndUnresolvable (a verdict, not an error)."""
        return self.code in _REJECTED_CODES

    @property
    def is_error(self) -> bool:
        return self.code == _ERROR_CODE

    @property
    def message(self) -> str:
        """Reasons joined the way upstream's Status.Message() does."""
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.exception)

    def __str__(self) -> str:
        where = f" [{self.plugin}]" if self.plugin else ""
        return f"{code_name(self.code)}{where}: {self.message}" if self.reasons else f"{code_name(self.code)}{where}"


SUCCESS = Status()
_SKIP = Status(Code.SKIP)
