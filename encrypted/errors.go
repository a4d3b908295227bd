package encrypted

import (
	"errors"
	"fmt"
)

// Sentinel errors, checked with errors.Is on a *DecryptError.
var (
	// ErrDecrypt reports a stored envelope that cannot be decrypted with the
	// key it names: a wrong key, or a tampered or malformed token.
	ErrDecrypt = errors.New("encrypted: cannot decrypt item")
	// ErrExpired reports a token older than Options.TokenTTL.
	ErrExpired = errors.New("encrypted: token expired")
	// ErrUnknownKey reports an envelope naming a key id not in Options.Keys
	// (or none) that no key in Options.Keys decrypts.
	ErrUnknownKey = errors.New("encrypted: unknown key id")
)

// DecryptError reports a stored item that could not be decrypted. The read
// that met it fails as a whole; the item stays stored as it was.
type DecryptError struct {
	SessionID string
	KeyID     string // the envelope's "kid"
	Position  int    // the item's index in the read that met it, oldest first; -1 for a checkpoint
	Err       error  // ErrExpired, ErrUnknownKey, or the token's defect
}

func (e *DecryptError) Error() string {
	if e.Position < 0 {
		return fmt.Sprintf("encrypted: session %q, checkpoint (key id %q): %v", e.SessionID, e.KeyID, e.Err)
	}
	return fmt.Sprintf("encrypted: session %q, item %d (key id %q): %v", e.SessionID, e.Position, e.KeyID, e.Err)
}

// Unwrap returns ErrDecrypt and the cause.
func (e *DecryptError) Unwrap() []error { return []error{ErrDecrypt, e.Err} }
