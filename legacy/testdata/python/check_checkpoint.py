#!/usr/bin/env python3
"""Check that checkpoints written by Go would pass the Python SDK's loader.

A development-time double check, independent of the Go code: it
re-implements, from spec section 3.2, the checks RunState.from_json makes on
the pending Session write, plus the top-level checks on the terminal marker
and the persisted count, and compares each written checkpoint with the
Python-written one it came from.

    python3 legacy/testdata/python/check_checkpoint.py WRITTEN.json:ORIGINAL.json ...
    python3 legacy/testdata/python/check_checkpoint.py --db STORE.db:SESSION_ID ...

For each pair it checks that:
  - WRITTEN is exactly what Python's writer emits for its own content
    (json.dumps(state, indent=2, sort_keys=True) + newline);
  - its $schemaVersion is one the loader supports;
  - its pending_session_write (if any) passes rules 1-12 of section 3.2
    under its label: the exact key set (base four keys plus the label's and
    variant's optional keys), held a real bool, held => before is null,
    held-only keys typed and absent from ordinary records, session_id a
    string, items a non-empty list of objects, before null or a list of
    strings, persisted_count a real non-negative int;
  - terminal_unrecoverable, if present, is true and the label >= 1.17;
  - its top-level key set is ORIGINAL's, less pending_session_write when
    the record was settled, and every member other than $schemaVersion,
    current_turn_persisted_item_count and pending_session_write is equal.
"""

import json
import sys

BASE = {"session_id", "items", "before", "persisted_count"}
SUPPORTED = ["1.%d" % i for i in range(0, 20)]
# Optional keys per label for held records (PR #4828 reviewed head; 1.19 as
# in the fixture). Ordinary records allow none at 1.17/1.18(PR line)/1.19.
HELD_OPTIONAL = {
    "1.18": {"held", "response_id", "store", "reasoning_item_id_policy"},
    "1.19": {"held", "response_id", "store", "reasoning_item_id_policy", "current_response"},
}
HELD_ONLY = {"response_id", "store", "reasoning_item_id_policy"}
STEPS = {"next_step_run_again", "next_step_interruption"}
IGNORED = {"$schemaVersion", "current_turn_persisted_item_count", "pending_session_write"}


def version(label):
    major, minor = label.split(".")
    return (int(major), int(minor))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_pending(state, errors):
    w = state.get("pending_session_write")
    if w is None:
        return
    label = state["$schemaVersion"]
    if version(label) < (1, 17):
        errors.append("rule 1: pending write under %s" % label)
        return
    step = state.get("current_step")
    if not isinstance(step, dict) or step.get("type") not in STEPS:
        errors.append("rule 2: current_step %r" % (step,))
    if not isinstance(w, dict):
        errors.append("rule 3: not an object")
        return
    keys = set(w)
    held = "held" in keys
    optional = HELD_OPTIONAL.get(label, set()) if held else set()
    if keys - optional != BASE:
        errors.append("rule 4: key set %s at %s (optional allowed: %s)" % (sorted(keys), label, sorted(optional)))
    if held and not isinstance(w["held"], bool):
        errors.append("rule 5: held %r" % (w["held"],))
    if w.get("held") is True and w.get("before") is not None:
        errors.append("rule 6: held with before")
    if "response_id" in w and not (w["response_id"] is None or isinstance(w["response_id"], str)):
        errors.append("rule 7: response_id")
    if "store" in w and not (w["store"] is None or isinstance(w["store"], bool)):
        errors.append("rule 7: store")
    if "reasoning_item_id_policy" in w and w["reasoning_item_id_policy"] not in (None, "preserve", "omit"):
        errors.append("rule 7: reasoning_item_id_policy")
    if w.get("held") is not True and keys & HELD_ONLY:
        errors.append("rule 8: held-only keys on an ordinary record: %s" % sorted(keys & HELD_ONLY))
    if not isinstance(w.get("session_id"), str):
        errors.append("rule 9: session_id")
    items = w.get("items")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        errors.append("rule 10: items")
    before = w.get("before")
    if before is not None and not (isinstance(before, list) and all(isinstance(d, str) for d in before)):
        errors.append("rule 11: before")
    if not is_int(w.get("persisted_count")) or w["persisted_count"] < 0:
        errors.append("rule 12: persisted_count")


def check(written_path, original_path):
    errors = []
    with open(written_path, encoding="utf-8") as f:
        text = f.read()
    state = json.loads(text)
    if text != json.dumps(state, indent=2, sort_keys=True) + "\n":
        errors.append("layout: not json.dumps(indent=2, sort_keys=True) + newline")
    label = state.get("$schemaVersion")
    if label not in SUPPORTED:
        errors.append("schema: %r not supported" % (label,))
        return errors
    count = state.get("current_turn_persisted_item_count", 0)
    if not is_int(count) or count < 0:
        errors.append("current_turn_persisted_item_count %r" % (count,))
    if "terminal_unrecoverable" in state and (state["terminal_unrecoverable"] is not True or version(label) < (1, 17)):
        errors.append("terminal marker")
    check_pending(state, errors)
    with open(original_path, encoding="utf-8") as f:
        original = json.load(f)
    want = set(original) - {"pending_session_write"}
    if "pending_session_write" in state:
        want.add("pending_session_write")
    if set(state) != want:
        errors.append("top-level keys differ: %s" % sorted(set(state) ^ want))
    for k in set(state) & set(original) - IGNORED:
        if state[k] != original[k]:
            errors.append("member %s changed" % k)
    return errors


def read_db(path, session_id):
    """Read a session as SQLiteSession.get_items does: rows by id, json.loads."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC", (session_id,)
        ).fetchall()
    finally:
        conn.close()
    items = [json.loads(r[0]) for r in rows]
    assert all(isinstance(i, dict) for i in items), "every row is a JSON object"
    return items


def main(args):
    if not args:
        print(__doc__)
        return 2
    if args[0] == "--db":
        # --db PATH:SESSION_ID ...: print each session as Python reads it.
        for spec in args[1:]:
            path, sid = spec.rsplit(":", 1)
            print("%s %s" % (path, sid))
            for item in read_db(path, sid):
                print("     " + json.dumps(item))
        return 0
    failed = 0
    for pair in args:
        written, original = pair.split(":", 1)
        errs = check(written, original)
        state = json.load(open(written, encoding="utf-8"))
        w = state.get("pending_session_write")
        desc = "label %s, %s" % (state["$schemaVersion"], "no pending write" if w is None else "pending keys %s" % sorted(w))
        if errs:
            failed += 1
            print("FAIL %s (%s)" % (written, desc))
            for e in errs:
                print("     " + e)
        else:
            print("ok   %s (%s)" % (written, desc))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
