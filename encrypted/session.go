package encrypted

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// Options configure New.
type Options struct {
	// Keys are the master keys by id. The first is the primary: new items
	// are encrypted with it. At least one is required; ids must be unique.
	Keys []Key
	// TokenTTL, when positive, refuses to read tokens older than it (and,
	// as Fernet does then, tokens more than 60 s in the future) with
	// ErrExpired. Zero, the default, never expires a token: an encrypted
	// history lives as long as the store keeps it.
	TokenTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns a Session that encrypts every item it writes to inner and
// decrypts every item it reads, with the keys of opts derived for inner's
// session id. The result has exactly inner's latest-N, replace, expiry,
// checkpoint, follow and append-once capabilities; checkpoint documents
// are encrypted like items.
func New(inner session.Session, opts Options) (session.Session, error) {
	if inner == nil {
		return nil, errors.New("encrypted: nil session")
	}
	if len(opts.Keys) == 0 {
		return nil, errors.New("encrypted: no key given")
	}
	s := &encSession{inner: inner, ttl: opts.TokenTTL, now: opts.Now, keys: make(map[string][]byte, len(opts.Keys))}
	if s.now == nil {
		s.now = time.Now
	}
	for i, k := range opts.Keys {
		id := k.id()
		if _, dup := s.keys[id]; dup {
			return nil, fmt.Errorf("encrypted: key id %q given twice", id)
		}
		master, err := masterBytes(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("encrypted: key %q: %w", id, err)
		}
		derived, err := sessionKey(master, inner.SessionID())
		if err != nil {
			return nil, fmt.Errorf("encrypted: key %q: %w", id, err)
		}
		s.keys[id] = derived
		s.order = append(s.order, id)
		if i == 0 {
			s.primary = id
		}
	}
	p := capwrap.Of(inner)
	p.Compaction, p.Deferrer = nil, nil
	if p.Latest != nil {
		p.Latest = s.latestItems
	}
	if p.Replace != nil {
		p.Replace = s.replaceItems
	}
	if p.Versioned != nil {
		p.Versioned = encVersioned{s: s, inner: p.Versioned}
	}
	if p.Checkpoints != nil {
		p.Checkpoints = encCheckpoints{s: s, inner: p.Checkpoints}
	}
	if p.Commit != nil {
		p.Commit = s.appendWithCheckpoint
	}
	if p.Follow != nil {
		p.Follow = s.itemsSince
	}
	if p.Once != nil {
		p.Once = s.addItemsOnce
	}
	return capwrap.Compose(s, p), nil
}

// encSession is the wrapper; New composes it with the capabilities inner
// has.
type encSession struct {
	inner   session.Session
	keys    map[string][]byte
	order   []string // key ids as Options.Keys gives them
	primary string
	ttl     time.Duration
	now     func() time.Time
	popMu   sync.Mutex
}

func (s *encSession) SessionID() string          { return s.inner.SessionID() }
func (s *encSession) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(s.inner) }
func (s *encSession) IgnoreIDsForMatching() bool { return capwrap.IgnoresIDs(s.inner) }

func (s *encSession) Items(ctx context.Context) ([]session.Item, error) {
	items, err := s.inner.Items(ctx)
	if err != nil {
		return nil, err
	}
	return s.decryptAll(items)
}

func (s *encSession) latestItems(ctx context.Context, n int) ([]session.Item, error) {
	items, err := s.inner.(session.LatestReader).LatestItems(ctx, n)
	if err != nil {
		return nil, err
	}
	return s.decryptAll(items)
}

func (s *encSession) AddItems(ctx context.Context, items []session.Item) error {
	enc, err := s.encryptAll(items)
	if err != nil {
		return err
	}
	return s.inner.AddItems(ctx, enc)
}

func (s *encSession) replaceItems(ctx context.Context, items []session.Item) error {
	enc, err := s.encryptAll(items)
	if err != nil {
		return err
	}
	return s.inner.(session.Replacer).ReplaceItems(ctx, enc)
}

// encVersioned encrypts a conditional replace; the version is the inner
// session's, over the envelopes it stores.
type encVersioned struct {
	s     *encSession
	inner capwrap.Versioned
}

func (v encVersioned) HistoryVersion(ctx context.Context) (string, error) {
	return v.inner.HistoryVersion(ctx)
}

func (v encVersioned) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	enc, err := v.s.encryptAll(items)
	if err != nil {
		return err
	}
	return v.inner.ReplaceItemsIf(ctx, version, enc)
}

func (s *encSession) Clear(ctx context.Context) error { return s.inner.Clear(ctx) }

// PopItem decrypts the newest item before removing it, so that an item it
// cannot decrypt stays stored and the pop fails. Should another writer
// change the tail in between and the item popped turn out undecryptable,
// it is appended back before the error is returned.
func (s *encSession) PopItem(ctx context.Context) (session.Item, bool, error) {
	s.popMu.Lock()
	defer s.popMu.Unlock()
	tail, err := session.Latest(ctx, s.inner, 1)
	if err != nil {
		return session.Item{}, false, err
	}
	if len(tail) == 0 {
		return session.Item{}, false, nil
	}
	if _, err := s.decrypt(tail[0], 0); err != nil {
		return session.Item{}, false, err
	}
	popped, ok, err := s.inner.PopItem(ctx)
	if err != nil || !ok {
		return session.Item{}, ok, err
	}
	plain, err := s.decrypt(popped, 0)
	if err != nil {
		if rerr := s.inner.AddItems(context.WithoutCancel(ctx), []session.Item{popped}); rerr != nil {
			return session.Item{}, false, fmt.Errorf("%w (and putting the item back failed: %w)", err, rerr)
		}
		return session.Item{}, false, err
	}
	return plain, true, nil
}

func (s *encSession) encryptAll(items []session.Item) ([]session.Item, error) {
	out := make([]session.Item, len(items))
	key := s.keys[s.primary]
	now := s.now()
	for i, it := range items {
		if !it.Valid() {
			return nil, &session.ItemError{Index: i}
		}
		token, err := fernetEncrypt(key, it.Bytes(), now, nil)
		if err != nil {
			return nil, fmt.Errorf("encrypted: item %d: %w", i, err)
		}
		if out[i], err = makeEnvelope(s.primary, token); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *encSession) decryptAll(items []session.Item) ([]session.Item, error) {
	for i, it := range items {
		plain, err := s.decrypt(it, i)
		if err != nil {
			return nil, err
		}
		items[i] = plain
	}
	return items, nil
}

// decrypt returns the item an envelope holds, or it unchanged when it is
// not an envelope.
func (s *encSession) decrypt(it session.Item, pos int) (session.Item, error) {
	kid, token, ok, err := parseEnvelope(it)
	if !ok {
		return it, nil
	}
	fail := func(err error) (session.Item, error) {
		return session.Item{}, &DecryptError{SessionID: s.SessionID(), KeyID: kid, Position: pos, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	plain, err := s.open(kid, token)
	if err != nil {
		return fail(err)
	}
	item, err := session.NewItem(plain)
	if err != nil {
		return fail(err)
	}
	return item, nil
}

// open decrypts an envelope's token. Python's EncryptedSession ignores the
// key id, so an envelope it wrote may name no key ("kid": null) or one
// this session does not know: the key the envelope names is tried first,
// then every other key in Options.Keys order. Only a signature mismatch
// moves on to the next key; a token that is expired or malformed is so
// under every key.
func (s *encSession) open(kid, token string) ([]byte, error) {
	key, known := s.keys[kid]
	var named error
	if known {
		plain, err := fernetDecrypt(key, token, s.ttl, s.now())
		if err == nil || !errors.Is(err, errTokenMAC) {
			return plain, err
		}
		named = err
	}
	for _, id := range s.order {
		if id == kid {
			continue
		}
		plain, err := fernetDecrypt(s.keys[id], token, s.ttl, s.now())
		if err == nil || !errors.Is(err, errTokenMAC) {
			return plain, err
		}
	}
	if !known {
		return nil, ErrUnknownKey
	}
	return nil, named
}
