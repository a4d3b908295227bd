package main

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

// seedEncrypted writes items to session id through encrypted.New with key.
func seedEncrypted(t *testing.T, dsn, id, key string, items ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	inner, err := st.Session(id)
	require.NoError(t, err)
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: key}}})
	require.NoError(t, err)
	its, err := session.ParseItems(items...)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, its))
}

// readDecrypted reads session id through encrypted.New with key.
func readDecrypted(t *testing.T, dsn, id, key string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	inner, err := st.Session(id)
	require.NoError(t, err)
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: key}}})
	require.NoError(t, err)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// 22.2: sessionctl reads an encrypted store's plaintext with keys from a
// file or $SESSIONCTL_KEYS; without them it says what it could not
// diagnose; the key never appears in any output.
func TestEncryptedStores(t *testing.T) {
	key := base64.URLEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	wrong := base64.URLEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	dsn := sqliteURL(t, "enc.db")
	seedEncrypted(t, dsn, "enc", key,
		`{"role":"user","content":"hello"}`,
		`{"type":"function_call_output","call_id":"lost","output":"secret output"}`,
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"1"}`)
	seed(t, dsn, "plain", `{"role":"user","content":"hi"}`)
	var all strings.Builder
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		code, out, stderr := sessionctl(t, args...)
		all.WriteString(out + stderr)
		return code, out, stderr
	}
	t.Setenv(keysEnv, "")

	// Without keys: honest about what was not diagnosed.
	code, out, _ := ctl("list", dsn)
	require.Equal(t, 0, code)
	require.Contains(t, out, "4 encrypted items (give the key with -keys-file or SESSIONCTL_KEYS)")
	code, out, _ = ctl("inspect", dsn, "enc")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "encrypted hkdf-v1")
	require.NotContains(t, out, "message/")
	require.NotContains(t, out, "  message ")
	require.Contains(t, out, "4 encrypted items not diagnosed; give the key with -keys-file or SESSIONCTL_KEYS")
	code, out, _ = ctl("doctor", dsn)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `error: session "enc": 4 encrypted items not diagnosed`)
	require.Contains(t, out, "2 sessions read, 1 diagnosed, 0 with errors; 1 not diagnosed: 4 encrypted items")
	code, _, stderr := ctl("repair", dsn, "enc")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "4 encrypted items, whose calls and outputs repair cannot see")

	// With the key in a file (the lines form): the plaintext.
	keys := writeFile(t, "# the agent's key\n"+key+"\n")
	code, out, _ = ctl("inspect", "-keys-file", keys, dsn, "enc")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "<- orphan-output")
	require.Contains(t, out, "1 problem (1 severe)")
	code, out, _ = ctl("doctor", "-keys-file", keys, dsn)
	require.Equal(t, 1, code)
	require.Contains(t, out, `error: session "enc" item 1: orphan-output (function_call lost)`)
	require.Contains(t, out, "2 sessions checked, 1 with errors")

	// With the key in the environment (the JSON form): repair works on
	// the plaintext and the quarantine is encrypted too.
	t.Setenv(keysEnv, `{"hkdf-v1": "`+key+`"}`)
	backup := filepath.Join(t.TempDir(), "backup.jsonl")
	code, out, stderr = ctl("repair", "-apply", "-offline", "-backup", backup, dsn, "enc")
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(string(b), `"__enc__"`), "the backup holds the stored envelopes")
	require.NotContains(t, string(b), "secret output", "no plaintext on disk")
	require.Contains(t, out, "3 of 4 items remain")
	require.Len(t, readDecrypted(t, dsn, "enc", key), 3)
	for _, raw := range read(t, dsn, "enc#quarantine") {
		require.NotContains(t, raw, "secret output", "the quarantine is stored encrypted")
	}
	q := readDecrypted(t, dsn, "enc#quarantine", key)
	require.Len(t, q, 1)
	require.Contains(t, q[0], "secret output")
	code, out, _ = ctl("doctor", dsn)
	require.Equal(t, 0, code, out)

	// migrate with keys writes the destination encrypted with the primary.
	to := sqliteURL(t, "to.db")
	code, _, stderr = ctl("migrate", "-offline", "--from", dsn, "--to", to, "--session", "enc")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, readDecrypted(t, dsn, "enc", key), readDecrypted(t, to, "enc", key))
	for _, raw := range read(t, to, "enc") {
		require.Contains(t, raw, `"__enc__"`)
	}

	// A wrong key: the read fails and says so, without the key.
	t.Setenv(keysEnv, wrong)
	code, out, stderr = ctl("doctor", dsn)
	require.Equal(t, 1, code)
	require.Contains(t, out+stderr, "wrong key")
	code, _, stderr = ctl("inspect", dsn, "enc")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "wrong key")

	// Bad key files: a usage error naming the line, never the text.
	for _, text := range []string{"one two three " + key, "{\"a\": 1, \"" + key + "\": 2}", key + "\n" + wrong + "\n", "{" + key} {
		code, _, stderr = ctl("doctor", "-keys-file", writeFile(t, text), dsn)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, "(the keys are not shown)")
	}
	code, _, stderr = ctl("doctor", "-keys-file", filepath.Join(t.TempDir(), "none"), dsn)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "-keys-file")

	// An encrypted checkpoint: said to be encrypted without the key, read
	// with it.
	t.Setenv(keysEnv, "")
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	inner, err := st.Session("enc-cp")
	require.NoError(t, err)
	es, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: key}}})
	require.NoError(t, err)
	require.NoError(t, es.AddItems(context.Background(), mustItems(t, `{"role":"user","content":"hi"}`)))
	cpSave(t, es.(session.CheckpointStore), "run", ordinaryDoc(t, "enc-cp", []string{`{"role":"assistant","content":"done"}`}, nil))
	require.NoError(t, st.Close())
	code, out, _ = ctl("inspect", dsn, "enc-cp")
	require.Equal(t, 1, code)
	require.Contains(t, out, `checkpoint "run" version 1: unreadable`)
	require.Contains(t, out, "an encrypted document, not read: give the key with -keys-file")
	code, out, _ = ctl("inspect", "-keys-file", keys, dsn, "enc-cp")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `checkpoint "run" version 1: schema`)

	require.NotContains(t, all.String(), key)
	require.NotContains(t, all.String(), wrong)
	require.NotContains(t, all.String(), key[:20])
}
