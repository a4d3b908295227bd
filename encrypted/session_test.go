package encrypted_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

type pythonCase struct {
	MasterKey string   `json:"master_key"`
	SessionID string   `json:"session_id"`
	Stored    []string `json:"stored"`
	Plaintext []string `json:"plaintext"`
}

func loadPython(t *testing.T) (cases []pythonCase, keys []struct {
	MasterKey string `json:"master_key"`
	BytesHex  string `json:"bytes_hex"`
}) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "python_items.json"))
	require.NoError(t, err)
	var doc struct {
		Cases      []pythonCase `json:"cases"`
		MasterKeys []struct {
			MasterKey string `json:"master_key"`
			BytesHex  string `json:"bytes_hex"`
		} `json:"master_keys"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.NotEmpty(t, doc.Cases)
	return doc.Cases, doc.MasterKeys
}

func newMem(t *testing.T, id string) *memory.Session {
	t.Helper()
	s, err := memory.NewSession(id)
	require.NoError(t, err)
	return s
}

func items(t *testing.T, ss ...string) []session.Item {
	t.Helper()
	out, err := session.ParseItems(ss...)
	require.NoError(t, err)
	return out
}

func texts(its []session.Item) []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.String()
	}
	return out
}

// TestReadsPythonWrittenItems decrypts envelopes written by the Python
// SDK's algorithm (testdata/make_python_items.py, with Python's own
// cryptography package), including items holding NaN and Infinity.
func TestReadsPythonWrittenItems(t *testing.T) {
	ctx := context.Background()
	cases, _ := loadPython(t)
	for _, c := range cases {
		inner := newMem(t, c.SessionID)
		var stored []session.Item
		for _, s := range c.Stored {
			it, err := session.ParseItem(s)
			require.NoError(t, err)
			stored = append(stored, it)
		}
		require.NoError(t, inner.AddItems(ctx, stored))
		s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: c.MasterKey}}})
		require.NoError(t, err)
		got, err := s.Items(ctx)
		require.NoError(t, err, c.SessionID)
		require.Equal(t, c.Plaintext, texts(got))
		latest, err := session.Latest(ctx, s, 2)
		require.NoError(t, err)
		require.Equal(t, c.Plaintext[len(c.Plaintext)-2:], texts(latest))
	}
}

// TestMasterKeyDecodingMatchesPython: a key that Python's base64 decoder
// reads as 32 bytes is used as those bytes, any other as UTF-8. The
// derived keys must agree, so a Go-written item decrypts with the
// Python-derived session key of the same master key and id.
func TestMasterKeyDecodingMatchesPython(t *testing.T) {
	_, keys := loadPython(t)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		want, err := hex.DecodeString(k.BytesHex)
		require.NoError(t, err)
		got := encrypted.MasterKeyBytesForTest(k.MasterKey)
		require.Equal(t, want, got, "%q", k.MasterKey)
	}
}

// TestPythonReadsGoWrittenItems hands Go-written envelopes to Python's own
// cryptography package, decrypting as EncryptedSession._unwrap does.
func TestPythonReadsGoWrittenItems(t *testing.T) {
	if err := exec.Command("python3", "-c", "import cryptography").Run(); err != nil {
		t.Skipf("python3 with the cryptography package is not installed here: %v", err)
	}
	ctx := context.Background()
	const master, id = "a plain passphrase, not base64", "user:42/ünïcode"
	inner := newMem(t, id)
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: master}}})
	require.NoError(t, err)
	want := []string{`{"role":"user","content":"héllo ☀"}`, `{"type":"function_call_output","call_id":"c","output":"ok"}`}
	require.NoError(t, s.AddItems(ctx, items(t, want...)))
	stored, err := inner.Items(ctx)
	require.NoError(t, err)
	script := `
import base64, json, sys
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
master, sid = sys.argv[1], sys.argv[2]
try:
    kb = base64.urlsafe_b64decode(master)
    assert len(kb) == 32
except Exception:
    kb = master.encode("utf-8")
key = HKDF(algorithm=hashes.SHA256(), length=32, salt=sid.encode("utf-8"), info=b"agents.session-store.hkdf.v1").derive(kb)
f = Fernet(base64.urlsafe_b64encode(key))
for line in sys.stdin:
    env = json.loads(line)
    assert env["__enc__"] == 1 and env["v"] == 1 and env["kid"] == "hkdf-v1"
    print(json.dumps(json.loads(f.decrypt(env["payload"].encode("utf-8"), ttl=600)), ensure_ascii=False, separators=(",", ":")))
`
	cmd := exec.Command("python3", "-c", script, master, id)
	cmd.Stdin = strings.NewReader(strings.Join(texts(stored), "\n") + "\n")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, want, strings.Split(strings.TrimSpace(string(out)), "\n"))
}

// TestKeyIDNullOrUnknownIsTriedWithEveryKey: Python's EncryptedSession
// ignores the key id, so an envelope naming no key, or a key this side
// calls otherwise, is read with the keys configured: the named one first,
// then the others in order. Rotation by key id keeps working.
func TestKeyIDNullOrUnknownIsTriedWithEveryKey(t *testing.T) {
	ctx := context.Background()
	inner := newMem(t, "s")
	old, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "old"}}})
	require.NoError(t, err)
	require.NoError(t, old.AddItems(ctx, items(t, `{"n":1}`)))
	stored, err := inner.Items(ctx)
	require.NoError(t, err)
	env := stored[0].String()
	require.Contains(t, env, `"kid":"k1"`)
	require.NoError(t, inner.Clear(ctx))
	for _, e := range []string{
		env,
		strings.Replace(env, `"kid":"k1"`, `"kid":null`, 1),
		strings.Replace(env, `"kid":"k1"`, `"kid":"python-default"`, 1),
		strings.Replace(env, `"kid":"k1"`, `"kid":"k2"`, 1), // names the other key
	} {
		require.NoError(t, inner.AddItems(ctx, items(t, e)))
	}
	rotated, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k2", Secret: "new"}, {ID: "k1", Secret: "old"}}})
	require.NoError(t, err)
	got, err := rotated.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":1}`, `{"n":1}`, `{"n":1}`, `{"n":1}`}, texts(got))
	require.NoError(t, rotated.AddItems(ctx, items(t, `{"n":2}`)))
	raw, err := inner.Items(ctx)
	require.NoError(t, err)
	require.Contains(t, raw[4].String(), `"kid":"k2"`, "new items use the primary")

	none, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "other"}}})
	require.NoError(t, err)
	_, err = none.Items(ctx)
	require.ErrorIs(t, err, encrypted.ErrDecrypt, "no key decrypts: refused")
}

func TestWrongKeyTamperedAndExpiredFailLoudlyAndKeepEverything(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	inner := newMem(t, "s")
	w, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "right"}}, Now: clock})
	require.NoError(t, err)
	require.NoError(t, w.AddItems(ctx, items(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)))
	before, err := inner.Items(ctx)
	require.NoError(t, err)

	check := func(s session.Session, want error, kid string) {
		t.Helper()
		_, err := s.Items(ctx)
		var de *encrypted.DecryptError
		require.ErrorAs(t, err, &de)
		require.ErrorIs(t, err, encrypted.ErrDecrypt)
		require.ErrorIs(t, err, want)
		require.Equal(t, kid, de.KeyID)
		require.Contains(t, err.Error(), `"`+kid+`"`)
		_, _, err = s.PopItem(ctx)
		require.ErrorIs(t, err, want, "pop fails before removing anything")
		after, err := inner.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(before), texts(after), "nothing deleted or rewritten")
	}
	wrong, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "wrong"}}, Now: clock})
	require.NoError(t, err)
	check(wrong, encrypted.ErrDecrypt, "k1")

	unknown, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k9", Secret: "wrong"}, {ID: "k8", Secret: "also wrong"}}, Now: clock})
	require.NoError(t, err)
	check(unknown, encrypted.ErrUnknownKey, "k1")

	expiring, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "right"}}, TokenTTL: time.Hour,
		Now: func() time.Time { return now.Add(2 * time.Hour) }})
	require.NoError(t, err)
	check(expiring, encrypted.ErrExpired, "k1")

	// Tamper with the middle item's token: the error names position 1.
	tampered := newMem(t, "s")
	for i, it := range before {
		s := it.String()
		if i == 1 {
			s = strings.Replace(s, `"payload":"gAAAAA`, `"payload":"gAAAAB`, 1)
		}
		require.NoError(t, tampered.AddItems(ctx, items(t, s)))
	}
	ts, err := encrypted.New(tampered, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "right"}}, Now: clock})
	require.NoError(t, err)
	_, err = ts.Items(ctx)
	var de *encrypted.DecryptError
	require.ErrorAs(t, err, &de)
	require.Equal(t, 1, de.Position)
	require.NotContains(t, err.Error(), "right", "the secret never reaches an error")
}

func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	inner := newMem(t, "rot")
	old, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "2025", Secret: "old secret"}}})
	require.NoError(t, err)
	require.NoError(t, old.AddItems(ctx, items(t, `{"n":1}`)))
	rotated, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "2026", Secret: "new secret"}, {ID: "2025", Secret: "old secret"}}})
	require.NoError(t, err)
	require.NoError(t, rotated.AddItems(ctx, items(t, `{"n":2}`)))
	got, err := rotated.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":1}`, `{"n":2}`}, texts(got))
	raw, err := inner.Items(ctx)
	require.NoError(t, err)
	require.Contains(t, raw[0].String(), `"kid":"2025"`)
	require.Contains(t, raw[1].String(), `"kid":"2026"`, "new writes use the primary key")
	_, err = old.Items(ctx)
	require.ErrorIs(t, err, encrypted.ErrUnknownKey, "the old configuration cannot read the new key")
}

func TestRefusesBadOptions(t *testing.T) {
	inner := newMem(t, "x")
	for _, o := range []encrypted.Options{
		{},
		{Keys: []encrypted.Key{{Secret: ""}}},
		{Keys: []encrypted.Key{{ID: "a", Secret: "1"}, {ID: "a", Secret: "2"}}},
	} {
		_, err := encrypted.New(inner, o)
		require.Error(t, err)
	}
	require.NotContains(t, encrypted.Key{ID: "a", Secret: "hunter2"}.String(), "hunter2")
}

func TestCapabilitiesPassThrough(t *testing.T) {
	inner := newMem(t, "caps")
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: "k"}}})
	require.NoError(t, err)
	require.Equal(t, session.Probe(inner), session.Probe(s))
	var core struct{ session.Session }
	core.Session = inner
	s, err = encrypted.New(core, encrypted.Options{Keys: []encrypted.Key{{Secret: "k"}}})
	require.NoError(t, err)
	require.Equal(t, session.Capabilities(0), session.Probe(s), "a core-only session stays core-only")
	_, err = session.Latest(context.Background(), s, 1)
	require.NoError(t, err)
	require.False(t, errors.Is(err, session.ErrUnsupported))
}
