package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// ErrInvalidDSN reports a store URL that cannot be opened as written: an
// unknown scheme, an unknown or malformed option, a URL that does not
// parse.
var ErrInvalidDSN = errors.New("adapters: invalid store URL")

// Store is an opened store of sessions, whatever its backend. A backend's
// Store may also implement Lister, PageLister, Summarizer, Timestamps and
// driver.RawAppender.
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
// they hold, all at once; PageLister lists them a page at a time.
type Lister interface {
	ListSessions(ctx context.Context) ([]string, error)
}

// Options are settings of OpenWith that do not belong in a URL.
type Options struct {
	// OnCorrupt receives reports of corrupt stored records; nil logs a
	// warning with slog.
	OnCorrupt driver.CorruptHandler
	// ReadOnly opens the store without creating anything: no file, table,
	// collection or index. A store that does not exist yet is an error,
	// not an empty store. Writes through such a store may fail.
	ReadOnly bool
}

// URLOpener opens the stores of one or more URL schemes. A backend
// registers one with Register, usually in an init function of its urls.go.
type URLOpener interface {
	// OpenStoreURL opens the store u names. u's query holds the options;
	// the opener parses them with ParseQuery or ParsePassthroughQuery, so
	// that an unknown or malformed option is an error wrapping
	// ErrInvalidDSN.
	OpenStoreURL(ctx context.Context, u *url.URL, opts Options) (Store, error)
}

// URLOpenerFunc adapts a function to URLOpener.
type URLOpenerFunc func(ctx context.Context, u *url.URL, opts Options) (Store, error)

// OpenStoreURL calls f.
func (f URLOpenerFunc) OpenStoreURL(ctx context.Context, u *url.URL, opts Options) (Store, error) {
	return f(ctx, u, opts)
}

var (
	mu      sync.RWMutex
	openers = map[string]URLOpener{}
)

// Register makes o the opener of URLs with the given scheme (lower case,
// as RFC 3986 spells it: a letter, then letters, digits, '+', '-' or '.').
// Like database/sql's Register, it panics if o is nil, if the scheme is
// not valid, or if Register is called twice for one scheme.
func Register(scheme string, o URLOpener) {
	if o == nil {
		panic("adapters: Register opener is nil")
	}
	if !validScheme(scheme) || strings.ToLower(scheme) != scheme {
		panic(fmt.Sprintf("adapters: Register of invalid scheme %q", scheme))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("adapters: Register called twice for scheme " + scheme)
	}
	openers[scheme] = o
}

// validScheme reports whether s is a URL scheme (RFC 3986 §3.1).
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open opens the store dsn names. The scheme picks the registered backend;
// see the package documentation for the schemes and their options.
func Open(ctx context.Context, dsn string) (Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with Options. Its errors never hold the URL's
// password: the URL appears as Redact writes it, and the password is
// masked in the backend's own messages too.
func OpenWith(ctx context.Context, dsn string, opts Options) (Store, error) {
	red, secrets := redact(dsn)
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidDSN)
	}
	if strings.Contains(dsn, "#") {
		return nil, fmt.Errorf("%w: %s: a '#' ends a URL (write a literal '#' as %%23)", ErrInvalidDSN, red)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrInvalidDSN, red, parseProblem(err, len(secrets) > 0))
	}
	scheme := strings.ToLower(u.Scheme)
	mu.RLock()
	o, ok := openers[scheme]
	mu.RUnlock()
	if !ok {
		known := strings.Join(Schemes(), ", ")
		if known == "" {
			known = "none registered: import a backend, or github.com/agentsessions/sessions/adapters/all"
		}
		if scheme == "" {
			return nil, fmt.Errorf("%w: %s has no scheme (want one of %s)", ErrInvalidDSN, red, known)
		}
		return nil, fmt.Errorf("%w: unknown scheme %q (want one of %s)", ErrInvalidDSN, scheme, known)
	}
	st, err := o.OpenStoreURL(ctx, u, opts)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, red) || strings.Contains(msg, dsn) {
			return nil, scrub(err, secrets...) // it names the URL already
		}
		return nil, scrub(fmt.Errorf("open %s: %w", red, err), secrets...)
	}
	return st, nil
}

// parseProblem describes why url.Parse refused a URL without quoting any
// of it: url.Parse's own messages quote the URL, or a piece of it, which
// may be a piece of the password.
func parseProblem(err error, secret bool) string {
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "a '%' not followed by two hex digits (write a literal '%' as %25)"
	case errors.As(err, &host):
		return "an invalid character in the host"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	for _, safe := range []string{
		"missing protocol scheme",
		"first path segment in URL cannot contain colon",
		"invalid control character in URL",
		"net/url: invalid userinfo",
	} {
		if msg == safe {
			return strings.TrimPrefix(msg, "net/url: ")
		}
	}
	if strings.HasPrefix(msg, "invalid port") {
		return "an invalid port after the host (in a password, write '/' as %2F, '?' as %3F and '@' as %40)"
	}
	if !secret && !strings.ContainsAny(msg, `"'`) {
		return msg
	}
	return "not a valid URL"
}

// sessionStore is the Store NewStore returns.
type sessionStore[S session.Session] struct {
	session  func(id string) (S, error)
	declared session.Capabilities
	close    func() error
}

// NewStore returns a Store whose sessions come from open, closed by close
// (nil for nothing to close). Declared is session.Probe of a handle open
// returns, so that a Store declares exactly what its sessions implement.
// A backend's URLOpener wraps its concrete store with it, embedding the
// result in a type of its own to add Lister or driver.RawAppender.
func NewStore[S session.Session](open func(id string) (S, error), close func() error) (Store, error) {
	h, err := open("adapters-declared-probe")
	if err != nil {
		return nil, fmt.Errorf("adapters: probing the session type: %w", err)
	}
	return &sessionStore[S]{session: open, declared: session.Probe(h), close: close}, nil
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
