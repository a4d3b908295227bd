package openaigo_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

func numberedMessages(tag string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"role":"user","content":"%s %d"}`, tag, i))
	}
	return out
}

// withoutID returns raw with its top-level "id" removed, as a string.
func withoutID(t testing.TB, it session.Item) string {
	t.Helper()
	id, ok := it.StringField("id")
	require.True(t, ok, "item %s has an id", it.Bytes())
	return strings.Replace(string(it.Bytes()), fmt.Sprintf(`"id":%q,`, id), "", 1)
}

func TestConversationsSession(t *testing.T) {
	ctx := context.Background()
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	var created []string
	s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{OnNewConversation: func(id string) { created = append(created, id) }})
	require.True(t, s.IgnoreIDsForMatching())
	require.True(t, session.Probe(s).Has(session.CapIgnoresIDs))
	require.True(t, session.Probe(s).Has(session.CapLatest))

	// Lazy: nothing is created by an empty write or a zero limit.
	require.Equal(t, "", s.SessionID())
	require.NoError(t, s.AddItems(ctx, nil))
	got, err := s.LatestItems(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = s.LatestItems(ctx, -1)
	require.ErrorIs(t, err, session.ErrInvalidLimit)
	require.Equal(t, 0, fc.conversationCount())
	require.NoError(t, s.Clear(ctx))
	require.Equal(t, 0, fc.conversationCount())

	// 250 items: 13 requests of at most 20; read back over 3 pages.
	items := numberedMessages("m", 250)
	require.NoError(t, s.AddItems(ctx, items))
	require.Len(t, created, 1)
	require.Equal(t, created[0], s.SessionID())
	require.Equal(t, 13, fc.count("POST items"))
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, all, 250)
	for i, it := range all {
		require.Equal(t, string(items[i].Bytes()), withoutID(t, it), "item %d is what was sent, with the API's id", i)
	}
	require.Equal(t, 3, fc.count("GET items"))

	latest, err := s.LatestItems(ctx, 150)
	require.NoError(t, err)
	require.Equal(t, texts(all[100:]), texts(latest))
	latest, err = s.LatestItems(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, texts(all), texts(latest))

	// A second session on the conversation id sees the same items.
	peer := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{ConversationID: s.SessionID()})
	require.Equal(t, s.SessionID(), peer.SessionID())
	it, ok, err := peer.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, string(all[249].Bytes()), string(it.Bytes()))
	n, err := session.Latest(ctx, s, 2)
	require.NoError(t, err)
	require.Equal(t, texts(all[247:249]), texts(n))

	// Clear deletes the conversation; the next write creates another.
	old := s.SessionID()
	require.NoError(t, s.Clear(ctx))
	require.Equal(t, "", s.SessionID())
	_, err = peer.Items(ctx)
	require.ErrorIs(t, err, openaigo.ErrConversationNotFound)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	require.NoError(t, peer.Clear(ctx), "a conversation already deleted counts as cleared")
	require.NoError(t, s.AddItems(ctx, items[:1]))
	require.Len(t, created, 2)
	require.NotEqual(t, old, s.SessionID())
	require.Equal(t, created[1], s.SessionID())
	it, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, string(items[0].Bytes()), withoutID(t, it))
	_, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)

	// An invalid item is refused before anything is sent.
	before := fc.count("POST items")
	err = s.AddItems(ctx, []session.Item{items[0], {}})
	var ie *session.ItemError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, 1, ie.Index)
	require.Equal(t, before, fc.count("POST items"))
}

// TestConversationsSanitize: items go out as Python's runner sends them to
// a Conversations session; the fake refuses what was not sanitised.
func TestConversationsSanitize(t *testing.T) {
	ctx := context.Background()
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
	in, err := session.ParseItems(
		`{"id":"fc_9","type":"function_call","call_id":"call_9","name":"f","arguments":"{}","_agents_tool_title":"F","provider_data":{"x":1}}`,
		`{"id":"__fake_id__","type":"function_call_output","call_id":"call_9","output":"ok"}`,
		`{"id":"rs_9","type":"reasoning","summary":[],"encrypted_content":"gAAA"}`,
		`{"type":"reasoning","summary":[]}`,
		`{"id":"mcpr_9","type":"mcp_approval_request","arguments":"{}","name":"ask","server_label":"wiki"}`,
	)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, in))
	got := fc.itemsOf(s.SessionID())
	require.Len(t, got, 4, "the reasoning item with neither id nor encrypted_content is not sent")
	require.Regexp(t, `^\{"id":"fc_[0-9a-f]{48}","type":"function_call","call_id":"call_9","name":"f","arguments":"\{\}"\}$`, got[0])
	require.Regexp(t, `^\{"id":"fco_[0-9a-f]{48}","type":"function_call_output","call_id":"call_9","output":"ok"\}$`, got[1])
	require.Equal(t, `{"id":"rs_9","type":"reasoning","summary":[],"encrypted_content":"gAAA"}`, got[2])
	require.Equal(t, `{"id":"mcpr_9","type":"mcp_approval_request","arguments":"{}","name":"ask","server_label":"wiki"}`, got[3])

	// The fake refuses them unsanitised (so the assertions above mean
	// something), and an id the conversation holds.
	raw := fc.client()
	for _, bad := range []string{in[0].String(), in[4].String()} {
		_, err := raw.Conversations.Items.New(ctx, s.SessionID(), itemsParams(bad))
		require.Error(t, err)
		require.True(t, isRejection(err), "%v", err)
	}
}

// TestConversationsBatchSplit: a batch of more than 20 items is several
// requests; a failure after the first says what landed and wraps
// session.ErrOutcomeUnknown.
func TestConversationsBatchSplit(t *testing.T) {
	ctx := context.Background()
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
	id, err := s.ConversationID(ctx)
	require.NoError(t, err)
	items := numberedMessages("b", 45)
	items[30] = session.MustItem(`{"role":"user","content":"x","provider_data":{}}`) // sanitised: accepted
	items[31] = session.MustItem(`{"type":"message","content":"no role"}`)           // refused by the API
	err = s.AddItems(ctx, items)
	require.ErrorIs(t, err, session.ErrOutcomeUnknown)
	require.True(t, isRejection(err))
	require.Contains(t, err.Error(), "20 of 45 items were added")
	require.Len(t, fc.itemsOf(id), 20)
}

func itemsParams(items ...string) conversations.ItemNewParams {
	ps := make([]responses.ResponseInputItemUnionParam, len(items))
	for i, s := range items {
		ps[i] = openaigo.InputParam(session.MustItem(s))
	}
	return conversations.ItemNewParams{Items: ps}
}

// TestConversationsRetries: openai-go's retries stay on; a write whose
// reply is lost is ErrOutcomeUnknown and is not sent again.
func TestConversationsRetries(t *testing.T) {
	ctx := context.Background()
	one := numberedMessages("r", 1)
	setup := func(t *testing.T) (*fakeConv, *openaigo.ConversationsSession, string) {
		fc := newFakeConv(t, newFakeAPI(t, e2eScript))
		s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
		id, err := s.ConversationID(ctx)
		require.NoError(t, err)
		return fc, s, id
	}
	t.Run("429 on a write is retried and lands once", func(t *testing.T) {
		fc, s, id := setup(t)
		fc.failNext("POST items", injected{code: 429}, injected{code: 429})
		require.NoError(t, s.AddItems(ctx, one))
		require.Equal(t, 3, fc.count("POST items"))
		require.Len(t, fc.itemsOf(id), 1)
	})
	t.Run("5xx on reads is retried", func(t *testing.T) {
		fc, s, _ := setup(t)
		require.NoError(t, s.AddItems(ctx, one))
		fc.failNext("GET items", injected{code: 503}, injected{code: 500})
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, 3, fc.count("GET items"))
	})
	t.Run("5xx on reads, retries exhausted", func(t *testing.T) {
		fc, s, _ := setup(t)
		fc.failNext("GET items", injected{code: 503}, injected{code: 503}, injected{code: 503})
		_, err := s.Items(ctx)
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, 503, apiErr.StatusCode)
		require.Equal(t, 3, fc.count("GET items"))
	})
	for _, c := range []struct {
		name    string
		inj     injected
		landed  int
		unknown bool
	}{
		{"500 before the write applied", injected{code: 500}, 0, true},
		{"503 after the write applied", injected{code: 503, applied: true}, 1, true},
		{"connection dropped after the write applied", injected{code: dropConn, applied: true}, 1, true},
		{"400 is known not to have happened", injected{code: 400}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc, s, id := setup(t)
			fc.failNext("POST items", c.inj)
			err := s.AddItems(ctx, one)
			require.Error(t, err)
			require.Equal(t, c.unknown, errors.Is(err, session.ErrOutcomeUnknown), "%v", err)
			require.Equal(t, 1, fc.count("POST items"), "never sent twice")
			require.Len(t, fc.itemsOf(id), c.landed)
			require.NotContains(t, err.Error(), "sk-test-not-a-secret")
		})
	}
	t.Run("a server that cannot be reached: nothing was sent", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		cl := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("sk-test-not-a-secret"), option.WithMaxRetries(1), option.WithMaxRetryDelay(20*1e6))
		s := openaigo.NewConversationsSession(&cl, openaigo.ConversationsOptions{ConversationID: "conv_1"})
		err := s.AddItems(ctx, one)
		require.Error(t, err)
		require.NotErrorIs(t, err, session.ErrOutcomeUnknown)
	})
	t.Run("a pop whose delete reply was lost is retried and finds the item gone", func(t *testing.T) {
		fc, s, id := setup(t)
		require.NoError(t, s.AddItems(ctx, numberedMessages("p", 2)))
		fc.failNext("DELETE item", injected{code: 503, applied: true})
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Contains(t, it.String(), `"p 1"`)
		require.Equal(t, 2, fc.count("DELETE item"))
		require.Len(t, fc.itemsOf(id), 1)
	})
	t.Run("a clear whose reply was lost is retried", func(t *testing.T) {
		fc, s, _ := setup(t)
		fc.failNext("DELETE conversation", injected{code: dropConn, applied: true})
		require.NoError(t, s.Clear(ctx))
		require.Equal(t, 2, fc.count("DELETE conversation"))
		require.Equal(t, 0, fc.conversationCount())
		require.Equal(t, "", s.SessionID())
	})
	t.Run("a pop whose item another writer deleted", func(t *testing.T) {
		fc, s, id := setup(t)
		require.NoError(t, s.AddItems(ctx, one))
		all, err := s.Items(ctx)
		require.NoError(t, err)
		_, err = fc.client().Conversations.Items.Delete(ctx, id, all[0].ID())
		require.NoError(t, err)
		// The pop reads an empty conversation now: nothing to pop.
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

// TestConversationsNotAtomic shows, and reports, the two guarantees of the
// Session contract the Conversations API cannot give and the conformance
// suite has no clause for: an atomic pop and an all-or-nothing batch of
// more than MaxItemsPerRequest items.
func TestConversationsNotAtomic(t *testing.T) {
	ctx := context.Background()
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
	require.NoError(t, s.AddItems(ctx, numberedMessages("x", 2)))
	other := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{ConversationID: s.SessionID()})

	// pop/atomic: another writer appends between the pop's read and its
	// delete; the pop removes and returns an item that is no longer the
	// newest.
	fc.beforeNext("DELETE item", func() { require.NoError(t, other.AddItems(ctx, numberedMessages("y", 1))) })
	popped, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	left, err := s.Items(ctx)
	require.NoError(t, err)
	require.Contains(t, popped.String(), `"x 1"`, "the pop returned the item it read")
	require.Len(t, left, 2)
	require.Contains(t, left[1].String(), `"y 0"`, "the newest item when the pop removed another one stays")

	// pop/concurrent: a second pop deletes the item between the first
	// pop's read and its delete; the first pop fails although items remain.
	fc.beforeNext("DELETE item", func() {
		_, ok, err := other.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	})
	_, _, popErr := s.PopItem(ctx)
	require.ErrorIs(t, popErr, openaigo.ErrItemGone)

	// batch/all-or-nothing: 25 items are two requests; the second fails
	// and the first 20 stay.
	c := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
	id, err := c.ConversationID(ctx)
	require.NoError(t, err)
	fc.failNext("POST items", injected{}, injected{code: 400}) // the first passes (code 0: no failure)
	err = c.AddItems(ctx, numberedMessages("b", 25))
	require.ErrorIs(t, err, session.ErrOutcomeUnknown)
	landed := len(fc.itemsOf(id))
	require.Equal(t, 20, landed)

	t.Logf("guarantees the Conversations API cannot give (reported, not skipped):\n"+
		"  FAIL  pop/atomic             another writer's append between the read and the delete: the pop returned %s, not the newest item\n"+
		"  FAIL  pop/concurrent         a concurrent pop between the read and the delete: %v\n"+
		"  FAIL  batch/all-or-nothing   25 items, the second request refused: %d items stayed (the error wraps session.ErrOutcomeUnknown)",
		popped, popErr, landed)
}

// TestFakeConvRules: the fake Conversations API refuses what the API
// refuses, with its status codes, so the tests' zero rejections mean
// something.
func TestFakeConvRules(t *testing.T) {
	ctx := context.Background()
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	cl := fc.client(option.WithMaxRetries(0))
	status := func(err error) int {
		var e *openai.Error
		if errors.As(err, &e) {
			return e.StatusCode
		}
		return 0
	}
	c, err := cl.Conversations.New(ctx, conversations.ConversationNewParams{Items: itemsParams(`{"role":"user","content":"hi"}`).Items})
	require.NoError(t, err)
	require.Regexp(t, `^conv_[0-9a-f]{48}$`, c.ID)
	got, err := cl.Conversations.Get(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, c.ID, got.ID)
	require.Len(t, fc.itemsOf(c.ID), 1)

	_, err = cl.Conversations.Get(ctx, "conv_unknown")
	require.Equal(t, 404, status(err))
	_, err = cl.Conversations.Items.New(ctx, "conv_unknown", itemsParams(`{"role":"user","content":"x"}`))
	require.Equal(t, 404, status(err))
	for _, p := range []conversations.ItemNewParams{
		itemsParams(),
		itemsParams(texts(numberedMessages("n", 21))...),
		itemsParams(`{"type":"message","content":"no role"}`),
		itemsParams(`{"role":"user","content":"x","provider_data":{}}`),
		itemsParams(`{"id":"__fake_id__","type":"function_call_output","call_id":"c","output":"x"}`),
		itemsParams(`{"id":"rs_1","type":"reasoning","summary":[]}`, `{"id":"rs_1","type":"reasoning","summary":[]}`),
	} {
		_, err := cl.Conversations.Items.New(ctx, c.ID, p)
		require.Equal(t, 400, status(err), "%v", err)
	}
	require.Len(t, fc.itemsOf(c.ID), 1, "a refused request adds nothing")
	for _, q := range []conversations.ItemListParams{
		{Limit: param.NewOpt(int64(0))},
		{Limit: param.NewOpt(int64(101))},
		{After: param.NewOpt("msg_unknown")},
	} {
		_, err := cl.Conversations.Items.List(ctx, c.ID, q)
		require.Equal(t, 400, status(err), "%v", err)
	}
	_, err = cl.Conversations.Items.Get(ctx, c.ID, "msg_unknown", conversations.ItemGetParams{})
	require.Equal(t, 404, status(err))
	_, err = cl.Conversations.Items.Delete(ctx, c.ID, "msg_unknown")
	require.Equal(t, 404, status(err))
	del, err := cl.Conversations.Delete(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, del.Deleted)
	_, err = cl.Conversations.Delete(ctx, c.ID)
	require.Equal(t, 404, status(err))

	// /v1/responses through the fake: duplicate ids are refused.
	in := responses.ResponseInputParam{
		openaigo.InputParam(session.MustItem(`{"id":"rs_1","type":"reasoning","summary":[]}`)),
		openaigo.InputParam(session.MustItem(`{"id":"rs_1","type":"reasoning","summary":[]}`)),
	}
	_, err = cl.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: in}})
	require.Equal(t, 400, status(err))
	require.Equal(t, "Duplicate item found with id rs_1.", apiMessage(err))
	rejected, _ := fc.stats()
	require.Len(t, rejected, 1)
}

// TestConversationsContext: a write whose deadline passes after it was
// sent may have applied (ErrOutcomeUnknown); one cancelled before it was
// sent did not; RequestOptions reach every request.
func TestConversationsContext(t *testing.T) {
	fc := newFakeConv(t, newFakeAPI(t, e2eScript))
	var seen []string
	var mu sync.Mutex
	s := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{
		RequestOptions: []option.RequestOption{option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, r.Header.Get("X-Tenant"))
			mu.Unlock()
			return next(r)
		}), option.WithHeader("X-Tenant", "t1")},
	})
	id, err := s.ConversationID(context.Background())
	require.NoError(t, err)

	release := make(chan struct{})
	fc.beforeNext("POST items", func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.AddItems(ctx, numberedMessages("d", 1))
	close(release)
	require.ErrorIs(t, err, session.ErrOutcomeUnknown)
	require.Eventually(t, func() bool { return len(fc.itemsOf(id)) == 1 }, 5*time.Second, 10*time.Millisecond, "the write applied after the deadline")
	require.Equal(t, 1, fc.count("POST items"), "not sent again")

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	err = s.AddItems(ctx, numberedMessages("c", 1))
	require.Error(t, err)
	require.NotErrorIs(t, err, session.ErrOutcomeUnknown)
	require.Equal(t, 1, fc.count("POST items"))

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for _, h := range seen {
		require.Equal(t, "t1", h)
	}
}
