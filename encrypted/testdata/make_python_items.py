"""Writes python_items.json: items encrypted exactly as the Python Agents
SDK's EncryptedSession does (agents/extensions/memory/encrypt_session.py:
_ensure_fernet_key_bytes, _derive_session_fernet_key, _to_json_bytes and
_wrap), with the same library (cryptography's Fernet and HKDF), and the
master-key decoding cases of _ensure_fernet_key_bytes.

Run from this folder: python3 make_python_items.py
"""
import base64
import json

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def ensure_fernet_key_bytes(master_key):
    try:
        key_bytes = base64.urlsafe_b64decode(master_key)
        if len(key_bytes) == 32:
            return key_bytes
    except Exception:
        pass
    return master_key.encode("utf-8")


def derive(master_key_bytes, session_id):
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32,
                salt=session_id.encode("utf-8"), info=b"agents.session-store.hkdf.v1")
    return Fernet(base64.urlsafe_b64encode(hkdf.derive(master_key_bytes)))


def to_json_bytes(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


items = [
    {"role": "user", "content": "Weather in Zürich? ☀"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Zürich\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "12 °C"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 12 °C."}]},
    {"type": "function_call_output", "call_id": "c2", "output": float("nan"), "extra": [float("inf"), float("-inf")]},
]
cases = []
for master, session_id in [
    ("cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "session-1"),
    ("a plain passphrase, not base64", "user:42/ünïcode"),
]:
    cipher = derive(ensure_fernet_key_bytes(master), session_id)
    stored = []
    for it in items:
        token = cipher.encrypt(to_json_bytes(it)).decode("utf-8")
        stored.append(json.dumps({"__enc__": 1, "v": 1, "kid": "hkdf-v1", "payload": token}))
    cases.append({
        "master_key": master,
        "session_id": session_id,
        "stored": stored,
        "plaintext": [to_json_bytes(it).decode("utf-8") for it in items],
    })

key_cases = []
for s in ["cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=", "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4",
          "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4==", "c w_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=",
          "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=AAAA", "cw/0x689RpI+jtRR7oE8h_eQsKImvJapLeSbXpwF4e4=",
          "=cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4", "short", "é" * 44,
          base64.urlsafe_b64encode(bytes(range(32))).decode(), base64.urlsafe_b64encode(bytes(31)).decode(),
          base64.urlsafe_b64encode(bytes(33)).decode(), "A" * 43 + "=", "A" * 42 + "==", "AAAA" * 11]:
    key_cases.append({"master_key": s, "bytes_hex": ensure_fernet_key_bytes(s).hex()})

with open("python_items.json", "w", encoding="utf-8") as f:
    json.dump({"cases": cases, "master_keys": key_cases}, f, indent=1, ensure_ascii=False)
    f.write("\n")
