"""Pod (anti-)affinity terms parsed once per pod, as upstream's ``framework.PodInfo`` holds them.

Ports of pkg/scheduler/framework/types.go (``AffinityTerm``, ``AffinityTerm.Matches``,
``WeightedAffinityTerm``, ``newAffinityTerm``, ``GetAffinityTerms``, ``getWeightedAffinityTerms``,
``getNamespacesFromPodAffinityTerm``, ``GetPodAffinityTerms`` / ``GetPodAntiAffinityTerms`` and
``PodInfo.Update``'s parse errors) and of interpodaffinity/plugin.go
``mergeAffinityTermNamespacesIfNotEmpty`` / ``GetNamespaceLabelsSnapshot``.

* ``namespaces``: the term's ``namespaces``, or the pod's own namespace when the term has neither
  ``namespaces`` nor a ``namespaceSelector``; the ``namespaceSelector`` compiled as a label
  selector (null: ``Nothing``, ``{}``: ``Everything``). A term matches a pod when the pod's
  namespace is listed or the selector matches the labels of the pod's namespace, and the label
  selector matches the pod's labels.
* ``matchLabelKeys`` / ``mismatchLabelKeys`` are *not* read: since v1.31 (MatchLabelKeysInPodAffinity)
  kube-apiserver merges them into ``labelSelector`` when the pod is created
  (pkg/registry/core/pod/strategy.go ``applyMatchLabelKeysAndMismatchLabelKeys``), and the
  scheduler's ``newAffinityTerm`` (v1.37) ignores them; so does this port.
* Parse errors are kept (``PodInfo.Update``: ``requiredAffinityTerms: <err>`` ...; several are
  printed as ``utilerrors.NewAggregate`` does, ``[e1, e2]``); the incoming pod is then rejected at
  PreFilter, and for existing pods the category that failed is empty, as upstream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubesched.plugins.helpers.label_selector import NOTHING, Selector, SelectorError, label_selector_as_selector
from kubesched.snapshot.affinity_index import Clause
from kubesched.snapshot.pod import PodInfo

NAME: Final = "InterPodAffinity"

#: Kinds of terms existing pods carry, as kept in the table's term registry.
REQUIRED_ANTI: Final = "requiredAnti"
REQUIRED_AFFINITY: Final = "requiredAffinity"
PREFERRED_AFFINITY: Final = "preferredAffinity"
PREFERRED_ANTI: Final = "preferredAnti"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """framework.AffinityTerm: a v1.PodAffinityTerm with its selectors compiled."""

    namespaces: frozenset[str]
    selector: Selector
    topology_key: str
    namespace_selector: Selector = NOTHING

    @property
    def key(self) -> Hashable:
        """Equal keys, equal terms (replicas of a workload share one)."""
        return (tuple(sorted(self.namespaces)), self.selector.signature, self.topology_key,
                self.namespace_selector.signature)

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: namespace listed, or the namespace's labels selected; then the
        pod's labels selected."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(pod.labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int

    @property
    def key(self) -> Hashable:
        return (self.weight, self.term.key)


@dataclass(frozen=True, slots=True)
class ParsedAffinity:
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti: tuple[WeightedAffinityTerm, ...] = ()
    #: The raw preferred lists are non-empty (PreScore's ``hasPreferred...Constraints``).
    has_preferred: bool = False
    error: str | None = None
    #: The registry items of this pod as an existing pod (``existing_pod_terms``).
    items: tuple[tuple[str, Hashable, Any], ...] = field(default=(), compare=False)


EMPTY: Final = ParsedAffinity()


def _terms_list(section: Any, key: str) -> list[Any]:
    if not isinstance(section, Mapping):
        return []
    raw = section.get(key)
    return raw if isinstance(raw, list) else []


def new_affinity_term(pod: PodInfo, raw: Any) -> AffinityTerm:
    """newAffinityTerm. Raises SelectorError."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"pod affinity term must be an object, got {raw!r}")
    selector = label_selector_as_selector(raw.get("labelSelector"))
    listed = raw.get("namespaces") or []
    ns_sel_raw = raw.get("namespaceSelector")
    # getNamespacesFromPodAffinityTerm
    namespaces = frozenset([pod.namespace]) if not listed and ns_sel_raw is None else frozenset(str(n) for n in listed)
    ns_selector = label_selector_as_selector(ns_sel_raw)
    return AffinityTerm(namespaces, selector, str(raw.get("topologyKey") or ""), ns_selector)


def _affinity_terms(pod: PodInfo, raw_terms: Sequence[Any]) -> tuple[AffinityTerm, ...]:
    return tuple(new_affinity_term(pod, t) for t in raw_terms)


def _weighted_terms(pod: PodInfo, raw_terms: Sequence[Any]) -> tuple[WeightedAffinityTerm, ...]:
    out = []
    for t in raw_terms:
        if not isinstance(t, Mapping):
            raise SelectorError(f"weighted pod affinity term must be an object, got {t!r}")
        weight = t.get("weight") or 0
        out.append(WeightedAffinityTerm(new_affinity_term(pod, t.get("podAffinityTerm")), int(weight)))
    return tuple(out)


def _parse(pod: PodInfo) -> ParsedAffinity:
    affinity = pod.affinity
    pa = affinity.get("podAffinity")
    paa = affinity.get("podAntiAffinity")
    if not pa and not paa:
        return EMPTY
    req_aff_raw = _terms_list(pa, "requiredDuringSchedulingIgnoredDuringExecution")
    req_anti_raw = _terms_list(paa, "requiredDuringSchedulingIgnoredDuringExecution")
    pref_aff_raw = _terms_list(pa, "preferredDuringSchedulingIgnoredDuringExecution")
    pref_anti_raw = _terms_list(paa, "preferredDuringSchedulingIgnoredDuringExecution")
    errors: list[str] = []
    req_aff: tuple[AffinityTerm, ...] = ()
    req_anti: tuple[AffinityTerm, ...] = ()
    pref_aff: tuple[WeightedAffinityTerm, ...] = ()
    pref_anti: tuple[WeightedAffinityTerm, ...] = ()
    try:
        req_aff = _affinity_terms(pod, req_aff_raw)
    except (SelectorError, TypeError, ValueError) as e:
        errors.append(f"requiredAffinityTerms: {e}")
    try:
        req_anti = _affinity_terms(pod, req_anti_raw)
    except (SelectorError, TypeError, ValueError) as e:
        errors.append(f"requiredAntiAffinityTerms: {e}")
    try:
        pref_aff = _weighted_terms(pod, pref_aff_raw)
    except (SelectorError, TypeError, ValueError) as e:
        errors.append(f"preferredAffinityTerms: {e}")
    try:
        pref_anti = _weighted_terms(pod, pref_anti_raw)
    except (SelectorError, TypeError, ValueError) as e:
        errors.append(f"preferredAntiAffinityTerms: {e}")
    error = None
    if errors:
        error = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    items: list[tuple[str, Hashable, Any]] = []
    items.extend((REQUIRED_ANTI, t.key, t) for t in req_anti)
    items.extend((REQUIRED_AFFINITY, t.key, t) for t in req_aff)
    items.extend((PREFERRED_AFFINITY, wt.key, wt) for wt in pref_aff)
    items.extend((PREFERRED_ANTI, wt.key, wt) for wt in pref_anti)
    return ParsedAffinity(req_aff, req_anti, pref_aff, pref_anti, bool(pref_aff_raw or pref_anti_raw), error,
                          tuple(items))


#: Parsed terms shared by the pods that write them alike (a workload's replicas): the parse reads
#: only the raw terms and the pod's namespace (the default of a term's namespaces), so equal keys
#: give equal results. Bounded; cleared when full.
_SHARED: dict[tuple[str, str, str], ParsedAffinity] = {}
_SHARED_MAX: Final = 4096


def parsed_affinity(pod: PodInfo) -> ParsedAffinity:
    """The pod's terms, parsed once (kept in ``pod.memo``, and shared with pods written alike)."""
    got = pod.memo.get(NAME)
    if isinstance(got, ParsedAffinity):
        return got
    affinity = pod.affinity
    pa, paa = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
    if not pa and not paa:
        parsed = EMPTY
    else:
        # repr tells apart every value a decoded manifest holds (str, int, float, bool, None).
        key = (pod.namespace, repr(pa), repr(paa))
        shared = _SHARED.get(key)
        if shared is None:
            shared = _parse(pod)
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.clear()
            _SHARED[key] = shared
        parsed = shared
    pod.memo[NAME] = parsed
    return parsed


def existing_pod_terms(pod: PodInfo) -> Sequence[tuple[str, Hashable, Any]]:
    """The term registry's ``extract``: the pod's terms as an existing pod."""
    return parsed_affinity(pod).items


# -- the incoming pod's terms: namespaceSelector merged into namespaces ---------------------------------


def namespace_labels(namespaces: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, str]:
    """GetNamespaceLabelsSnapshot: the labels of namespace ``name``, empty when it is unknown."""
    obj = namespaces.get(name)
    if obj is None:
        return {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def merged_clause(term: AffinityTerm, namespaces: Mapping[str, Mapping[str, Any]]) -> Clause:
    """mergeAffinityTermNamespacesIfNotEmpty as a match clause: a ``{}`` namespaceSelector
    (``Everything``) keeps matching every namespace (None); any other selector is replaced by the
    namespaces it selects among those known, added to the listed ones."""
    sel = term.namespace_selector
    if sel.empty():
        return (None, term.selector)
    names = set(term.namespaces)
    if not sel.nothing:
        for key, obj in namespaces.items():
            name = str((obj.get("metadata") or {}).get("name") or key)
            if sel.matches(namespace_labels(namespaces, key)):
                names.add(name)
    return (frozenset(names), term.selector)
