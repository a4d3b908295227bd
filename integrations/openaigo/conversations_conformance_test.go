package openaigo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// convHarness runs the conformance suite on ConversationsSessions over the
// fake: a suite id is mapped to the conversation its first Open creates
// (and to the next one after a Clear); OpenPeer is a session of another
// client on that conversation.
type convHarness struct {
	fc *fakeConv
	mu sync.Mutex
	to map[string]string // suite id -> conversation id
}

func (h *convHarness) Name() string { return "openaigo.ConversationsSession (fake API)" }

func (h *convHarness) Open(ctx context.Context, id string) (session.Session, error) {
	if id == "" {
		return nil, session.ErrInvalidSessionID
	}
	h.mu.Lock()
	conv, ok := h.to[id]
	h.mu.Unlock()
	if strings.HasPrefix(id, "conv_") { // a clause reopening s.SessionID()
		conv, ok = id, true
	}
	s := openaigo.NewConversationsSession(h.fc.client(), openaigo.ConversationsOptions{
		ConversationID: conv,
		OnNewConversation: func(c string) {
			h.mu.Lock()
			h.to[id] = c
			h.mu.Unlock()
		},
	})
	if !ok {
		if _, err := s.ConversationID(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (h *convHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}

func (h *convHarness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapIgnoresIDs)
}

// TestConversationsConformance grades the session with the conformance
// suite, as it is: the clauses a remote API cannot pass (a session id of
// the caller's choice, items kept byte for byte, a batch of more than 20
// items all or nothing, an atomic pop) fail and are reported, not
// skipped. The failing clauses are checked against testdata's list, so a
// change either way shows; the grade is in ConversationsSession's doc.
func TestConversationsConformance(t *testing.T) {
	t.Run("as it is", func(t *testing.T) {
		fc := newFakeConv(t, newFakeAPI(t, e2eScript))
		gradeConversations(t, &convHarness{fc: fc, to: map[string]string{}}, "conversations_conformance_failures.txt")
	})
	t.Run("ids the API gave left out", func(t *testing.T) {
		fc := newFakeConv(t, newFakeAPI(t, e2eScript))
		gradeConversations(t, idBlindHarness{&convHarness{fc: fc, to: map[string]string{}}}, "conversations_conformance_failures_idblind.txt")
	})
}

func gradeConversations(t *testing.T, h conformance.Harness, golden string) {
	rep := conformance.Check(context.Background(), h, conformance.Options{})
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	t.Logf("conformance report:\n%s", text.String())
	t.Logf("conformance %s: %s", h.Name(), rep.Summary())

	var failed []string
	for _, c := range rep.Clauses {
		if c.Status == conformance.StatusFail {
			failed = append(failed, fmt.Sprintf("%s %s", c.Part, c.Name))
			if os.Getenv("CONFORMANCE_MESSAGES") != "" {
				t.Logf("%s %s: %s", c.Part, c.Name, c.Message)
			}
		}
	}
	sort.Strings(failed)
	for _, p := range rep.Parts {
		t.Logf("part %s: %s, %d passed, %d failed, %d skipped of %d", p.Name, p.Level, p.Passed, p.Failed, p.Skipped, p.Total)
	}
	path := filepath.Join("testdata", golden)
	if os.Getenv("UPDATE_CONFORMANCE") != "" {
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(failed, "\n")+"\n"), 0o644))
		return
	}
	require.Equal(t, readLines(t, path), failed, "the clauses that fail changed: review, then UPDATE_CONFORMANCE=1 and the doc of ConversationsSession")
}

// apiIDs matches the ids the fake gives the items it stores.
var apiIDs = regexp.MustCompile(`^\{"id":"(msg|fc|fco|rs|item)_[0-9a-f]{48}",`)

// stripAPIID returns it without the id the API gave it (an id it was
// sent with stays).
func stripAPIID(it session.Item) session.Item {
	b := it.Bytes()
	if loc := apiIDs.FindIndex(b); loc != nil {
		return session.MustItem("{" + string(b[loc[1]:]))
	}
	return it
}

func stripAPIIDs(items []session.Item) []session.Item {
	out := make([]session.Item, len(items))
	for i, it := range items {
		out[i] = stripAPIID(it)
	}
	return out
}

// idBlind is a ConversationsSession whose reads leave out the ids the API
// gave: the items as the suite wrote them, so that its byte comparisons
// grade the rest (order, batches, pop, clear, concurrency), as runstate's
// id-insensitive digests compare.
type idBlind struct{ *openaigo.ConversationsSession }

func (s idBlind) Items(ctx context.Context) ([]session.Item, error) {
	items, err := s.ConversationsSession.Items(ctx)
	return stripAPIIDs(items), err
}

func (s idBlind) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	items, err := s.ConversationsSession.LatestItems(ctx, n)
	return stripAPIIDs(items), err
}

func (s idBlind) PopItem(ctx context.Context) (session.Item, bool, error) {
	it, ok, err := s.ConversationsSession.PopItem(ctx)
	if ok {
		it = stripAPIID(it)
	}
	return it, ok, err
}

type idBlindHarness struct{ *convHarness }

func (h idBlindHarness) Name() string {
	return "openaigo.ConversationsSession (fake API, ids the API gave left out)"
}

func (h idBlindHarness) Open(ctx context.Context, id string) (session.Session, error) {
	s, err := h.convHarness.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	return idBlind{s.(*openaigo.ConversationsSession)}, nil
}

func (h idBlindHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
