package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
)

// SDK-only metadata keys the Python SDK strips before fingerprinting and
// before sending items to a model.
const (
	MetaToolDescription = "_agents_tool_description"
	MetaToolTitle       = "_agents_tool_title"
)

var (
	dropMeta      = []string{MetaToolDescription, MetaToolTitle}
	dropMetaAndID = []string{MetaToolDescription, MetaToolTitle, "id"}
)

// Fingerprint returns the Python SDK's fingerprint of it: json.dumps of the
// item without the SDK metadata keys (and without the top-level "id" when
// ignoreIDs), with sort_keys=True and Python's default separators and ASCII
// escaping, byte for byte. Non-finite floats print as Python prints them:
// NaN, Infinity and -Infinity.
func Fingerprint(it session.Item, ignoreIDs bool) (string, error) {
	b, err := fingerprint(it, ignoreIDs)
	return string(b), err
}

func fingerprint(it session.Item, ignoreIDs bool) ([]byte, error) {
	if !it.Valid() {
		return nil, session.ErrInvalidItem
	}
	drop := dropMeta
	if ignoreIDs {
		drop = dropMetaAndID
	}
	b, err := pyjson.Dumps(it.Bytes(), pyjson.Options{SortKeys: true, EnsureASCII: true, DropTopLevel: drop})
	if err != nil {
		return nil, fmt.Errorf("history: fingerprint: %w", err)
	}
	return b, nil
}

// Digest returns the hex SHA-256 of it's Fingerprint: the digest the Python
// SDK records for pending Session writes.
func Digest(it session.Item, ignoreIDs bool) (string, error) {
	fp, err := fingerprint(it, ignoreIDs)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(fp)
	return hex.EncodeToString(sum[:]), nil
}

// Digests returns the Digest of each item, computing it once per item.
func Digests(items []session.Item, ignoreIDs bool) ([]string, error) {
	out := make([]string, len(items))
	for i, it := range items {
		d, err := Digest(it, ignoreIDs)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = d
	}
	return out, nil
}
