#!/usr/bin/env python3
"""Reads a Go-written session database the way the Python SDK's SQLiteSession does.

Only the standard library is used. The statements are SQLiteSession's
(src/agents/memory/sqlite_session.py): get_items (ORDER BY id ASC, and the
newest-first LIMIT window), pop_item (DELETE ... RETURNING), add_items.

Usage: python3 check_go_db.py GO.db GO_expected.json

GO_expected.json: {"sessions": [{"id": ..., "items": [message_data strings]}],
"append": {"id": ..., "item": {...}}, "pop": id}

It checks that every session reads back exactly (the raw TEXT equal to what
Go stored, and json.loads of it equal to json.loads of the expected string),
then writes through Python: appends "append.item" to "append.id" and pops
the newest item of "pop". Exits non-zero with a message on any mismatch.
"""

import json
import sqlite3
import sys


def main():
    db_path, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode=WAL")
    for s in expected["sessions"]:
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC",
            (s["id"],),
        ).fetchall()
        raw = [r[0] for r in rows]
        if raw != s["items"]:
            sys.exit(f"session {s['id']!r}: raw rows differ:\n got  {raw!r}\n want {s['items']!r}")
        if [json.loads(r) for r in raw] != [json.loads(w) for w in s["items"]]:
            sys.exit(f"session {s['id']!r}: decoded items differ")
        # get_items(limit=2): newest-first window, reversed.
        latest = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (s["id"], 2),
        ).fetchall()
        if [r[0] for r in reversed(latest)] != s["items"][-2:]:
            sys.exit(f"session {s['id']!r}: latest 2 differ")

    app = expected["append"]
    conn.execute("INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)", (app["id"],))
    conn.executemany(
        "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
        [(app["id"], json.dumps(app["item"]))],
    )
    conn.execute(
        "UPDATE agent_sessions SET updated_at = CURRENT_TIMESTAMP WHERE session_id = ?",
        (app["id"],),
    )
    conn.commit()

    popped = conn.execute(
        """DELETE FROM agent_messages
        WHERE id = (SELECT id FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT 1)
        RETURNING message_data""",
        (expected["pop"],),
    ).fetchone()
    conn.commit()
    if popped is None:
        sys.exit("pop found nothing")
    json.loads(popped[0])
    conn.close()
    print(json.dumps({"appended": json.dumps(app["item"]), "popped": popped[0]}))


if __name__ == "__main__":
    main()
