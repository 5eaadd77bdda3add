"""CycleState: a per-scheduling-attempt keyed store shared by the plugins of one profile.

Port of k8s.io/kube-scheduler/framework/cycle_state.go. Values stored should implement ``clone()``
when a plugin mutates them in PreFilterExtensions (add_pod/remove_pod), because preemption and
explain run filters against cloned states.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubesched.framework.status import Status


class StateData(Protocol):
    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data", "pre_filter_narrowing", "pre_filter_rejecting", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        #: Plugins whose PreFilter returned Skip: their Filter is not run this cycle.
        self.skip_filter_plugins: set[str] = set()
        #: Plugins whose PreScore returned Skip: their Score is not run this cycle.
        self.skip_score_plugins: set[str] = set()
        #: PreFilter plugins that narrowed the candidate nodes; those that rejected the pod, with
        #: their rejections (every one: Unschedulable does not stop the others, kubernetes#119770).
        self.pre_filter_narrowing: list[str] = []
        self.pre_filter_rejecting: dict[str, Status] = {}

    def read(self, key: str) -> Any:
        """Return the value for key; raises KeyError naming the key when absent (upstream ErrNotFound)."""
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"cycle state has no key {key!r}") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        c = CycleState()
        for k, v in self._data.items():
            clone = getattr(v, "clone", None)
            c._data[k] = clone() if callable(clone) else v
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.pre_filter_narrowing = list(self.pre_filter_narrowing)
        c.pre_filter_rejecting = dict(self.pre_filter_rejecting)
        return c
