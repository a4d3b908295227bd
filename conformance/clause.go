package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Group names a set of clauses graded together.
type Group string

// Clause groups. Base clauses must pass for any level above NONE; each
// capability group is graded only when the capability is declared.
const (
	GroupBase     Group = "base"
	GroupRunState Group = "runstate"
)

// groupFor returns the group of a capability's clauses.
func groupFor(c session.Capability) Group { return Group(c.String()) }

// clause is one named check of the suite.
type clause struct {
	name  string
	group Group
	needs session.Capability // 0 for base and runstate clauses
	run   func(c *C)
}

var (
	registryMu sync.Mutex
	registry   []clause
)

// register adds clauses to the suite; each file of clauses registers its
// own from init.
func register(cs ...clause) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, cs...)
}

func clauses() []clause {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append([]clause(nil), registry...)
}

// reporter is the part of testing.TB a clause uses; *testing.T has it, and
// so does the recorder Check uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
}

// C is what a clause gets: assertion plumbing (it satisfies testify's
// require.TestingT), the harness, and fresh session ids.
type C struct {
	reporter
	ctx  context.Context
	h    Harness
	opts Options
	ns   string

	mu     sync.Mutex
	opened map[string]bool // ids this clause opened, cleared afterwards
}

func newC(ctx context.Context, r reporter, h Harness, opts Options, name string) *C {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &C{reporter: r, ctx: ctx, h: h, opts: opts, opened: map[string]bool{},
		ns: opts.IDPrefix + strings.ReplaceAll(name, "/", "-") + "-" + hex.EncodeToString(b[:])}
}

func (c *C) track(id string) {
	c.mu.Lock()
	c.opened[id] = true
	c.mu.Unlock()
}

// cleanup clears every session the clause opened, best effort, so a check
// against a real store leaves nothing behind.
func (c *C) cleanup() {
	c.mu.Lock()
	ids := make([]string, 0, len(c.opened))
	for id := range c.opened {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), time.Minute)
	defer cancel()
	for _, id := range ids {
		if s, err := c.h.Open(ctx, id); err == nil {
			_ = s.Clear(ctx)
		}
	}
}

// Context returns the clause's context.
func (c *C) Context() context.Context { return c.ctx }

// Harness returns the harness under test.
func (c *C) Harness() Harness { return c.h }

// ID returns a session id unique to this clause run, ending in suffix.
func (c *C) ID(suffix string) string { return c.ns + ":" + suffix }

// Open opens session id (as given, not namespaced) or fails the clause.
func (c *C) Open(id string) session.Session {
	c.Helper()
	c.track(id)
	s, err := c.h.Open(c.ctx, id)
	if err != nil {
		c.Errorf("open %q: %v", id, err)
		c.FailNow()
	}
	return s
}

// OpenPeer opens session id through the harness's second client or fails.
func (c *C) OpenPeer(id string) session.Session {
	c.Helper()
	c.track(id)
	s, err := c.h.OpenPeer(c.ctx, id)
	if err != nil {
		c.Errorf("open peer %q: %v", id, err)
		c.FailNow()
	}
	return s
}

// Fresh opens a new session with a unique id.
func (c *C) Fresh(suffix string) session.Session {
	c.Helper()
	return c.Open(c.ID(suffix))
}

// Fatalf reports a failure and stops the clause.
func (c *C) Fatalf(format string, args ...any) {
	c.Helper()
	c.Errorf(format, args...)
	c.FailNow()
}

// Items parses JSON objects into items or fails the clause.
func (c *C) Items(ss ...string) []session.Item {
	c.Helper()
	items, err := session.Items(ss...)
	if err != nil {
		c.Fatalf("bad test item: %v", err)
	}
	return items
}

// Numbered returns n items {"type":"message","role":"user","content":"<tag>-<i>"}.
func Numbered(tag string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"type":"message","role":"user","content":%q}`, fmt.Sprintf("%s-%d", tag, i)))
	}
	return out
}
