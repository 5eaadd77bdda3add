"""The wire format: Go-style decoding (any key case) and byte-exact Go-style encoding."""

from __future__ import annotations

import pytest

from kubesched.extender.wire import (
    NodeVictims,
    WireError,
    decode_binding_args,
    decode_extender_args,
    decode_preemption_args,
    encode_binding_result,
    encode_error,
    encode_filter_result,
    encode_host_priority_list,
    encode_preemption_result,
    go_fields,
    go_json,
    parse_body,
)


def test_keys_match_case_insensitively_and_later_duplicates_win() -> None:
    assert go_fields({"pod": 1, "NODENAMES": 2, "other": 3}, "x", ("Pod", "NodeNames")) == {"Pod": 1, "NodeNames": 2}
    assert go_fields({"Pod": 1, "pod": 2}, "x", ("Pod",)) == {"Pod": 2}
    # Go folds Unicode case too: the long s (U+017F) matches "s", the Kelvin sign matches "k".
    assert go_fields({"ſtatus": 1, "\u212aey": 2}, "x", ("Status", "Key")) == {"Status": 1, "Key": 2}


def test_extender_args_upstream_shape_nodes_mode() -> None:
    body = (b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},'
            b'"NodeNames":null}')
    args = decode_extender_args(parse_body(body))
    assert args.pod == {"metadata": {"name": "p"}}
    assert args.nodes == [{"metadata": {"name": "a"}}]
    assert args.node_names is None


def test_extender_args_names_mode_lower_case_and_empty() -> None:
    args = decode_extender_args({"pod": {}, "nodes": None, "nodenames": []})
    assert args.node_names == [] and args.nodes is None
    # A NodeList with items null (Go's nil slice) is an empty list.
    args = decode_extender_args({"Pod": {}, "Nodes": {"metadata": {}, "items": None}})
    assert args.nodes == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "ExtenderArgs: expected a JSON object, got array"),
        ({"Nodes": {"items": []}}, "Pod: required"),
        ({"Pod": "x", "NodeNames": []}, "Pod: expected a JSON object or null, got string"),
        ({"Pod": {}}, "got neither"),
        ({"Pod": {}, "Nodes": {"items": []}, "NodeNames": []}, "got both"),
        ({"Pod": {}, "Nodes": {"items": {}}}, "Nodes.items: expected an array, got object"),
        ({"Pod": {}, "Nodes": {"items": [1]}}, "Nodes.items[0]: expected a Node object, got number"),
        ({"Pod": {}, "NodeNames": "a"}, "NodeNames: expected an array of strings, got string"),
        ({"Pod": {}, "NodeNames": ["a", 2]}, "NodeNames[1]: expected a string, got number"),
    ],
)
def test_extender_args_errors_name_the_field(data: object, message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode_extender_args(data)


def test_binding_args() -> None:
    args = decode_binding_args({"podname": "p", "PodNamespace": "ns", "PodUID": "u", "node": "n"})
    assert (args.pod_name, args.pod_namespace, args.pod_uid, args.node) == ("p", "ns", "u", "n")
    with pytest.raises(WireError, match="Node: required"):
        decode_binding_args({"PodName": "p", "PodNamespace": "ns"})
    with pytest.raises(WireError, match="PodUID: expected a string, got number"):
        decode_binding_args({"PodName": "p", "PodNamespace": "ns", "PodUID": 1, "Node": "n"})


def test_preemption_args_both_modes() -> None:
    meta = decode_preemption_args(
        {"Pod": {}, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 1}, "b": None}}
    )
    assert meta.meta and meta.victims == {"a": NodeVictims(("u1",), 1), "b": NodeVictims((), 0)}
    full = decode_preemption_args(
        {"pod": {}, "nodeNameToVictims": {"a": {"pods": [{"metadata": {"uid": "u2"}}], "numPDBViolations": 2.0}}}
    )
    assert not full.meta and full.victims == {"a": NodeVictims(("u2",), 2)}
    with pytest.raises(WireError, match="NumPDBViolations: expected an integer"):
        decode_preemption_args({"Pod": {}, "NodeNameToMetaVictims": {"a": {"NumPDBViolations": 1.5}}})
    with pytest.raises(WireError, match="a victim needs a UID"):
        decode_preemption_args({"Pod": {}, "NodeNameToMetaVictims": {"a": {"Pods": [{}]}}})


def test_filter_result_bytes_nodes_mode() -> None:
    body = encode_filter_result(
        nodes=[{"metadata": {"name": "b"}}], failed={"z": "Insufficient cpu", "a": "x"}, failed_unresolvable={}
    )
    assert body == (
        b'{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"b"}}]},"NodeNames":null,'
        b'"FailedNodes":{"a":"x","z":"Insufficient cpu"},"FailedAndUnresolvableNodes":{},"Error":""}'
    )


def test_filter_result_bytes_names_mode() -> None:
    assert encode_filter_result(node_names=[], failed={}, failed_unresolvable={"n": "m"}) == (
        b'{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{"n":"m"},"Error":""}'
    )


def test_other_results_bytes() -> None:
    assert encode_host_priority_list([("a", 10), ("b", 0)]) == b'[{"Host":"a","Score":10},{"Host":"b","Score":0}]'
    assert encode_host_priority_list([]) == b"[]"
    assert encode_binding_result() == b'{"Error":""}'
    assert encode_preemption_result({"b": NodeVictims((), 0), "a": NodeVictims(("u1", "u2"), 1)}) == (
        b'{"NodeNameToMetaVictims":{"a":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":1},'
        b'"b":{"Pods":[],"NumPDBViolations":0}}}'
    )
    assert encode_preemption_result(None) == b'{"NodeNameToMetaVictims":null}'


def test_error_bodies_per_verb() -> None:
    assert encode_error("filter", "boom") == (
        b'{"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"boom"}'
    )
    assert encode_error("bind", "boom") == b'{"Error":"boom"}'
    assert encode_error("prioritize", "boom") == b'{"Error":"boom"}'
    assert encode_error("preempt", "boom") == b'{"NodeNameToMetaVictims":null,"Error":"boom"}'


def test_go_html_safe_escaping() -> None:
    assert go_json({"Error": "a<b>&c\u2028d\u2029"}) == b'{"Error":"a\\u003cb\\u003e\\u0026c\\u2028d\\u2029"}'


def test_parse_body_rejects_bad_json() -> None:
    with pytest.raises(WireError, match="not valid JSON"):
        parse_body(b'{"Pod":')
    with pytest.raises(WireError, match="not valid JSON"):
        parse_body(b"\xff\xfe")
