package driver

import (
	"fmt"
	"unsafe"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/internal/owned"
)

// DecodeStored returns the Item stored as b, taking ownership of b (the
// caller must not modify it afterwards). A record that is not one JSON
// object gives an error wrapping session.ErrCorruptRecord.
func DecodeStored(b []byte) (session.Item, error) {
	v, err := owned.Item(b)
	return v.(session.Item), err
}

// DecodeStoredString is DecodeStored for a string a driver returned, without
// copying it: the Item shares the string's bytes, which is safe because
// neither strings nor Items are ever modified. Use it only on a string
// allocated for this read (as drivers return them), never on one a caller
// still holds a []byte view of.
func DecodeStoredString(s string) (session.Item, error) {
	if s == "" {
		return DecodeStored(nil)
	}
	return DecodeStored(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// ValidateID returns an error wrapping session.ErrInvalidSessionID when id
// cannot be used as a session id. Every id but the empty string is valid:
// an adapter must confine any other id, however hostile, to its own session,
// or refuse it with that error when its backend cannot store it.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", session.ErrInvalidSessionID)
	}
	return nil
}

// ValidateBatch checks that every item of a batch is a JSON object, so that
// an adapter can reject a bad batch before writing anything.
func ValidateBatch(items []session.Item) error { return owned.ValidateBatch(items) }

// ValidateCheckpointName returns an error wrapping
// session.ErrInvalidSessionID when name cannot name a checkpoint: only the
// empty name, which (like a session id) no store can confine.
func ValidateCheckpointName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty checkpoint name", session.ErrInvalidSessionID)
	}
	return nil
}

// ValidateCheckpoint checks a checkpoint's name (ValidateCheckpointName)
// and refuses an empty document, so that an adapter refuses a save before
// writing anything.
func ValidateCheckpoint(name string, doc []byte) error {
	if err := ValidateCheckpointName(name); err != nil {
		return err
	}
	if len(doc) == 0 {
		return fmt.Errorf("empty document for checkpoint %q", name)
	}
	return nil
}
