import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.parsing import HermesParser, TagParser, make_parser


def call(name, args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_hermes_reads_several_calls_in_order():
    text = "thinking… " + call("search", {"query": "a"}) + " and " + call("open", {"doc_id": "d1"})
    calls = HermesParser().parse(text)
    assert [(c.name, c.arguments, c.status) for c in calls] == [
        ("search", {"query": "a"}, "ok"), ("open", {"doc_id": "d1"}, "ok")]


def test_malformed_call_keeps_the_valid_ones():
    text = call("a", {"x": 1}) + "<tool_call>{broken</tool_call>" + call("b", {})
    calls = HermesParser().parse(text)
    assert [c.status for c in calls] == ["ok", "parse_error", "ok"]
    assert "not valid JSON" in calls[1].error


def test_hermes_accepts_string_arguments_and_unclosed_last_tag():
    calls = HermesParser().parse('<tool_call>{"name": "f", "arguments": "{\\"k\\": 2}"}')
    assert calls[0].status == "ok" and calls[0].arguments == {"k": 2}


def test_hermes_rejects_non_objects_with_a_reason():
    for body, fragment in [("[1, 2]", "JSON object"), ('{"arguments": {}}', "name"),
                           ('{"name": "f", "arguments": [1]}', "JSON object")]:
        (c,) = HermesParser().parse(f"<tool_call>{body}</tool_call>")
        assert c.status == "parse_error" and fragment in c.error


def test_tag_parser_maps_tags_to_tools():
    calls = TagParser().parse("<think>hmm</think><search> capital of France </search><answer>Paris</answer>")
    assert [(c.name, c.arguments) for c in calls] == [("search", {"query": "capital of France"}),
                                                      ("answer", {"answer": "Paris"})]
    (empty,) = TagParser().parse("<answer>  </answer>")
    assert empty.status == "parse_error"


def test_format_hints_name_the_tools():
    assert "calculate" in make_parser("hermes").format_hint(["calculate", "answer"])
    assert "<search>" in make_parser("tags").format_hint(["search", "answer"])


fragments = st.lists(st.sampled_from(
    ["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"arguments"', "[", "]", ",", '"x"', "1",
     "<search>", "</search>", "<answer>", "</answer>", "\\", '"', "\x00", "é", "\ud7ff"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=2000), fragments.map("".join)))
def test_parsers_never_raise(text):
    for parser in (HermesParser(), TagParser()):
        for c in parser.parse(text):
            assert c.status in ("ok", "parse_error")
            assert c.status == "parse_error" or isinstance(c.arguments, dict)


def test_duplicate_keys_are_a_parse_error_not_a_hedge():
    (c,) = HermesParser().parse('<tool_call>{"name": "answer", "arguments": {"answer": 43, "answer": 42}}</tool_call>')
    assert c.status == "parse_error" and "more than once" in c.error
    (c,) = HermesParser().parse('<tool_call>{"name": "answer", "arguments": "{\\"a\\": 1, \\"a\\": 2}"}</tool_call>')
    assert c.status == "parse_error"
