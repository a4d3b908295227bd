package encrypted

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
)

// DefaultKeyID is the key id Python's EncryptedSession writes.
const DefaultKeyID = "hkdf-v1"

const hkdfInfo = "agents.session-store.hkdf.v1"

// Key is one master key and the id envelopes name it by.
type Key struct {
	// ID is written as the envelope's "kid"; empty means DefaultKeyID.
	ID string
	// Secret is the master key: a urlsafe-base64 encoding of 32 bytes (a
	// Fernet key), or any other non-empty string, used as its UTF-8 bytes.
	Secret string
}

// String hides the secret, so that a Key printed by mistake leaks nothing.
func (k Key) String() string { return fmt.Sprintf("encrypted.Key{ID: %q, Secret: <redacted>}", k.id()) }

// GoString hides the secret from %#v too.
func (k Key) GoString() string { return k.String() }

func (k Key) id() string {
	if k.ID == "" {
		return DefaultKeyID
	}
	return k.ID
}

// masterBytes returns the bytes HKDF derives from, as Python's
// _ensure_fernet_key_bytes does.
func masterBytes(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("encrypted: empty master key")
	}
	if b, ok := pyURLSafeB64Decode(secret); ok && len(b) == 32 {
		return b, nil
	}
	return []byte(secret), nil
}

// sessionKey derives the 32-byte Fernet key of one session.
func sessionKey(master []byte, sessionID string) ([]byte, error) {
	return hkdf.Key(sha256.New, master, []byte(sessionID), hkdfInfo, 32)
}

// pyURLSafeB64Decode decodes s as Python's base64.urlsafe_b64decode does
// (binascii.a2b_base64 in its lenient mode): '-' and '_' stand for '+' and
// '/', characters outside the alphabet are skipped, decoding stops at a
// complete padding, and an incomplete final group is an error. A string
// that is not ASCII is an error, as in Python.
func pyURLSafeB64Decode(s string) ([]byte, bool) {
	var (
		out     []byte
		acc     uint32
		quadPos int
		pads    int
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return nil, false
		}
		if c == '=' {
			if quadPos >= 2 {
				pads++
				if quadPos+pads >= 4 {
					return out, true
				}
			}
			continue
		}
		v, ok := b64Value(c)
		if !ok {
			continue
		}
		pads = 0
		acc = acc<<6 | uint32(v)
		quadPos = (quadPos + 1) & 3
		switch quadPos {
		case 2:
			out = append(out, byte(acc>>4))
			acc &= 0xf
		case 3:
			out = append(out, byte(acc>>2))
			acc &= 0x3
		case 0:
			out = append(out, byte(acc))
			acc = 0
		}
	}
	if quadPos != 0 {
		return nil, false
	}
	return out, true
}

func b64Value(c byte) (byte, bool) {
	switch {
	case c >= 'A' && c <= 'Z':
		return c - 'A', true
	case c >= 'a' && c <= 'z':
		return c - 'a' + 26, true
	case c >= '0' && c <= '9':
		return c - '0' + 52, true
	case c == '+' || c == '-':
		return 62, true
	case c == '/' || c == '_':
		return 63, true
	}
	return 0, false
}
