# Regenerates python_layout.json: the exact values the Python SDK's
# DaprSession (agents/extensions/memory/dapr_session.py) writes, computed
# with its own expressions: _serialize_item is
# json.dumps(item, separators=(",", ":")), the messages value is
# json.dumps(list, separators=(",", ":")) and the metadata value is
# json.dumps({"session_id", "created_at", "updated_at"}).
#
#   python3 python_layout.py > python_layout.json
import json

session_id = "py-s\u00e9ss \u2603 \U0001F600"
batch_a = [
    {"role": "user", "content": "h\u00e9llo \u2603 \U0001F600 <tag> & \u2028"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "a\"b\\c\n\t/\u007f\u0001"}]},
]
batch_b = [
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}"},
]

def ser(item):
    return json.dumps(item, separators=(",", ":"))

def messages(items):
    return json.dumps([ser(i) for i in items], separators=(",", ":"))

# An item Go was given with raw UTF-8 (Go keeps an item's bytes): Python's
# json.dumps of the list escapes it in the array (ensure_ascii).
go_raw_item = '{"role": "user", "content": "h\u00e9llo \u2603 \U0001F600 <&> \u2028 \u007f"}'

print(json.dumps({
    "go_raw_item": go_raw_item,
    "go_raw_array": json.dumps([go_raw_item], separators=(",", ":")),
    "session_id": session_id,
    "batch_a": [ser(i) for i in batch_a],
    "batch_b": [ser(i) for i in batch_b],
    "after_a": messages(batch_a),
    "after_a_b": messages(batch_a + batch_b),
    "after_pop": messages(batch_a[:1]),
    "metadata_at_1700000000": json.dumps({
        "session_id": session_id,
        "created_at": str(1700000000),
        "updated_at": str(1700000000),
    }),
}, indent=1))
