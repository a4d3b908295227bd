package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

// keysEnv is the environment variable that holds the encryption keys when
// -keys-file is not given, in the file's format.
const keysEnv = "SESSIONCTL_KEYS"

// keysHint is what a report says when it met envelopes without keys.
const keysHint = "give the key with -keys-file or " + keysEnv

// addKeysFlag adds -keys-file to fs. The keys themselves are never a flag:
// a command line is visible to every user of the machine (ps) and lands in
// shell histories.
func addKeysFlag(fs *flag.FlagSet) *string {
	return fs.String("keys-file", "", "read the encryption keys of an encrypted store (package encrypted, Python's EncryptedSession) from this file: one key per line, 'SECRET' (key id hkdf-v1) or 'KID SECRET', or a JSON object of key id to key, the first the primary (default: $"+keysEnv+", same format)")
}

// keyring opens the sessions of a store, wrapped with encrypted.New when
// keys were given. The zero value opens them as they are.
type keyring struct {
	opts *encrypted.Options
	from string // where the keys came from, for messages: never the keys
}

// loadKeys reads the keys from path, or from $SESSIONCTL_KEYS when path
// is "". No keys at all is a keyring that opens sessions as they are.
// Errors never quote the keys' text.
func loadKeys(path string) (keyring, error) {
	var text []byte
	from := ""
	switch {
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return keyring{}, fmt.Errorf("-keys-file: %w", err)
		}
		text, from = b, "-keys-file "+path
	case os.Getenv(keysEnv) != "":
		text, from = []byte(os.Getenv(keysEnv)), "$"+keysEnv
	default:
		return keyring{}, nil
	}
	keys, err := parseKeys(text)
	if err != nil {
		return keyring{}, usagef("%s: %v (the keys are not shown)", from, err)
	}
	return keyring{opts: &encrypted.Options{Keys: keys}, from: from}, nil
}

// parseKeys reads a JSON object of key id to key (in its order: the first
// is the primary) or lines of "SECRET" or "KID SECRET"; blank lines and
// lines starting with # are skipped. Its errors name a line or an offset,
// never the text.
func parseKeys(text []byte) ([]encrypted.Key, error) {
	var keys []encrypted.Key
	seen := map[string]bool{}
	add := func(where, id, secret string) error {
		if secret == "" {
			return fmt.Errorf("%s: empty key", where)
		}
		if id == "" {
			id = encrypted.DefaultKeyID
		}
		if seen[id] {
			return fmt.Errorf("%s: a second key with the same key id (a bare key's id is %s; name the others 'KID SECRET')", where, encrypted.DefaultKeyID)
		}
		seen[id] = true
		keys = append(keys, encrypted.Key{ID: id, Secret: secret})
		return nil
	}
	if t := bytes.TrimSpace(text); len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(t))
		if _, err := dec.Token(); err != nil {
			return nil, errors.New("not a JSON object")
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("not a JSON object of key id to key (offset %d)", dec.InputOffset())
			}
			var secret string
			if err := dec.Decode(&secret); err != nil {
				return nil, fmt.Errorf("not a JSON object of key id to key: the value at offset %d is not a string", dec.InputOffset())
			}
			id, _ := kt.(string)
			if err := add(fmt.Sprintf("entry %d", len(keys)+1), id, secret); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("not a JSON object of key id to key (offset %d)", dec.InputOffset())
		}
		if dec.More() {
			return nil, errors.New("text after the JSON object")
		}
	} else {
		for i, line := range strings.Split(string(text), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			f := strings.Fields(line)
			where := "line " + strconv.Itoa(i+1)
			var err error
			switch len(f) {
			case 1:
				err = add(where, "", f[0])
			case 2:
				err = add(where, f[0], f[1])
			default:
				err = fmt.Errorf("%s: want 'SECRET' or 'KID SECRET' (for a key with spaces, use the JSON form)", where)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in it")
	}
	return keys, nil
}

// session returns session id of st, decrypting and encrypting its items
// when the keyring holds keys.
func (k keyring) session(st adapters.Store, id string) (session.Session, error) {
	s, err := st.Session(id)
	if err != nil || k.opts == nil {
		return s, err
	}
	return encrypted.New(s, *k.opts)
}

// isEnvelope reports whether it is an encrypted item as package encrypted
// and Python's EncryptedSession store it (_is_encrypted_envelope: an
// object with "__enc__" equal to 1 and the keys "payload", "kid" and "v").
// Package encrypted does not export its test.
func isEnvelope(it session.Item) bool {
	raw, ok := it.Field("__enc__")
	if !ok || !it.HasField("payload") || !it.HasField("kid") || !it.HasField("v") {
		return false
	}
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" {
		return true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && f == 1
}

// countEnvelopes counts the encrypted items among items.
func countEnvelopes(items []session.Item) int {
	n := 0
	for _, it := range items {
		if isEnvelope(it) {
			n++
		}
	}
	return n
}
