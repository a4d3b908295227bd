package encrypted

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// encCheckpoints encrypts the checkpoints of a session that keeps them: a
// run-state document holds items (the held batch, the pending write), so it
// is stored as an envelope like an item. A stored document that is not an
// envelope (written before the store was encrypted) is returned as it is.
type encCheckpoints struct {
	s     *encSession
	inner capwrap.Checkpoints
}

func (c encCheckpoints) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	doc, v, err := c.inner.LoadCheckpoint(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	plain, err := c.s.decryptDoc(doc)
	if err != nil {
		return nil, 0, err
	}
	return plain, v, nil
}

func (c encCheckpoints) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	enc, err := c.s.encryptDoc(doc)
	if err != nil {
		return 0, err
	}
	return c.inner.SaveCheckpoint(ctx, name, enc, version)
}

func (c encCheckpoints) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	return c.inner.DeleteCheckpoint(ctx, name, version)
}

func (c encCheckpoints) ListCheckpoints(ctx context.Context) ([]string, error) {
	return c.inner.ListCheckpoints(ctx)
}

// appendWithCheckpoint encrypts the batch and the document, then commits
// both through the inner session.
func (s *encSession) appendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	enc, err := s.encryptAll(items)
	if err != nil {
		return 0, err
	}
	encDoc, err := s.encryptDoc(doc)
	if err != nil {
		return 0, err
	}
	return s.inner.(session.CheckpointCommitter).AppendWithCheckpoint(ctx, enc, name, encDoc, version)
}

func (s *encSession) encryptDoc(doc []byte) ([]byte, error) {
	token, err := fernetEncrypt(s.keys[s.primary], doc, s.now(), nil)
	if err != nil {
		return nil, fmt.Errorf("encrypted: checkpoint: %w", err)
	}
	env, err := makeEnvelope(s.primary, token)
	if err != nil {
		return nil, err
	}
	return env.Bytes(), nil
}

func (s *encSession) decryptDoc(doc []byte) ([]byte, error) {
	it, err := session.NewItem(doc)
	if err != nil {
		return doc, nil // not JSON: not an envelope
	}
	kid, token, ok, err := parseEnvelope(it)
	if !ok {
		return doc, nil
	}
	fail := func(err error) ([]byte, error) {
		return nil, &DecryptError{SessionID: s.SessionID(), KeyID: kid, Position: -1, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	plain, err := s.open(kid, token)
	if err != nil {
		return fail(err)
	}
	return plain, nil
}
