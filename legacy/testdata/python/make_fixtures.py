#!/usr/bin/env python3
"""Build Python-written session stores and checkpoints for package legacy.

Run from anywhere with CPython 3 (standard library only):

    python3 legacy/testdata/python/make_fixtures.py

It writes, next to this script:

  python_sessions.db            a SQLite file in the Python SDK's SQLiteSession
                                layout (agent_sessions / agent_messages,
                                message_data = json.dumps(item)), written the
                                way SQLiteSession.add_items writes: one
                                transaction per batch.
  python_sessions_committed.db  the same, except that session-117 already holds
                                the 1.17 record's batch: Python appended it and
                                died before its acknowledgement was recorded.
  v1_17_ordinary_pending_session_write.json
                                minimal/v1_18.json relabelled 1.17, run-again,
                                with a four-key ordinary pending write whose
                                "before" holds the digests (SHA-256 of
                                json.dumps(item, sort_keys=True, default=str))
                                of the session tail Python read before its
                                append attempt.
  v1_17_ordinary_unattempted.json
                                the same record before any append attempt
                                ("before": null).
  manifest.json                 what the tests assert against: every session's
                                message_data rows as Python wrote them, and the
                                digests Python computed.

Checkpoints are written as the Python SDK's corpus writes them:
json.dumps(state, indent=2, sort_keys=True) plus a newline.
"""

import copy
import hashlib
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
MINIMAL_118 = os.path.join(SHARED, "fixtures", "python-runstate", "minimal", "v1_18.json")

SDK_METADATA_KEYS = ("_agents_tool_description", "_agents_tool_title")

# The schema of src/agents/memory/sqlite_session.py (default table names).
DDL = [
    """
            CREATE TABLE IF NOT EXISTS agent_sessions (
                session_id TEXT PRIMARY KEY,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
            )
        """,
    """
            CREATE TABLE IF NOT EXISTS agent_messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                message_data TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id)
                    ON DELETE CASCADE
            )
        """,
    """
            CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id
            ON agent_messages (session_id, id)
        """,
]

# History each session holds when the checkpoint was taken.
USER_118 = {"content": "historical input", "role": "user"}  # the fixtures' original_input, persisted eagerly
USER_117 = {"content": "What is the weather in Paris?", "role": "user"}
CALL_117 = {
    "arguments": "{\"city\": \"Paris\"}",
    "call_id": "call_117",
    "name": "get_weather",
    "type": "function_call",
}
OUTPUT_117 = {"call_id": "call_117", "output": "sunny, 21\u00b0C", "type": "function_call_output"}

HISTORY = {
    "session-118": [[USER_118]],
    "session-117": [[USER_117], [CALL_117]],
}
PENDING_117 = [OUTPUT_117]


def fingerprint(item):
    """The Python SDK's pending-write fingerprint (ids kept)."""
    d = {k: v for k, v in item.items() if k not in SDK_METADATA_KEYS}
    return json.dumps(d, sort_keys=True, default=str)


def digest(item):
    return hashlib.sha256(fingerprint(item).encode("utf-8")).hexdigest()


def add_items(conn, session_id, items):
    """SQLiteSession.add_items: one transaction per batch."""
    with conn:
        conn.execute("INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)", (session_id,))
        conn.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            [(session_id, json.dumps(item)) for item in items],
        )
        conn.execute(
            "UPDATE agent_sessions SET updated_at = CURRENT_TIMESTAMP WHERE session_id = ?",
            (session_id,),
        )


def get_items(conn, session_id, limit=None):
    """SQLiteSession.get_items: newest `limit` rows, oldest first."""
    if limit is None:
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC",
            (session_id,),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, limit),
        ).fetchall()
        rows.reverse()
    return [json.loads(r[0]) for r in rows]


def rows(conn, session_id):
    return [
        r[0]
        for r in conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC", (session_id,)
        )
    ]


def build_db(path, committed):
    if os.path.exists(path):
        os.remove(path)
    conn = sqlite3.connect(path)
    # A rollback journal, not WAL: the file is complete on its own.
    conn.execute("PRAGMA journal_mode=DELETE")
    for stmt in DDL:
        conn.execute(stmt)
    conn.commit()
    for sid, batches in HISTORY.items():
        for batch in batches:
            add_items(conn, sid, batch)
    # The tail the 1.17 record's first append attempt read, as
    # resume_pending_session_write reads it: limit = len(items) + 1.
    tail = get_items(conn, "session-117", limit=len(PENDING_117) + 1)
    before = [digest(i) for i in tail]
    if committed:
        add_items(conn, "session-117", PENDING_117)
    out = {sid: rows(conn, sid) for sid in HISTORY}
    conn.close()
    return before, out


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def main():
    with open(MINIMAL_118, encoding="utf-8") as f:
        base = json.load(f)

    before, db_rows = build_db(os.path.join(HERE, "python_sessions.db"), committed=False)
    before_c, db_rows_c = build_db(os.path.join(HERE, "python_sessions_committed.db"), committed=True)
    assert before == before_c

    state = copy.deepcopy(base)
    state["$schemaVersion"] = "1.17"
    state["current_step"] = {"type": "next_step_run_again"}
    state["current_turn_persisted_item_count"] = 1  # the call reached the session
    state["pending_session_write"] = {
        "session_id": "session-117",
        "items": copy.deepcopy(PENDING_117),
        "before": before,
        "persisted_count": 2,
    }
    write_json(os.path.join(HERE, "v1_17_ordinary_pending_session_write.json"), state)

    unattempted = copy.deepcopy(state)
    unattempted["pending_session_write"]["before"] = None
    write_json(os.path.join(HERE, "v1_17_ordinary_unattempted.json"), unattempted)

    write_json(
        os.path.join(HERE, "manifest.json"),
        {
            "about": "Written by make_fixtures.py with CPython's sqlite3, json and hashlib.",
            "python": "%d.%d.%d" % sys.version_info[:3],
            "rows": {"python_sessions.db": db_rows, "python_sessions_committed.db": db_rows_c},
            "before_117": before,
            "digests": {
                "user_118": digest(USER_118),
                "user_117": digest(USER_117),
                "call_117": digest(CALL_117),
                "output_117": digest(OUTPUT_117),
            },
        },
    )


if __name__ == "__main__":
    main()
