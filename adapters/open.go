package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// ErrInvalidDSN reports a store URL that cannot be opened as written.
var ErrInvalidDSN = errors.New("adapters: invalid store URL")

// Store is an opened store of sessions, whatever its backend.
type Store interface {
	// Session returns a handle on session id.
	Session(id string) (session.Session, error)
	// Declared returns the optional capabilities the store's sessions
	// implement.
	Declared() session.Capabilities
	// Close releases what Open opened.
	Close() error
}

// Lister is implemented by stores that can list the ids of the sessions
// they hold.
type Lister interface {
	ListSessions(ctx context.Context) ([]string, error)
}

// Raw is implemented by stores that can store a record their sessions
// would refuse, for the conformance suite's corrupt-record clause.
type Raw interface {
	AppendRaw(ctx context.Context, id string, raw []byte) error
}

// Options are settings of Open that do not belong in a URL.
type Options struct {
	// OnCorrupt receives reports of corrupt stored records; nil logs a
	// warning with slog.
	OnCorrupt driver.CorruptHandler
}

// opener opens one scheme's stores.
type opener struct {
	// options lists the query parameters the scheme accepts; with
	// passthrough, other parameters go to the backend, which validates them.
	options     []string
	passthrough bool
	open        func(ctx context.Context, u *url.URL, q url.Values, o Options) (Store, error)
}

var openers = map[string]opener{}

func register(scheme string, o opener) { openers[scheme] = o }

// Schemes lists the URL schemes Open accepts.
func Schemes() []string {
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open opens the store dsn names. The scheme picks the backend; query
// parameters the backend does not know are an error.
func Open(ctx context.Context, dsn string) (Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with Options.
func OpenWith(ctx context.Context, dsn string, opts Options) (Store, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidDSN)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDSN, err)
	}
	scheme := strings.ToLower(u.Scheme)
	o, ok := openers[scheme]
	if !ok {
		if scheme == "" {
			return nil, fmt.Errorf("%w: %q has no scheme (want one of %s)", ErrInvalidDSN, redact(u), strings.Join(Schemes(), ", "))
		}
		return nil, fmt.Errorf("%w: unknown scheme %q (want one of %s)", ErrInvalidDSN, scheme, strings.Join(Schemes(), ", "))
	}
	q := u.Query()
	for k := range q {
		if !o.passthrough && !contains(o.options, k) {
			return nil, fmt.Errorf("%w: unknown option %q for %s (known: %s)", ErrInvalidDSN, k, scheme, strings.Join(o.options, ", "))
		}
	}
	st, err := o.open(ctx, u, q, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(u), err)
	}
	return st, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// redact hides a URL's password for messages.
func redact(u *url.URL) string { return u.Redacted() }

// sessionStore adapts a backend's concrete Store to Store.
type sessionStore[S session.Session] struct {
	session  func(id string) (S, error)
	declared session.Capabilities
	close    func() error
}

func (s *sessionStore[S]) Session(id string) (session.Session, error) {
	x, err := s.session(id)
	if err != nil {
		return nil, err
	}
	return x, nil
}
func (s *sessionStore[S]) Declared() session.Capabilities { return s.declared }
func (s *sessionStore[S]) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}
