package encrypted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentsessions/sessions/session"
)

// envelopeVersion is the "v" this package and Python's write.
const envelopeVersion = 1

// errEnvelope reports an envelope whose "payload" is not a string.
var errEnvelope = errors.New("malformed envelope: payload must be a string")

// parseEnvelope reports whether it is an envelope as Python's
// _is_encrypted_envelope decides (an object with "__enc__" equal to 1 and
// the keys "payload", "kid" and "v"), and returns its key id and token. A
// key id that is not a string (null, as some writers leave it) is "":
// Python never reads it.
func parseEnvelope(it session.Item) (kid, token string, ok bool, err error) {
	raw, found := it.Field("__enc__")
	if !found || !isOne(raw) || !it.HasField("payload") || !it.HasField("kid") || !it.HasField("v") {
		return "", "", false, nil
	}
	kid, _ = it.StringField("kid")
	token, tok := it.StringField("payload")
	if !tok {
		return kid, "", true, errEnvelope
	}
	return kid, token, true, nil
}

// isOne reports whether a JSON number equals 1 as Python's == does (1,
// 1.0, true; Python's True == 1).
func isOne(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" {
		return true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == 1
}

// makeEnvelope returns the stored item for a token.
func makeEnvelope(kid, token string) (session.Item, error) {
	b, err := json.Marshal(struct {
		Enc     int    `json:"__enc__"`
		V       int    `json:"v"`
		KID     string `json:"kid"`
		Payload string `json:"payload"`
	}{1, envelopeVersion, kid, token})
	if err != nil {
		return session.Item{}, fmt.Errorf("encrypted: envelope: %w", err)
	}
	return session.NewItem(b)
}
