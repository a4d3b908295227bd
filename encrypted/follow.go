package encrypted

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// itemsSince decrypts what the inner session has after cursor; the cursor
// is the inner session's, over the envelopes it stores. An item it cannot
// decrypt fails the read and the cursor stays where it was, so nothing is
// skipped.
func (s *encSession) itemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	items, next, err := s.inner.(session.Follower).ItemsSince(ctx, cursor)
	if err != nil {
		return nil, cursor, err
	}
	plain, err := s.decryptAll(items)
	if err != nil {
		return nil, cursor, err
	}
	return plain, next, nil
}

// addItemsOnce encrypts items and appends them under opID.
func (s *encSession) addItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	enc, err := s.encryptAll(items)
	if err != nil {
		return false, err
	}
	return s.inner.(session.OnceAppender).AddItemsOnce(ctx, opID, enc)
}
