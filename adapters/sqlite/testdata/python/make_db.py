#!/usr/bin/env python3
"""Writes a session database the way the Python Agents SDK's SQLiteSession does.

Only the standard library is used (sqlite3, json): the schema statements and
the write path (INSERT OR IGNORE of the session row, one executemany INSERT of
json.dumps(item) per batch, UPDATE of updated_at, one commit per batch, WAL
journal mode) follow src/agents/memory/sqlite_session.py.

Usage: python3 make_db.py OUT.db OUT_expected.json

The expected file lists, per session, the exact message_data strings
json.dumps produced (what Go must read back byte for byte), and the
rows written to simulate damage, which both Python's get_items and the Go
adapter skip.
"""

import json
import os
import sqlite3
import sys

SESSIONS_TABLE = "agent_sessions"
MESSAGES_TABLE = "agent_messages"


def init_db(conn):
    conn.execute(
        f"""
            CREATE TABLE IF NOT EXISTS {SESSIONS_TABLE} (
                session_id TEXT PRIMARY KEY,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
            )
        """
    )
    conn.execute(
        f"""
            CREATE TABLE IF NOT EXISTS {MESSAGES_TABLE} (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                message_data TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                FOREIGN KEY (session_id) REFERENCES {SESSIONS_TABLE} (session_id)
                    ON DELETE CASCADE
            )
        """
    )
    conn.execute(
        f"""
            CREATE INDEX IF NOT EXISTS idx_{MESSAGES_TABLE}_session_id
            ON {MESSAGES_TABLE} (session_id, id)
        """
    )
    conn.commit()


def add_items(conn, session_id, items):
    """One add_items call: one transaction."""
    conn.execute(
        f"INSERT OR IGNORE INTO {SESSIONS_TABLE} (session_id) VALUES (?)",
        (session_id,),
    )
    conn.executemany(
        f"INSERT INTO {MESSAGES_TABLE} (session_id, message_data) VALUES (?, ?)",
        [(session_id, json.dumps(item)) for item in items],
    )
    conn.execute(
        f"UPDATE {SESSIONS_TABLE} SET updated_at = CURRENT_TIMESTAMP WHERE session_id = ?",
        (session_id,),
    )
    conn.commit()


SESSIONS = {
    "conversation-1": [
        [
            {"role": "user", "content": "What's the weather in Paris?"},
        ],
        [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Look it up."}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": json.dumps({"city": "Paris", "unit": "c"}),
                "status": "completed",
            },
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": '{"temp": 21.5, "sky": "clear"}',
            },
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Il fait 21,5 °C ☀️ à Paris.", "annotations": []}
                ],
            },
        ],
    ],
    # Python's json.dumps escapes every non-ASCII character and keeps the
    # dict's insertion order; numbers keep Python's spelling.
    "unicode ünï ☃ 😀": [
        [
            {"role": "user", "content": "café ☕ — “quotes” — 日本語 — 😀"},
            {
                "role": "user",
                "content": "ctl \u0001 nul \u0000 tab\t nl\n quote\" backslash\\ slash/",
            },
            {"n": [0, -1, 1.0, 1.5e-07, 1e100, 12345678901234567890, -0.0], "t": True, "f": False, "z": None},
            {"nested": {"a": [{"b": {"c": []}}], "empty": {}}, "zz": 1, "aa": 2},
        ],
    ],
    "user:42' OR '1'='1": [
        [{"role": "user", "content": "hostile id"}],
        [{"role": "assistant", "content": "still confined"}],
    ],
}

# A row no SDK writes (a damaged file, a foreign writer): Python's get_items
# skips it; the Go adapter skips and reports it.
CORRUPT = {"conversation-1": "{\"truncated\": "}


def main():
    out_db, out_expected = sys.argv[1], sys.argv[2]
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(out_db + suffix):
            os.remove(out_db + suffix)
    conn = sqlite3.connect(out_db)
    conn.execute("PRAGMA journal_mode=WAL")
    init_db(conn)
    expected = {"sqlite_version": sqlite3.sqlite_version, "sessions": []}
    for session_id, batches in SESSIONS.items():
        rows = []
        for i, batch in enumerate(batches):
            add_items(conn, session_id, batch)
            rows.extend(json.dumps(item) for item in batch)
            if i == 0 and session_id in CORRUPT:
                conn.execute(
                    f"INSERT INTO {MESSAGES_TABLE} (session_id, message_data) VALUES (?, ?)",
                    (session_id, CORRUPT[session_id]),
                )
                conn.commit()
        expected["sessions"].append(
            {"id": session_id, "items": rows, "corrupt": [CORRUPT[session_id]] if session_id in CORRUPT else []}
        )
    # Checkpoint so the checked-in file holds everything, with no -wal file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(out_expected, "w", encoding="ascii") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
