package openaigo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// MaxItemsPerRequest is how many items the Conversations API accepts in
// one request ("You may add up to 20 items at a time"): AddItems sends a
// longer batch in several requests, so such a batch is not atomic.
const MaxItemsPerRequest = 20

// pageSize is the largest page the API lists.
const pageSize = 100

// ErrConversationNotFound reports a conversation the API does not know
// (HTTP 404): deleted by another session's Clear, or never created under
// this API key's project. It is wrapped with the API's own error.
var ErrConversationNotFound = errors.New("openaigo: conversation not found")

// ConversationsOptions configure a ConversationsSession.
type ConversationsOptions struct {
	// ConversationID is an existing conversation to keep the history in.
	// Empty: the session creates one on its first read, or its first
	// write of at least one item.
	ConversationID string
	// OnNewConversation, when set, is called with the id of every
	// conversation the session creates: the first one, and the one after
	// each Clear. Store it to reopen the conversation in another process.
	OnNewConversation func(id string)
	// Include are the fields reads ask the API to include besides
	// reasoning.encrypted_content, which is always asked for (a reasoning
	// item read back without it cannot be sent statelessly).
	Include []responses.ResponseIncludable
	// RequestOptions are added to every request the session makes, after
	// the client's own.
	RequestOptions []option.RequestOption
}

// ConversationsSession is a session.Session whose history the OpenAI
// Conversations API keeps, as the Python Agents SDK's
// OpenAIConversationsSession does; the session id is the conversation id.
// Items go out as param.Override of their bytes and come back as the raw
// JSON the API sent, so nothing is lost to openai-go's typed decoding.
//
// It follows the Python class:
//
//   - the conversation is created lazily, on the first read or the first
//     write of at least one item (ConversationID creates it at once);
//     SessionID is "" until then. Open a runstate.Run on the session only once it has an
//     id: a pending write records it;
//   - Items lists the conversation in ascending order, page after page;
//     LatestItems (session.LatestReader) lists it in descending order with
//     a limit, then reverses; a limit of 0 gives none without a request;
//   - AddItems sanitises each item first, as Python's runner does for a
//     Conversations session (runstate.SanitizeForConversations, semantics
//     §3.8): no SDK metadata keys or provider_data, no top-level id but on
//     the types whose create-item schema needs one, and no reasoning item
//     with neither id nor encrypted_content. The API gives every item
//     without an id one of its own, so items read back are not the bytes
//     written: IgnoreIDsForMatching reports true (session.IDInsensitive)
//     and runstate matches their digests without ids;
//   - PopItem reads the newest item and then deletes it by id: two
//     requests, not atomic: of two concurrent pops one may fail with
//     ErrItemGone, and an item appended between the read and the delete
//     stays while the one read is removed;
//   - Clear deletes the conversation; the next read or write creates a new
//     one, reported to OnNewConversation.
//
// What the API cannot give, this session does not promise: a batch of
// more than MaxItemsPerRequest items is sent in several requests, and a
// failure after the first leaves the first ones in the conversation (the
// error then wraps session.ErrOutcomeUnknown and says how many landed);
// checkpoints are not kept (use runstate.Options.Store); there is no
// Replace, follow cursor or once-only append.
//
// The conformance suite's grade of it, on the fake of the API the tests
// run (TestConversationsConformance, TestConversationsNotAtomic), is NONE,
// and says why:
//
//	as it is:                    contract NONE  5 passed, 16 failed, 21 skipped of 42
//	                             hidden   NONE  4 passed, 15 failed, 23 skipped of 42
//	                             held-write NONE 0 passed, 96 failed, 48 skipped of 144
//	ids the API gave left out:   contract NONE 15 passed,  6 failed, 21 skipped of 42
//	                             hidden   NONE 13 passed,  6 failed, 23 skipped of 42
//	                             held-write FULL 96 passed, 0 failed, 48 skipped of 144
//
// Items come back with the id the API gave them, so every byte-for-byte
// clause fails as it is; with those ids left out on read (what runstate's
// id-insensitive digests do), the held-write part passes whole and six
// contract clauses still fail: the session id is the conversation's, not
// the caller's (core/empty-session, ids/hostile); the API refuses items
// that are not Responses items (core/round-trip, concurrency/two-handles);
// a Clear through one handle deletes the conversation another handle
// still names (core/peer-visibility, follow/fallback-semantics: 404). The
// suite has no clause for the two guarantees the API cannot give, and
// TestConversationsNotAtomic reports them failed: pop/atomic (an append
// between the read and the delete: the pop removes an item that is no
// longer the newest), pop/concurrent (a concurrent pop: ErrItemGone) and
// batch/all-or-nothing (25 items, the second request refused: 20 stay).
//
// Not verified against the live API: the fake keeps each item's members
// as sent, adding only the id. If the API also reshapes what it stores (a
// message's type, status, content parts), the id-insensitive digests of a
// batch whose reply was lost no longer match what is read back, and
// runstate refuses to guess (ErrCannotReconcile) instead of landing it
// twice.
//
// Errors: the API's answers (4xx, 5xx) are wrapped *openai.Error values
// (errors.As), a 404 on the conversation also ErrConversationNotFound.
// openai-go's retries stay on: every read and delete is retried on 408,
// 409, 429, 5xx and connection errors, and a write on 429 and on a
// connection that failed before the request was sent. A write whose
// request was sent and whose reply was lost (a 5xx, a broken connection,
// a deadline) is not sent again, since the API has no idempotency key for
// items and a second request may add the batch twice: its error wraps
// session.ErrOutcomeUnknown, and the caller reads the conversation before
// writing again (runstate does). An error without it means nothing was
// written. A delete whose first attempt may have applied and whose retry
// finds the item or conversation gone succeeds.
//
// A ConversationsSession is safe for concurrent use; two sessions on one
// conversation id (two processes) see each other's items.
type ConversationsSession struct {
	conv    *conversations.ConversationService
	items   *conversations.ItemService
	include []responses.ResponseIncludable
	reqOpts []option.RequestOption
	onNew   func(id string)

	mu sync.Mutex // held while the conversation is created
	id string
}

// NewConversationsSession returns a session kept in a conversation of the
// Conversations API reached through client: opts.ConversationID, or one
// created on first use.
func NewConversationsSession(client *openai.Client, opts ConversationsOptions) *ConversationsSession {
	include := []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	for _, inc := range opts.Include {
		if !slices.Contains(include, inc) {
			include = append(include, inc)
		}
	}
	return &ConversationsSession{
		conv:    &client.Conversations,
		items:   &client.Conversations.Items,
		include: include,
		reqOpts: slices.Clone(opts.RequestOptions),
		onNew:   opts.OnNewConversation,
		id:      opts.ConversationID,
	}
}

// SessionID returns the conversation id, or "" while no conversation was
// created (ConversationID creates it).
func (s *ConversationsSession) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// ConversationID returns the conversation id, creating the conversation
// when the session has none yet.
func (s *ConversationsSession) ConversationID(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != "" {
		return s.id, nil
	}
	var t tracker
	c, err := s.conv.New(ctx, conversations.ConversationNewParams{}, t.options(s.reqOpts, false)...)
	if err != nil {
		// No item was sent: whatever the reply, nothing of the history
		// was written (a lost reply may leave an empty conversation).
		return "", fmt.Errorf("openaigo: create conversation: %w", err)
	}
	if c.ID == "" {
		return "", errors.New("openaigo: create conversation: the API answered without an id")
	}
	s.id = c.ID
	if s.onNew != nil {
		s.onNew(c.ID)
	}
	return c.ID, nil
}

// IgnoreIDsForMatching reports true: the API assigns the ids of the items
// it stores, so digests of this session's items ignore the top-level id
// (session.IDInsensitive).
func (s *ConversationsSession) IgnoreIDsForMatching() bool { return true }

// Items returns every item of the conversation, oldest first, as the raw
// JSON the API sent.
func (s *ConversationsSession) Items(ctx context.Context) ([]session.Item, error) {
	return s.list(ctx, conversations.ItemListParamsOrderAsc, -1)
}

// LatestItems returns the newest n items, oldest first: a descending list
// with a limit, reversed. n == 0 gives none, without a request; n < 0 is
// session.ErrInvalidLimit.
func (s *ConversationsSession) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, session.ErrInvalidLimit
	}
	if n == 0 {
		return nil, nil
	}
	out, err := s.list(ctx, conversations.ItemListParamsOrderDesc, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// list reads up to max items (max < 0: all) in order, page by page.
func (s *ConversationsSession) list(ctx context.Context, order conversations.ItemListParamsOrder, max int) ([]session.Item, error) {
	id, err := s.ConversationID(ctx)
	if err != nil {
		return nil, err
	}
	var out []session.Item
	after := ""
	for max < 0 || len(out) < max {
		limit := pageSize
		if max >= 0 && max-len(out) < limit {
			limit = max - len(out)
		}
		q := conversations.ItemListParams{Order: order, Limit: param.NewOpt(int64(limit)), Include: s.include}
		if after != "" {
			q.After = param.NewOpt(after)
		}
		var body []byte
		var t tracker
		opts := append(t.options(s.reqOpts, false), option.WithResponseBodyInto(&body))
		if _, err := s.items.List(ctx, id, q, opts...); err != nil {
			return nil, apiErr("list the items of", id, err)
		}
		page, err := DecodeItemPage(body)
		if err != nil {
			return nil, fmt.Errorf("openaigo: list the items of conversation %s: %w", id, err)
		}
		out = append(out, page.Items...)
		if !page.HasMore || len(page.Items) == 0 {
			break
		}
		if page.LastID == "" {
			return nil, fmt.Errorf("openaigo: list the items of conversation %s: a page with has_more and no last_id", id)
		}
		after = page.LastID
	}
	if max >= 0 && len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// AddItems sanitises items (runstate.SanitizeForConversations) and adds
// them to the conversation, creating it first when needed. An invalid item
// is refused before anything is sent. A batch of at most
// MaxItemsPerRequest items is one request, all or nothing; a longer one
// is several, in order, and an error after the first wraps
// session.ErrOutcomeUnknown with how many items landed.
func (s *ConversationsSession) AddItems(ctx context.Context, items []session.Item) error {
	for i, it := range items {
		if !it.Valid() {
			return &session.ItemError{Index: i}
		}
	}
	items, _ = runstate.SanitizeForConversations(items)
	if len(items) == 0 {
		return nil
	}
	id, err := s.ConversationID(ctx)
	if err != nil {
		return err
	}
	for start := 0; start < len(items); start += MaxItemsPerRequest {
		chunk := items[start:min(start+MaxItemsPerRequest, len(items))]
		err := s.addChunk(ctx, id, chunk)
		if err == nil {
			continue
		}
		if start > 0 {
			if errors.Is(err, session.ErrOutcomeUnknown) {
				return fmt.Errorf("openaigo: %d of %d items were added, then: %w", start, len(items), err)
			}
			return fmt.Errorf("%w: openaigo: %d of %d items were added, then: %w", session.ErrOutcomeUnknown, start, len(items), err)
		}
		return err
	}
	return nil
}

func (s *ConversationsSession) addChunk(ctx context.Context, id string, items []session.Item) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := tracker{cancel: cancel}
	params := conversations.ItemNewParams{Items: InputParams(items), Include: s.include}
	_, err := s.items.New(ctx, id, params, t.options(s.reqOpts, true)...)
	if err == nil {
		return nil
	}
	if t.lost != nil {
		return fmt.Errorf("openaigo: add %d items to conversation %s: %w: %w", len(items), id, session.ErrOutcomeUnknown, t.lost)
	}
	if t.maybe {
		return fmt.Errorf("openaigo: add %d items to conversation %s: %w: %w", len(items), id, session.ErrOutcomeUnknown, err)
	}
	return apiErr(fmt.Sprintf("add %d items to", len(items)), id, err)
}

// PopItem removes and returns the newest item: it reads it, then deletes
// it by its id. The two requests are not atomic: of two concurrent pops
// one may find the item gone (its error wraps ErrItemGone), and an item
// another writer appends between them is not the one removed.
func (s *ConversationsSession) PopItem(ctx context.Context) (session.Item, bool, error) {
	last, err := s.LatestItems(ctx, 1)
	if err != nil || len(last) == 0 {
		return session.Item{}, false, err
	}
	it := last[0]
	itemID, ok := it.StringField("id")
	if !ok || itemID == "" {
		return session.Item{}, false, fmt.Errorf("openaigo: pop conversation %s: its newest item has no id", s.SessionID())
	}
	id := s.SessionID()
	err = s.delete(func(opts []option.RequestOption) error {
		_, err := s.items.Delete(ctx, id, itemID, opts...)
		return err
	})
	switch {
	case err == nil:
		return it, true, nil
	case isStatus(err, http.StatusNotFound):
		return session.Item{}, false, fmt.Errorf("openaigo: pop item %s of conversation %s: %w: %w", itemID, id, ErrItemGone, err)
	}
	return session.Item{}, false, apiErr("pop item "+itemID+" of", id, err)
}

// ErrItemGone reports a PopItem whose item another writer deleted between
// its read and its delete: nothing was removed by this call.
var ErrItemGone = errors.New("openaigo: the item was deleted by another writer")

// Clear deletes the conversation; the next read or write creates a new one
// (reported to OnNewConversation). A session that has no conversation yet
// has nothing to delete. A conversation already deleted (by another
// session's Clear) counts as cleared.
func (s *ConversationsSession) Clear(ctx context.Context) error {
	id := s.SessionID()
	if id == "" {
		return nil
	}
	err := s.delete(func(opts []option.RequestOption) error {
		_, err := s.conv.Delete(ctx, id, opts...)
		return err
	})
	if err != nil && !isStatus(err, http.StatusNotFound) {
		return apiErr("delete", id, err)
	}
	s.mu.Lock()
	if s.id == id {
		s.id = ""
	}
	s.mu.Unlock()
	return nil
}

// delete runs an idempotent delete with openai-go's retries; a retry that
// finds the target gone after an attempt that may have applied succeeded.
func (s *ConversationsSession) delete(do func([]option.RequestOption) error) error {
	var t tracker
	err := do(t.options(s.reqOpts, false))
	if err != nil && t.maybe && isStatus(err, http.StatusNotFound) {
		return nil
	}
	if err != nil && t.maybe && !isStatus(err, http.StatusNotFound) && !isClientError(err) {
		return fmt.Errorf("%w: %w", session.ErrOutcomeUnknown, err)
	}
	return err
}

// tracker follows the attempts openai-go makes for one request.
type tracker struct {
	write  bool               // the request adds items: never resend it once it may have applied
	cancel context.CancelFunc // stops openai-go's retry loop after a lost write
	mu     sync.Mutex
	maybe  bool  // an attempt was sent and its reply lost (5xx, transport error after sending)
	lost   error // a write's lost reply that stopped the retries
}

func (t *tracker) options(base []option.RequestOption, write bool) []option.RequestOption {
	t.write = write
	return append(slices.Clone(base), option.WithMiddleware(t.middleware))
}

func (t *tracker) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err // done before this attempt: it is not sent
	}
	res, err := next(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil && !notSent(err):
		t.maybe = true
		if t.write && t.cancel != nil {
			t.lost = err
			t.cancel() // openai-go returns at once instead of sending again
		}
	case err == nil && res.StatusCode >= http.StatusInternalServerError:
		t.maybe = true
		if t.write {
			res.Header.Set("X-Should-Retry", "false")
		}
	}
	return res, err
}

// notSent reports whether err is a failure before the request left: the
// connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func isStatus(err error, code int) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == code
}

func isClientError(err error) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode >= 400 && e.StatusCode < 500
}

// apiErr wraps an error of the request what on conversation id, with the
// API's message (not for 401 and 403, whose message may quote part of the
// API key).
func apiErr(what, id string, err error) error {
	var e *openai.Error
	msg := ""
	if errors.As(err, &e) && e.Message != "" && e.StatusCode != http.StatusUnauthorized && e.StatusCode != http.StatusForbidden {
		msg = fmt.Sprintf(" (%q)", e.Message)
	}
	if isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("openaigo: %s conversation %s: %w: %w%s", what, id, ErrConversationNotFound, err, msg)
	}
	return fmt.Errorf("openaigo: %s conversation %s: %w%s", what, id, err, msg)
}

// ItemPage is one page of a conversation's items as the API lists it
// (GET /v1/conversations/{id}/items): each item the raw JSON object the
// API sent.
type ItemPage struct {
	Items   []session.Item
	FirstID string
	LastID  string
	HasMore bool
}

// DecodeItemPage decodes a list page of the Conversations API, keeping
// each item's bytes as sent. A body that is not such a page, or an item
// that is not a JSON object, is an error (the latter wraps
// session.ErrInvalidItem and names the item's position).
func DecodeItemPage(body []byte) (ItemPage, error) {
	var raw struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore *bool             `json:"has_more"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return ItemPage{}, fmt.Errorf("openaigo: item page: %w", err)
	}
	if dec.More() {
		return ItemPage{}, errors.New("openaigo: item page: data after the page object")
	}
	if raw.Data == nil || raw.HasMore == nil {
		return ItemPage{}, errors.New(`openaigo: item page: "data" or "has_more" missing`)
	}
	page := ItemPage{HasMore: *raw.HasMore, Items: make([]session.Item, len(raw.Data))}
	if raw.FirstID != nil {
		page.FirstID = *raw.FirstID
	}
	if raw.LastID != nil {
		page.LastID = *raw.LastID
	}
	for i, d := range raw.Data {
		it, err := session.NewItem(d)
		if err != nil {
			return ItemPage{}, fmt.Errorf("openaigo: item page: item %d: %w", i, err)
		}
		page.Items[i] = it
	}
	return page, nil
}

var (
	_ session.LatestReader  = (*ConversationsSession)(nil)
	_ session.IDInsensitive = (*ConversationsSession)(nil)
)
