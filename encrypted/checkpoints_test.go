package encrypted_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

// A checkpoint holds items (the held batch), so the wrapper stores it as an
// envelope: the inner store never sees its plaintext, and a reader without
// the key cannot open it.
func TestCheckpointsAreEncrypted(t *testing.T) {
	ctx := context.Background()
	inner, err := memory.NewSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "right"}}})
	if err != nil {
		t.Fatal(err)
	}
	cs, ok := s.(session.CheckpointCommitter)
	if !ok {
		t.Fatal("the wrapper hides the inner session's checkpoint capabilities")
	}
	doc := []byte(`{"$schemaVersion":"1.18","pending_session_write":{"items":[{"content":"my secret"}]}}`)
	v, err := cs.AppendWithCheckpoint(ctx, []session.Item{session.MustItem(`{"role":"user","content":"also secret"}`)}, "run", doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, rv, err := inner.LoadCheckpoint(ctx, "run")
	if err != nil || rv != v {
		t.Fatalf("inner load: %v (version %d, want %d)", err, rv, v)
	}
	if bytes.Contains(raw, []byte("secret")) {
		t.Fatalf("the inner store holds the plaintext: %s", raw)
	}
	items, _ := inner.Items(ctx)
	if len(items) != 1 || bytes.Contains(items[0].Bytes(), []byte("secret")) {
		t.Fatalf("the committed item is not encrypted: %v", items)
	}
	got, gv, err := cs.LoadCheckpoint(ctx, "run")
	if err != nil || gv != v || !bytes.Equal(got, doc) {
		t.Fatalf("load through the wrapper: %q, %d, %v", got, gv, err)
	}
	wrong, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "wrong"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wrong.(session.CheckpointStore).LoadCheckpoint(ctx, "run"); !errors.Is(err, encrypted.ErrDecrypt) {
		t.Fatalf("a wrong key reads the checkpoint: %v", err)
	}
}
