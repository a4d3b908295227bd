#!/usr/bin/env python3
"""Reads sessions the openaigo integration wrote, as the Python Agents SDK's
SQLiteSession.get_items does (src/agents/memory/sqlite_session.py): the
statement without a limit (ORDER BY id ASC), the newest-first LIMIT statement
reversed, and json.loads of each row, skipping rows that do not decode.

Only the standard library is used.

Usage: python3 read_items.py DB SESSION_ID [SESSION_ID ...]

Prints one JSON object: for each session, the raw message_data strings in
get_items order, how many rows json.loads read, and whether every
get_items(limit=n) for n = 1..len equals the tail of the full read.
"""

import json
import sqlite3
import sys


def get_items(conn, session_id, limit=None):
    if limit is None:
        cursor = conn.execute(
            """
            SELECT message_data FROM agent_messages
            WHERE session_id = ?
            ORDER BY id ASC
            """,
            (session_id,),
        )
    else:
        cursor = conn.execute(
            """
            SELECT message_data FROM agent_messages
            WHERE session_id = ?
            ORDER BY id DESC
            LIMIT ?
            """,
            (session_id, limit),
        )
    rows = cursor.fetchall()
    if limit is not None:
        rows = list(reversed(rows))
    raw, items = [], []
    for (message_data,) in rows:
        raw.append(message_data)
        try:
            items.append(json.loads(message_data))
        except json.JSONDecodeError:
            continue
    return raw, items


def main():
    db, ids = sys.argv[1], sys.argv[2:]
    conn = sqlite3.connect(db)
    out = {}
    for sid in ids:
        raw, items = get_items(conn, sid)
        limits_ok = True
        for n in range(1, len(raw) + 1):
            r, it = get_items(conn, sid, n)
            if r != raw[len(raw) - n:] or it != items[len(items) - n:]:
                limits_ok = False
        out[sid] = {"raw": raw, "decoded": len(items), "limits_ok": limits_ok}
    conn.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
